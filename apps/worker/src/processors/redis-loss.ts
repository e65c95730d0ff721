/**
 * Reconciling at once when Redis has lost its data. Redis restarted without persistence (or flushed, or failed
 * over to an empty replica) has lost every job: the accepted emails wait in Postgres as `queued` rows, and the
 * periodic reconciler would find them only at its next pass and only once they are `RECONCILE_AFTER_MS` old
 * (defaults 30 s and 60 s: the last email of a restart measured 65 s late).
 *
 * Detection: a marker key, `<QUEUE_PREFIX>:redis-epoch`, that only a worker writes (SET NX, no expiry). Redis
 * without it has lost what we wrote, whatever its `run_id` (a restart that kept its data keeps the marker, and
 * needs nothing). Every worker process checks on start, whenever its connection is ready again (a restart
 * reconnects it), and every `REDIS_LOSS_CHECK_MS` (1 s; a flush does not reconnect); the one whose SET NX wins adds
 * a `reconcile-now` job to the `maintenance` queue, whose pass looks at every pending email whatever its age
 * (`reconcileOnce(deps, 0)`), then at imports, campaigns, webhook deliveries and workflow executions as usual,
 * and the same job again a few seconds later ({@link RECONCILE_NOW_FOLLOW_UPS_MS}) for what the API processes
 * accepted while their own connections were still coming back.
 * The marker is written before the job is added (and removed again if the add fails, so the next check retries);
 * a process that dies in between leaves the recovery to the periodic pass, as before. `RECONCILE_ON_REDIS_LOSS=false`
 * turns this off.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { Cluster, Redis } from 'ioredis';
import type { MaintenanceJobPayload } from '@mailroom/queues/catalog';
import { enqueueMaintenance } from '@mailroom/queues/enqueue';
import { type Logger, logged } from '@mailroom/platform/logger';
import { type MaintenanceTask } from './maintenance';
import { reconcileOnce, type ReconcileDeps, type ReconcileResult } from './reconcile';

/** The task's job (and lock) name in the `maintenance` queue. */
export const RECONCILE_NOW = 'reconcile-now';

/** How often (ms) each worker process looks for the marker. */
export const REDIS_LOSS_CHECK_MS = 1_000;

/**
 * When (ms after the loss is found) the pass runs again. An API process's queue connection reconnects on its own
 * backoff, a little after the worker's: an email it accepted in that window was committed after the first pass
 * and its enqueue failed, so it has no job. The follow-up passes find those at once instead of the periodic pass
 * `RECONCILE_AFTER_MS` later.
 */
export const RECONCILE_NOW_FOLLOW_UPS_MS: readonly number[] = [5_000, 15_000];

/** The marker's key: `<QUEUE_PREFIX>:redis-epoch` (its value: when it was written, ISO 8601). */
export function redisEpochKey(queuePrefix: string): string {
  return `${queuePrefix}:redis-epoch`;
}

/**
 * The pass run when Redis has lost its data: the reconciler over every pending email, whatever its age. Its lock
 * is released when it ends (one such pass at a time; the periodic pass keeps its own lock). A follow-up that comes
 * while a pass runs makes that pass run once more when it ends, rather than being skipped.
 */
export function reconcileNowTask(deps: ReconcileDeps & { onPass?: (r: ReconcileResult) => void }): MaintenanceTask {
  return {
    name: RECONCILE_NOW,
    intervalMs: 0,
    lockMs: 5 * 60_000,
    release: true,
    coalesce: true,
    run: async () => {
      const r = await reconcileOnce(deps, 0);
      deps.onPass?.(r);
      return r;
    },
  };
}

/**
 * Watches for the loss of Redis's data (see the module notes) and adds a `reconcile-now` job when it finds it.
 * A check that fails (Redis unreachable) is skipped: the next one, or the reconnection, looks again.
 *
 * @returns `check()` (one look; resolves `true` when this process found the loss and added the job) and `stop()`.
 */
export function watchRedisLoss(deps: {
  redis: Redis | Cluster;
  queue: Queue<MaintenanceJobPayload>;
  queuePrefix: string;
  logger: Logger;
  checkMs?: number;
}): { check: () => Promise<boolean>; stop: () => void } {
  const key = redisEpochKey(deps.queuePrefix);
  let running: Promise<boolean> | undefined;
  const look = async (): Promise<boolean> => {
    const written = await deps.redis.set(key, new Date().toISOString(), 'NX');
    if (written !== 'OK') return false;
    deps.logger.warn(
      { marker: key },
      'Redis holds none of our data (restarted empty, flushed, or new): reconciling every pending email now',
    );
    try {
      const now = Date.now();
      await enqueueMaintenance(deps.queue, RECONCILE_NOW, now);
      for (const delay of RECONCILE_NOW_FOLLOW_UPS_MS)
        await enqueueMaintenance(deps.queue, RECONCILE_NOW, now + delay, delay);
    } catch (err) {
      // Not added: without the marker, the next check tries again.
      await logged(deps.redis.del(key), deps.logger, 'Redis data marker removal', 'debug');
      throw err;
    }
    return true;
  };
  const check = (): Promise<boolean> => {
    // One look at a time per process; a look asked for meanwhile shares it.
    running ??= look()
      .catch((err: unknown) => {
        deps.logger.debug({ err }, 'Redis data check skipped');
        return false;
      })
      .finally(() => {
        running = undefined;
      });
    return running;
  };
  const onReady = () => void check();
  deps.redis.on('ready', onReady);
  const timer = setInterval(onReady, deps.checkMs ?? REDIS_LOSS_CHECK_MS);
  timer.unref();
  return {
    check,
    stop: () => {
      clearInterval(timer);
      deps.redis.off('ready', onReady);
    },
  };
}
