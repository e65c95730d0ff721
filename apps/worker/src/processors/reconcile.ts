/**
 * The reconciler: Postgres is the source of truth, so any email row still `queued` (or `sending` past its
 * lease), any `scheduled` email due before the next pass (a job delayed to its time), any contact import still `queued`/`running` and any campaign SENDING or due (or CANCELLED with rows
 * to sweep), any pending webhook delivery past its due time and any live workflow execution overdue without a
 * live job gets one. Covers a Redis outage or
 * flush after acceptance, and a crash between the API's commit and its enqueue. Each pass also deletes expired
 * idempotency keys, uploads abandoned mid-way and SNS message ids past their retention.
 *
 * Runs as the `reconcile` maintenance task (see `maintenance.ts`): scheduled in process memory, one pass per
 * interval across all processes; it keeps running after Redis loses everything.
 *
 * @module
 */
import type { JobType, Queue } from 'bullmq';
import { SendPriority, type SendJobPayload } from '@mailroom/queues/catalog';
import type { Queues } from '@mailroom/queues/create';
import {
  enqueueImport,
  enqueueSendJobs,
  enqueueWebhookDeliveries,
  scheduleCampaignJob,
  scheduleSendJob,
  enqueueExecutions,
} from '@mailroom/queues/enqueue';
import { SNS_MESSAGE_RETENTION_DAYS } from '@mailroom/feedback/sns';
import { type Config } from '@mailroom/config/config';
import { type Logger, logged } from '@mailroom/platform/logger';
import { oncePerInterval, type MaintenanceTask } from './maintenance';
import { activeCampaigns } from '@mailroom/campaigns/queries/campaigns';
import { overdueExecutions } from '@mailroom/workflows/queries/workflow-engine';
import { pendingEmails, stillPendingEmails } from '@mailroom/sending/queries/emails';
import { dueScheduledEmails, type DueScheduledEmail } from '@mailroom/sending/queries/scheduled-emails';
import { pendingImports } from '@mailroom/contacts/queries/imports';
import { pruneSnsMessages } from '@mailroom/feedback/queries/feedback';
import { purgeIdempotencyKeys } from '@mailroom/sending/queries/idempotency';
import { stalePendingDeliveries } from '@mailroom/webhooks/queries/webhooks';
import { type Database } from '@mailroom/db/client';

/** An upload not touched for this long (ms) was abandoned by its API process. */
const ABANDONED_UPLOAD_MS = 3600_000;

const BATCH = 500;

/** Result of one pass. */
export interface ReconcileResult {
  checked: number;
  enqueued: number;
  /** Scheduled emails due before the next pass whose job was made, moved or woken (`scheduleSendJob`). */
  scheduledChecked: number;
  importsEnqueued: number;
  campaignsEnqueued: number;
  webhooksEnqueued: number;
  executionsEnqueued: number;
}

/** Queues the reconciler feeds. */
export interface ReconcileDeps {
  config: Config;
  database: Database;
  queues: Queues;
  logger: Logger;
}

/**
 * Gives every SENDING campaign, and every SCHEDULED one due before the next pass, a live job; wakes a delayed
 * job of a campaign already due (a reschedule whose job move was missed). @returns how many jobs were made or woken.
 */
async function reconcileCampaigns(deps: ReconcileDeps): Promise<number> {
  const active = await activeCampaigns(deps.database.db, deps.config.reconcileIntervalMs);
  let fixed = 0;
  for (const c of active) {
    const state = await deps.queues.campaign.getJobState(c.id);
    const runAt = c.status === 'SCHEDULED' ? (c.scheduledAt ?? new Date()) : new Date();
    const lost = state === 'unknown' || state === 'completed' || state === 'failed';
    const overslept = state === 'delayed' && c.status === 'SCHEDULED' && runAt.getTime() <= Date.now();
    if (!lost && !overslept) continue;
    await scheduleCampaignJob(deps.queues.campaign, c, runAt);
    fixed++;
  }
  return fixed;
}

/**
 * Gives every scheduled email due before the next pass (`RECONCILE_INTERVAL_MS`, and a second more) a job delayed to
 * its time, and wakes one that overslept: a job lost with Redis, one never added (the API's enqueue failed), or one
 * left at an earlier time by a reschedule whose move was missed. Later emails keep their delayed jobs until a pass
 * nearer their time looks at them. @returns how many emails were looked at.
 */
async function reconcileScheduled(
  deps: ReconcileDeps,
  withinMs = deps.config.reconcileIntervalMs + 1000,
): Promise<number> {
  let after: DueScheduledEmail | null = null;
  let checked = 0;
  for (;;) {
    const batch = await dueScheduledEmails(deps.database.db, withinMs, after, BATCH);
    if (batch.length === 0) break;
    after = batch[batch.length - 1];
    checked += batch.length;
    for (let i = 0; i < batch.length; i += 50) {
      await Promise.all(
        batch.slice(i, i + 50).map((e) =>
          scheduleSendJob(
            deps.queues.send,
            deps.config,
            { emailId: e.id, projectId: e.projectId, priority: SendPriority[e.source] },
            e.scheduledAt,
          ).catch(
            // A job that moved on between the look at its state and the move (it ran): its claim reads the row.
            (err: unknown) =>
              deps.logger.debug({ err, emailId: e.id }, 'scheduled email: job not checked; the next pass looks again'),
          ),
        ),
      );
    }
    if (batch.length < BATCH) break;
  }
  return checked;
}

/**
 * Re-adds the jobs of pending webhook deliveries not touched for `RECONCILE_AFTER_MS` past their due time (their
 * job was lost, or never added). A live job has the same id, so adding again is a no-op for it.
 */
async function reconcileWebhooks(deps: ReconcileDeps): Promise<number> {
  let afterId: string | null = null;
  let enqueued = 0;
  for (;;) {
    const batch = await stalePendingDeliveries(deps.database.db, deps.config.reconcileAfterMs, afterId, BATCH);
    if (batch.length === 0) break;
    afterId = batch[batch.length - 1].id;
    await enqueueWebhookDeliveries(deps.queues.webhook, deps.config, batch);
    enqueued += batch.length;
    if (batch.length < BATCH) break;
  }
  return enqueued;
}

/**
 * Re-adds jobs for live workflow executions overdue by `RECONCILE_AFTER_MS` and not leased: their job was lost
 * (Redis flushed, a crash between a commit and its enqueue). The job id carries the due time, so repeated passes
 * over one overdue execution make one job.
 */
async function reconcileExecutions(deps: ReconcileDeps): Promise<number> {
  // One batch per pass: enqueued rows stay overdue until their jobs run.
  const batch = await overdueExecutions(deps.database.db, deps.config.reconcileAfterMs, BATCH);
  await enqueueExecutions(deps.queues.workflow, batch, deps.logger, 0, (x) => `r${x.dueAt.getTime()}`);
  return batch.length;
}

/** Re-creates the jobs of pending imports that have none. @returns how many. */
async function reconcileImports(deps: ReconcileDeps): Promise<number> {
  const pending = await pendingImports(deps.database.db, deps.config.reconcileAfterMs, ABANDONED_UPLOAD_MS);
  let enqueued = 0;
  for (const imp of pending) {
    const state = await deps.queues.import.getJobState(imp.id);
    if (state === 'completed' || state === 'failed')
      await logged(deps.queues.import.remove(imp.id), deps.logger, 'finished import job removal', 'debug');
    else if (state !== 'unknown') continue;
    await enqueueImport(deps.queues.import, imp);
    enqueued++;
  }
  return enqueued;
}

/** States of a send job that will still run. */
const LIVE_STATES: JobType[] = ['prioritized', 'wait', 'active', 'delayed', 'paused'];

/**
 * The emails carried by the send queue's live jobs of several emails (a campaign's, `b-<first email id>`): a
 * campaign email has no job under its own id while such a job carries it, and must not be given one (two jobs
 * would race for its row). Reads the live jobs' ids, then the data of those of several emails (at most a campaign
 * lane's worth per sending campaign).
 */
async function emailsInLiveBatchJobs(sendQueue: Queue<SendJobPayload>): Promise<Set<string>> {
  const ids = (await sendQueue.getRanges(LIVE_STATES, 0, -1)).filter((id) => id.startsWith('b-'));
  const carried = new Set<string>();
  for (let i = 0; i < ids.length; i += 100) {
    const jobs = await Promise.all(ids.slice(i, i + 100).map((id) => sendQueue.getJob(id)));
    for (const job of jobs) for (const id of job?.data.emailIds ?? []) carried.add(id);
  }
  return carried;
}

/**
 * One pass: pending emails older than `RECONCILE_AFTER_MS` (in id order, in batches of 500), then pending
 * imports, then expired idempotency keys.
 *
 * @param emailsAfterMs - the age (ms) from which a pending email is looked at, instead of `RECONCILE_AFTER_MS`:
 *   0 after Redis lost its data (`redis-loss.ts`), when every pending email's job is gone. Safe at any age: a job's
 *   id is its email's id (an enqueue racing the pass adds one job), a campaign email carried by a live job of
 *   several emails is left to it ({@link emailsInLiveBatchJobs}), and the claim lets one job send.
 * @returns how many email rows were checked and how many email and import jobs were (re-)created.
 */
export async function reconcileOnce(
  deps: ReconcileDeps,
  emailsAfterMs = deps.config.reconcileAfterMs,
): Promise<ReconcileResult> {
  const { config } = deps;
  const sendQueue = deps.queues.send;
  let afterId: string | null = null;
  let checked = 0;
  let enqueued = 0;
  for (;;) {
    const batch = await pendingEmails(deps.database.db, emailsAfterMs, afterId, BATCH);
    /**
     * Campaign emails carried by live jobs of several emails: read after each batch, when a campaign email of it
     * needs it. A campaign's feed enqueues its jobs before it moves the cursor `pendingEmails` reads, so every
     * campaign email of the batch whose job is live is in a read made after the batch. One read for the whole pass
     * missed the jobs fed while it went on (measured at 2,000/s: 5,500 emails given a second job, a third of the
     * campaign's rate lost for 10 s).
     */
    let carried: Promise<Set<string>> | undefined;
    if (batch.length === 0) break;
    checked += batch.length;
    afterId = batch[batch.length - 1].id;
    const states = await Promise.all(batch.map((e) => sendQueue.getJobState(e.id)));
    const candidates: { email: (typeof batch)[number]; finishedJob: boolean }[] = [];
    for (let i = 0; i < batch.length; i++) {
      const state = states[i];
      if (state === 'unknown' && batch[i].source === 'campaign') {
        carried ??= emailsInLiveBatchJobs(sendQueue);
        if (!(await carried).has(batch[i].id)) candidates.push({ email: batch[i], finishedJob: false });
      } else if (state === 'unknown') candidates.push({ email: batch[i], finishedJob: false });
      else if (state === 'completed' || state === 'failed') candidates.push({ email: batch[i], finishedJob: true });
    }
    // Read again: the batch was read pending before the job states, and a job may have sent its emails between
    // (measured at 2,000/s: a job of 50 finishes every 25 ms, and 1,701 sent emails got a job again in one pass).
    const pending =
      candidates.length > 0
        ? await stillPendingEmails(
            deps.database.db,
            candidates.map((c) => c.email.id),
          )
        : new Set<string>();
    const missing = [];
    for (const { email, finishedJob } of candidates) {
      if (!pending.has(email.id)) continue;
      // A finished job whose row is still pending: drop the stale job so a new one can take its id.
      if (finishedJob) await logged(sendQueue.remove(email.id), deps.logger, 'stale send job removal', 'debug');
      missing.push(email);
    }
    if (missing.length > 0) {
      await enqueueSendJobs(
        sendQueue,
        config,
        missing.map((e) => ({ emailId: e.id, projectId: e.projectId, priority: SendPriority[e.source] })),
      );
      enqueued += missing.length;
    }
    if (batch.length < BATCH) break;
  }
  if (enqueued > 0) deps.logger.warn({ checked, enqueued }, 'reconciler re-enqueued emails without a job');
  const scheduledChecked = await reconcileScheduled(deps);
  const importsEnqueued = await reconcileImports(deps);
  if (importsEnqueued > 0)
    deps.logger.warn({ imports: importsEnqueued }, 'reconciler re-enqueued imports without a job');
  const campaignsEnqueued = await reconcileCampaigns(deps);
  if (campaignsEnqueued > 0) deps.logger.warn({ campaigns: campaignsEnqueued }, 'reconciler re-created campaign jobs');
  const webhooksEnqueued = await reconcileWebhooks(deps);
  if (webhooksEnqueued > 0)
    deps.logger.warn({ deliveries: webhooksEnqueued }, 'reconciler re-enqueued webhook deliveries');
  const executionsEnqueued = await reconcileExecutions(deps);
  if (executionsEnqueued > 0)
    deps.logger.warn({ executions: executionsEnqueued }, 'reconciler re-enqueued overdue workflow executions');
  await purgeIdempotencyKeys(deps.database.db);
  await pruneSnsMessages(deps.database.db, SNS_MESSAGE_RETENTION_DAYS);
  return {
    checked,
    enqueued,
    scheduledChecked,
    importsEnqueued,
    campaignsEnqueued,
    webhooksEnqueued,
    executionsEnqueued,
  };
}

/**
 * The reconciler as a maintenance task: every `RECONCILE_INTERVAL_MS`; its lock expires just before the next tick
 * (not released), so one pass per interval runs across all processes. `onPass` gets each pass's result (metrics).
 */
export function reconcileTask(deps: ReconcileDeps & { onPass?: (r: ReconcileResult) => void }): MaintenanceTask {
  return oncePerInterval(
    'reconcile',
    deps.config.reconcileIntervalMs,
    async () => {
      const r = await reconcileOnce(deps);
      deps.onPass?.(r);
      return r;
    },
    1000,
  );
}
