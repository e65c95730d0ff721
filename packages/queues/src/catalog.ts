/**
 * The queue catalog: per queue its name (persisted data: never renamed), its payload schema, its job options and
 * its consumer settings (concurrency, job lock, limiter). The API (producer), the worker (consumer), the
 * reconciler, the dashboard and the tests all loop over {@link queueCatalog}; adding a queue means one entry here.
 *
 * @module
 */
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { Type, type Static, type TSchema } from '@sinclair/typebox';
import type { JobsOptions, WorkerOptions } from 'bullmq';
import type { QueueConfig } from './config';

/** Queue names. They are keys in Redis: renaming one strands its jobs. */
export const QueueName = {
  /** One job per email row (`jobId` = email id). */
  send: 'send',
  /** One job per contact import (`jobId` = import id). */
  contactImport: 'contact-import',
  /** One long-lived job per started or scheduled campaign (`jobId` = campaign id): fan-out, feeding, completion. */
  campaign: 'campaign',
  /** One job per webhook delivery round (`jobId` = `wh-<delivery id>-<generation>`); the delivery row is the record. */
  webhook: 'webhook',
  /** Runs of workflow executions (`jobId` = `wf-<execution>-<version>[-<suffix>]`); the execution row is the record. */
  workflow: 'workflow',
  /** Passes of the reconciler and the segment and domain refreshers (`jobId` = `<task>-<tick>`). */
  maintenance: 'maintenance',
} as const;
export type QueueName = (typeof QueueName)[keyof typeof QueueName];

/** Jobs finished this long ago (s) are dropped from Redis: the rows in Postgres are the record. */
const KEEP_FAILED = { age: 7 * 24 * 3600 };

// ---------------------------------------------------------------------------------------------------- send

/**
 * Priority lanes of the `send` queue (BullMQ: lower runs first). Transactional mail is never stuck behind a
 * campaign: a waiting transactional job is always taken before any waiting campaign job.
 */
export const SendPriority = { transactional: 1, workflow: 5, campaign: 10 } as const;

/** Most emails one `send` job may carry (`emailIds`). */
export const MAX_SEND_JOB_EMAILS = 500;

/**
 * Payload of a `send` job. The email rows hold everything else; the job only points at them.
 *
 * A job sends `emailId`; a campaign's job may carry several of the campaign's emails (`emailIds`, `emailId` first:
 * the feed's `CAMPAIGN_JOB_EMAILS`), sent one after the other in the job's worker slot, so the queue's bookkeeping
 * is paid per job, not per email. Each email is still claimed, sent and finished on its own row: the row, not the
 * job, is what makes a send happen once.
 */
export const SendJobPayload = Type.Object(
  {
    emailId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
    emailIds: Type.Optional(
      Type.Array(Type.String({ format: 'uuid' }), { minItems: 1, maxItems: MAX_SEND_JOB_EMAILS }),
    ),
  },
  { additionalProperties: false },
);
export type SendJobPayload = Static<typeof SendJobPayload>;

/**
 * The job id of a `send` job carrying several emails: `b-<first email id>`, apart from the one-email jobs' ids (the
 * email id) so an email of the job can be given a job of its own while the job still runs.
 */
export function sendBatchJobId(emailIds: readonly string[]): string {
  return `b-${emailIds[0]}`;
}

/**
 * Job options of a `send` job.
 *
 * @param config - `sendMaxAttempts` (transient failures) and `sendBackoffMs` (exponential backoff base, ms).
 * @param jobId - the email id (one email), or {@link sendBatchJobId} (several).
 * @param priority - a {@link SendPriority} lane.
 * @param delayMs - run the job this many ms from now.
 * @param attempts - attempts the job may make: `sendMaxAttempts`, or what is left of them for an email whose
 *   earlier attempt was made in a job carrying several.
 */
export function sendJobOptions(
  config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>,
  jobId: string,
  priority: number,
  delayMs = 0,
  attempts = config.sendMaxAttempts,
): JobsOptions {
  return {
    jobId,
    priority,
    // A scheduled email's job waits delayed until its time (`scheduleSendJob`).
    ...(delayMs > 0 ? { delay: delayMs } : {}),
    attempts,
    backoff: { type: 'exponential', delay: config.sendBackoffMs },
    // Status lives in Postgres; Redis keeps recent history only, for the dashboard.
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: KEEP_FAILED,
  };
}

/**
 * The `send` worker's limiter for `emailsPerSecond`: up to 100/s, one job start every `floor(1000 / rate)` ms;
 * above, `ceil(rate / 100)` starts per `floor(1000 × max / rate)` ms (a window of about 10 ms). BullMQ's limiter
 * counts in whole milliseconds, and a worker whose fetch is refused waits at least 1 ms before asking again
 * (`max: 1` capped a raised limit at well under 1,000 starts/s, less than the rate asked for).
 *
 * BullMQ's limiter is global (kept in Redis, shared by every worker process). A limiter of
 * `{ max: 14, duration: 1000 }` releases bursts of 14 at each window start, so a sliding second can see 28; this
 * smooth one avoids the bursts (docs/decisions/0005-smooth-limiter-and-rate-gate.md). It paces jobs so they wait in
 * Redis rather than in worker memory; the exact bound is enforced at the SES call by the worker's send-rate gate, which
 * is slightly slower, so jobs arrive at the gate just ahead of their slot.
 */
export function smoothLimiter(emailsPerSecond: number): { max: number; duration: number } {
  const max = Math.max(1, Math.ceil(emailsPerSecond / 100));
  return { max, duration: Math.max(1, Math.floor((1000 * max) / emailsPerSecond)) };
}

// -------------------------------------------------------------------------------------------- contact-import

/** Payload of a `contact-import` job; the import row holds the file and the progress. */
export const ImportJobPayload = Type.Object(
  {
    importId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false },
);
export type ImportJobPayload = Static<typeof ImportJobPayload>;

/** Attempts of an import job: each resumes after the last committed batch. */
export const IMPORT_ATTEMPTS = 5;

/** Job options of a `contact-import` job (`jobId` = import id, so the reconciler cannot duplicate it). */
export function importJobOptions(importId: string): JobsOptions {
  return {
    jobId: importId,
    attempts: IMPORT_ATTEMPTS,
    backoff: { type: 'exponential', delay: 2_000 },
    removeOnComplete: { age: 24 * 3600 },
    removeOnFail: KEEP_FAILED,
  };
}

// -------------------------------------------------------------------------------------------------- campaign

/** Payload of a `campaign` job; the campaign row holds the state. */
export const CampaignJobPayload = Type.Object(
  {
    campaignId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false },
);
export type CampaignJobPayload = Static<typeof CampaignJobPayload>;

/** Campaign jobs run at once per worker process. */
export const CAMPAIGN_CONCURRENCY = 4;

/**
 * Job options of a `campaign` job (`jobId` = campaign id, so the API, the scheduler and the reconciler can never
 * run two for one campaign). A scheduled campaign's job is delayed until `scheduledAt`.
 *
 * @param delayMs - delay before the first run (ms); 0 to start now.
 */
export function campaignJobOptions(campaignId: string, delayMs: number): JobsOptions {
  return {
    jobId: campaignId,
    delay: Math.max(0, delayMs),
    attempts: 20,
    backoff: { type: 'exponential', delay: 1_000 },
    // The campaign row is the record; a finished job is removed so its id is free (the reconciler re-adds one
    // for a campaign still SENDING or due).
    removeOnComplete: true,
    removeOnFail: KEEP_FAILED,
  };
}

// --------------------------------------------------------------------------------------------------- webhook

/** Payload of a `webhook` job; the delivery row holds the event, the endpoint row the URL and secret. */
export const WebhookJobPayload = Type.Object(
  {
    deliveryId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
    generation: Type.Integer({ minimum: 0 }),
  },
  { additionalProperties: false },
);
export type WebhookJobPayload = Static<typeof WebhookJobPayload>;

/** Name of the worker's backoff strategy that reads {@link QueueConfig.webhookRetryScheduleMs}. */
export const WEBHOOK_BACKOFF = 'webhook-schedule';

/**
 * Job options of a `webhook` job: one attempt plus one per entry of the retry schedule, waits taken from the
 * schedule by the worker's {@link WEBHOOK_BACKOFF} strategy.
 */
export function webhookJobOptions(
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>,
  ref: WebhookDeliveryRef,
): JobsOptions {
  return {
    jobId: `wh-${ref.id}-${ref.generation}`,
    attempts: config.webhookRetryScheduleMs.length + 1,
    backoff: { type: WEBHOOK_BACKOFF },
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: KEEP_FAILED,
  };
}

/**
 * The wait (ms) before retry number `attemptsMade` (1-based: after the first failure, `schedule[0]`); the last
 * entry repeats if attempts outnumber it.
 */
export function webhookBackoffMs(schedule: readonly number[], attemptsMade: number): number {
  if (schedule.length === 0) return 0;
  return schedule[Math.min(attemptsMade, schedule.length) - 1] ?? schedule[0];
}

// -------------------------------------------------------------------------------------------------- workflow

/** Payload of a `workflow` job: run execution `executionId` as far as it can go now. */
export const WorkflowJobPayload = Type.Object(
  {
    executionId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false },
);
export type WorkflowJobPayload = Static<typeof WorkflowJobPayload>;

/** An execution to run, at the version it was seen at. */
export interface ExecutionJobRef {
  id: string;
  projectId: string;
  version: number;
}

/**
 * Job options of a `workflow` job. `jobId` = `wf-<execution>-<version>[-<suffix>]`: the API, the inbox drainer,
 * the engine and the reconciler asking for the same run of the same version make one job. Runs are idempotent
 * (lease + compare-and-set), so an extra job is harmless.
 *
 * @param delayMs - wait before the run (ms): the end of a DELAY, a WAIT_FOR_EVENT timeout, a WEBHOOK retry.
 */
export function workflowJobOptions(ref: ExecutionJobRef, delayMs = 0, suffix?: string): JobsOptions {
  return {
    jobId: `wf-${ref.id}-${ref.version}${suffix ? `-${suffix}` : ''}`,
    delay: Math.max(0, Math.round(delayMs)),
    attempts: 10,
    backoff: { type: 'exponential', delay: 1_000 },
    // The execution row is the record; a finished job frees its id at once.
    removeOnComplete: true,
    removeOnFail: KEEP_FAILED,
  };
}

// ----------------------------------------------------------------------------------------------- maintenance

/** Payload of a `maintenance` job: none; the job's name is the task. */
export const MaintenanceJobPayload = Type.Object({}, { additionalProperties: false });
export type MaintenanceJobPayload = Static<typeof MaintenanceJobPayload>;

/**
 * Job options of one tick of a maintenance task (`jobId` = `<task>-<tick>`, so N processes ticking add one job):
 * kept a while for the dashboard, never retried (the next tick is the retry).
 */
export function maintenanceJobOptions(task: string, tick: number): JobsOptions {
  return {
    jobId: `${task}-${tick}`,
    attempts: 1,
    removeOnComplete: { count: 100, age: 3600 },
    removeOnFail: { count: 500, age: 7 * 24 * 3600 },
  };
}

// ---------------------------------------------------------------------------------------------------- catalog

/**
 * A queue's consumer settings, apart from the connection and `autorun` (the worker process sets those).
 * `lockDuration` and `stalledInterval` are in ms.
 */
export type WorkerSettings = Pick<
  WorkerOptions,
  'concurrency' | 'lockDuration' | 'stalledInterval' | 'maxStalledCount' | 'limiter' | 'settings'
>;

/** One entry of the catalog. */
export interface QueueSpec<S extends TSchema = TSchema> {
  /** The persisted queue name. */
  name: QueueName;
  /** The payload every job of this queue carries (the worker validates it). */
  payload: S;
  /** Job options of one job; each queue has its own arguments (ids, priority, delay). */
  jobOptions: (...args: never[]) => JobsOptions;
  /**
   * The consumer settings.
   *
   * @param emailsPerSecond - the send rate in force (only the `send` queue's limiter reads it).
   */
  worker: (config: QueueConfig, emailsPerSecond: number) => WorkerSettings;
}

/** Every queue, keyed as in {@link Queues} (`import` is the queue named `contact-import`), in dashboard order. */
export const queueCatalog = {
  send: {
    name: QueueName.send,
    payload: SendJobPayload,
    jobOptions: sendJobOptions,
    worker: (config, emailsPerSecond) => ({
      concurrency: config.sendConcurrency,
      limiter: smoothLimiter(emailsPerSecond),
      lockDuration: config.workerLockMs,
      stalledInterval: config.workerLockMs,
      // A job whose worker died is retried, not failed: the claim makes a retry safe.
      maxStalledCount: 1_000,
    }),
  },
  import: {
    name: QueueName.contactImport,
    payload: ImportJobPayload,
    jobOptions: importJobOptions,
    // A few long jobs per process, no rate limit (imports write Postgres, not SES). BullMQ renews the lock while a
    // job runs; a worker that dies leaves its job stalled, and another resumes it from the last committed batch.
    worker: (config) => ({
      concurrency: config.importConcurrency,
      lockDuration: config.workerLockMs,
      stalledInterval: config.workerLockMs,
      maxStalledCount: 100,
    }),
  },
  campaign: {
    name: QueueName.campaign,
    payload: CampaignJobPayload,
    jobOptions: campaignJobOptions,
    // No rate limit: a campaign job writes Postgres and enqueues `send` jobs, which carry the SES limit.
    worker: (config) => ({
      concurrency: CAMPAIGN_CONCURRENCY,
      lockDuration: config.workerLockMs,
      stalledInterval: config.workerLockMs,
      maxStalledCount: 100,
    }),
  },
  webhook: {
    name: QueueName.webhook,
    payload: WebhookJobPayload,
    jobOptions: webhookJobOptions,
    // Many deliveries in flight (they wait on other people's servers, not on SES); a lock that outlasts a request.
    worker: (config) => ({
      concurrency: config.webhookConcurrency,
      lockDuration: Math.max(config.workerLockMs, config.webhookTimeoutMs * 2),
      stalledInterval: Math.max(config.workerLockMs, config.webhookTimeoutMs * 2),
      maxStalledCount: 10,
      settings: {
        backoffStrategy: (attemptsMade: number, type?: string) => {
          if (type !== WEBHOOK_BACKOFF) return 1_000;
          return webhookBackoffMs(config.webhookRetryScheduleMs, attemptsMade);
        },
      },
    }),
  },
  workflow: {
    name: QueueName.workflow,
    payload: WorkflowJobPayload,
    jobOptions: workflowJobOptions,
    // Many executions at once (a step is a few statements, or one HTTP call of a WEBHOOK step); a lock that
    // outlasts the longest WEBHOOK timeout (30 s).
    worker: (config) => ({
      concurrency: config.workflowConcurrency,
      lockDuration: Math.max(config.workerLockMs, 60_000),
      stalledInterval: Math.max(config.workerLockMs, 60_000),
      // A job whose worker died is retried, not failed: the lease and compare-and-set make a retry safe.
      maxStalledCount: 1_000,
    }),
  },
  maintenance: {
    name: QueueName.maintenance,
    payload: MaintenanceJobPayload,
    jobOptions: maintenanceJobOptions,
    // One pass at a time per process; a pass takes its own Redis lock besides (processors/maintenance.ts).
    worker: () => ({ concurrency: 1, lockDuration: 60_000, maxStalledCount: 1 }),
  },
} as const satisfies Record<string, QueueSpec>;

/** A queue's key in the catalog. */
export type QueueKey = keyof typeof queueCatalog;

/** The catalog's keys, in catalog order. */
export const QUEUE_KEYS = Object.keys(queueCatalog) as QueueKey[];

/** The payload type of queue `K`. */
export type PayloadOf<K extends QueueKey> = Static<(typeof queueCatalog)[K]['payload']>;
