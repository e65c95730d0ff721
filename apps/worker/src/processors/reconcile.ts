/**
 * The reconciler: Postgres is the source of truth, so any email row still `queued` (or `sending` past its
 * lease) without a live job gets one. Covers a Redis outage or flush after acceptance, and a crash between the
 * API's commit and its enqueue.
 *
 * Runs on a timer in every worker process; a Redis lock (SET NX PX) lets one process do each pass. It uses
 * no persisted scheduler state, so it keeps running after Redis loses everything.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { sendJobOptions, SendPriority, type Config, type Logger, type SendJobPayload } from '@mailroom/core';
import { pendingEmails, type Database } from '@mailroom/db';

const BATCH = 500;

/** Result of one pass. */
export interface ReconcileResult {
  checked: number;
  enqueued: number;
}

/**
 * One pass over pending emails older than `RECONCILE_AFTER_MS`, in id order, in batches of 500.
 *
 * @returns how many rows were checked and how many jobs were (re-)created.
 */
export async function reconcileOnce(deps: {
  config: Config;
  database: Database;
  sendQueue: Queue<SendJobPayload>;
  logger: Logger;
}): Promise<ReconcileResult> {
  const { config, sendQueue } = deps;
  let afterId: string | null = null;
  let checked = 0;
  let enqueued = 0;
  for (;;) {
    const batch = await pendingEmails(deps.database.db, config.reconcileAfterMs, afterId, BATCH);
    if (batch.length === 0) break;
    checked += batch.length;
    afterId = batch[batch.length - 1]!.id;
    const states = await Promise.all(batch.map((e) => sendQueue.getJobState(e.id)));
    const missing = [];
    for (let i = 0; i < batch.length; i++) {
      const state = states[i];
      if (state === 'unknown') missing.push(batch[i]!);
      else if (state === 'completed' || state === 'failed') {
        // A finished job whose row is still pending: drop the stale job so a new one can take its id.
        await sendQueue.remove(batch[i]!.id).catch(() => undefined);
        missing.push(batch[i]!);
      }
    }
    if (missing.length > 0) {
      await sendQueue.addBulk(
        missing.map((e) => ({
          name: 'send',
          data: { emailId: e.id, projectId: e.projectId },
          opts: sendJobOptions(config, e.id, SendPriority[e.source]),
        })),
      );
      enqueued += missing.length;
    }
    if (batch.length < BATCH) break;
  }
  if (enqueued > 0) deps.logger.warn({ checked, enqueued }, 'reconciler re-enqueued emails without a job');
  return { checked, enqueued };
}

/**
 * Starts the periodic reconciler. @returns `stop()`, which waits for a running pass to end.
 */
export function startReconciler(deps: {
  config: Config;
  database: Database;
  sendQueue: Queue<SendJobPayload>;
  redis: Redis;
  logger: Logger;
}): { stop: () => Promise<void> } {
  const lockKey = `${deps.config.queuePrefix}:reconciler:lock`;
  let running: Promise<unknown> = Promise.resolve();
  let stopped = false;
  const tick = async () => {
    const got = await deps.redis.set(lockKey, String(process.pid), 'PX', Math.max(1000, deps.config.reconcileIntervalMs - 50), 'NX');
    if (got !== 'OK') return;
    await reconcileOnce(deps);
  };
  const timer = setInterval(() => {
    if (stopped) return;
    running = running.then(tick).catch((err) => deps.logger.error({ err }, 'reconciler pass failed'));
  }, deps.config.reconcileIntervalMs);
  timer.unref();
  return {
    stop: async () => {
      stopped = true;
      clearInterval(timer);
      await running;
    },
  };
}
