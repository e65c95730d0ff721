/**
 * One enqueue function per kind of job: every producer (the API, the worker's processors, the reconciler, the
 * maintenance timers) adds its jobs through these, so payloads, job names and job options are built in one place.
 *
 * @module
 */
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { Queue } from 'bullmq';
import type { QueueConfig } from './config';
import {
  campaignJobOptions,
  importJobOptions,
  maintenanceJobOptions,
  sendBatchJobId,
  sendJobOptions,
  webhookJobOptions,
  workflowJobOptions,
  type CampaignJobPayload,
  type ExecutionJobRef,
  type ImportJobPayload,
  type MaintenanceJobPayload,
  type SendJobPayload,
  type WebhookJobPayload,
  type WorkflowJobPayload,
} from './catalog';

/**
 * One `send` job: its email row (or rows), its project and its priority (a `SendPriority` lane, maybe demoted:
 * send-lanes.ts).
 */
export interface SendJobRef {
  emailId: string;
  projectId: string;
  priority: number;
  /** Run the job this many ms from now (a scheduled email's time), not at once. */
  delayMs?: number;
  /** Several emails of one campaign in one job, `emailId` first (see `SendJobPayload`); one or none: `emailId` alone. */
  emailIds?: readonly string[];
  /** Attempts the job may make, when fewer than `sendMaxAttempts` (an email retried out of a job carrying several). */
  attempts?: number;
}

/** The payload and options of one job. */
function sendJob(config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>, e: SendJobRef) {
  const several = e.emailIds && e.emailIds.length > 1 ? e.emailIds : undefined;
  return {
    name: 'send',
    data: several
      ? { emailId: several[0], projectId: e.projectId, emailIds: [...several] }
      : { emailId: e.emailId, projectId: e.projectId },
    opts: sendJobOptions(config, several ? sendBatchJobId(several) : e.emailId, e.priority, e.delayMs, e.attempts),
  };
}

/**
 * Adds the `send` jobs of committed email rows, in one round trip (`jobId` = email id, or `b-<first email id>` for
 * a job carrying several, so a row already queued is not queued twice). Throws when Redis fails: each caller
 * decides whether that fails its work or is left to the reconciler (the rows are the outbox).
 */
export async function enqueueSendJobs(
  queue: Queue<SendJobPayload>,
  config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>,
  emails: readonly SendJobRef[],
): Promise<void> {
  if (emails.length === 0) return;
  // One job (most requests): `add`, which skips the pipeline `addBulk` builds (it copies every script on the connection).
  if (emails.length === 1) {
    const job = sendJob(config, emails[0]);
    await queue.add(job.name, job.data, job.opts);
    return;
  }
  await queue.addBulk(emails.map((e) => sendJob(config, e)));
}

/**
 * Makes sure a scheduled email has one job due at `runAt` (its `scheduled_at`): adds it, delayed, when missing
 * (or finished: a stale job whose row is still scheduled), wakes a delayed one at once when `runAt` has come, and
 * moves a delayed one to `runAt` otherwise (a reschedule; the same time again for one already right). A waiting or running job is left
 * alone: its claim reads the row's time, and a job early for it waits again until then. Throws when Redis fails.
 */
export async function scheduleSendJob(
  queue: Queue<SendJobPayload>,
  config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>,
  email: SendJobRef,
  runAt: Date,
): Promise<void> {
  await ensureDueJob(queue, email.emailId, runAt, (delay) =>
    queue.add(
      'send',
      { emailId: email.emailId, projectId: email.projectId },
      sendJobOptions(config, email.emailId, email.priority, delay),
    ),
  );
}

/** Adds the job of a committed contact import (`jobId` = import id). Throws when Redis fails. */
export async function enqueueImport(
  queue: Queue<ImportJobPayload>,
  imp: { id: string; projectId: string },
): Promise<void> {
  await queue.add('import', { importId: imp.id, projectId: imp.projectId }, importJobOptions(imp.id));
}

/**
 * Makes sure a campaign has exactly one job, due at `runAt`: adds it when missing (or finished), moves a delayed
 * one to the new time (a reschedule), and leaves a waiting or running one alone (it re-reads the campaign).
 */
export async function scheduleCampaignJob(
  queue: Queue<CampaignJobPayload>,
  campaign: { id: string; projectId: string },
  runAt: Date,
): Promise<void> {
  await ensureDueJob(queue, campaign.id, runAt, (delay) =>
    queue.add(
      'campaign',
      { campaignId: campaign.id, projectId: campaign.projectId },
      campaignJobOptions(campaign.id, delay),
    ),
  );
}

/**
 * The job `jobId` of `queue`, due at `runAt`: a delayed one is woken (`runAt` has come) or moved to it, a waiting or
 * running one is left alone, a finished one (or none) is replaced by `add(delay)`, `delay` in ms (≤ 0: at once).
 * Throws when Redis fails.
 */
async function ensureDueJob(
  queue: Queue,
  jobId: string,
  runAt: Date,
  add: (delay: number) => Promise<unknown>,
): Promise<void> {
  const delay = runAt.getTime() - Date.now();
  const job = await queue.getJob(jobId);
  if (job) {
    const state = await job.getState();
    if (state === 'delayed') {
      if (delay <= 0) await job.promote();
      else await job.changeDelay(delay);
      return;
    }
    if (state !== 'completed' && state !== 'failed' && state !== 'unknown') return;
    await job.remove().catch(() => undefined);
  }
  await add(delay);
}

/**
 * Wakes the delayed jobs among `jobIds` at once (e.g. a resumed campaign's send jobs, which wait delayed while it
 * is paused). Jobs in any other state, or gone, are left alone. @returns how many were promoted.
 */
export async function promoteDelayedJobs(queue: Queue, jobIds: readonly string[]): Promise<number> {
  let promoted = 0;
  for (let i = 0; i < jobIds.length; i += 100) {
    const woken = await Promise.all(
      jobIds.slice(i, i + 100).map(async (id) => {
        const job = await queue.getJob(id);
        if (!job || !(await job.isDelayed())) return false;
        return job.promote().then(
          () => true,
          () => false,
        );
      }),
    );
    promoted += woken.filter(Boolean).length;
  }
  return promoted;
}

/**
 * Enqueues deliveries written by a committed transaction. A failure is logged by the caller and repaired by the
 * reconciler (the rows are the outbox), so it never fails the work that produced the events.
 */
export async function enqueueWebhookDeliveries(
  queue: Queue<WebhookJobPayload>,
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>,
  refs: readonly WebhookDeliveryRef[],
): Promise<void> {
  if (refs.length === 0) return;
  await queue.addBulk(
    refs.map((ref) => ({
      name: 'webhook',
      data: { deliveryId: ref.id, projectId: ref.projectId, generation: ref.generation },
      opts: webhookJobOptions(config, ref),
    })),
  );
}

/**
 * The relay of the webhook outbox: {@link enqueueWebhookDeliveries} for code whose own work (and its outbox rows)
 * is already committed. A failure (Redis down) is logged, never thrown; the reconciler enqueues those deliveries
 * later.
 */
export async function relayWebhookDeliveries(
  queue: Queue<WebhookJobPayload>,
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>,
  refs: readonly WebhookDeliveryRef[],
  log: { warn: (o: object, m: string) => void },
): Promise<void> {
  try {
    await enqueueWebhookDeliveries(queue, config, refs);
  } catch (err) {
    log.warn({ err, deliveries: refs.length }, 'webhook enqueue failed; the reconciler will enqueue these deliveries');
  }
}

/**
 * Enqueues runs of executions whose state is committed, in one round trip (`suffix`: one for all, or per
 * execution). A failure (Redis down) is logged, never thrown: the reconciler finds overdue executions in Postgres
 * and enqueues them.
 */
export async function enqueueExecutions<R extends ExecutionJobRef>(
  queue: Queue<WorkflowJobPayload>,
  refs: readonly R[],
  log: { warn: (o: object, m: string) => void },
  delayMs = 0,
  suffix?: string | ((ref: R) => string),
): Promise<void> {
  if (refs.length === 0) return;
  try {
    await queue.addBulk(
      refs.map((ref) => ({
        name: 'run',
        data: { executionId: ref.id, projectId: ref.projectId },
        opts: workflowJobOptions(ref, delayMs, typeof suffix === 'function' ? suffix(ref) : suffix),
      })),
    );
  } catch (err) {
    log.warn({ err, executions: refs.length }, 'workflow enqueue failed; the reconciler will enqueue these executions');
  }
}

/**
 * Adds the job of tick `tick` of maintenance task `task` (`jobId` = `<task>-<tick>`: every process ticking adds
 * the same job), run after `delayMs` (ms, default 0). Throws when Redis fails; the next tick tries again.
 */
export async function enqueueMaintenance(
  queue: Queue<MaintenanceJobPayload>,
  task: string,
  tick: number,
  delayMs = 0,
): Promise<void> {
  await queue.add(task, {}, { ...maintenanceJobOptions(task, tick), ...(delayMs > 0 ? { delay: delayMs } : {}) });
}
