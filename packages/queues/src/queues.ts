/**
 * The queue catalog: names (persisted data: never renamed), payload schemas, priorities and job options, and
 * the Redis connections BullMQ needs. Both the API (producer) and the worker (consumer) use this module.
 *
 * @module
 */
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { Type, type Static } from '@sinclair/typebox';
import { Queue, type JobsOptions, type QueueOptions } from 'bullmq';
import IORedis, { type Redis, type RedisOptions } from 'ioredis';
import type { Config } from '@mailroom/platform/config';

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

/**
 * Priority lanes of the `send` queue (BullMQ: lower runs first). Transactional mail is never stuck behind a
 * campaign: a waiting transactional job is always taken before any waiting campaign job.
 */
export const SendPriority = { transactional: 1, workflow: 5, campaign: 10 } as const;

/** Payload of a `send` job. The email row holds everything else; the job only points at it. */
export const SendJobPayload = Type.Object(
  {
    emailId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false },
);
export type SendJobPayload = Static<typeof SendJobPayload>;

/**
 * Job options of a `send` job.
 *
 * @param config - `sendMaxAttempts` (transient failures) and `sendBackoffMs` (exponential backoff base, ms).
 * @param priority - a {@link SendPriority} lane.
 */
export function sendJobOptions(config: Pick<Config, 'sendMaxAttempts' | 'sendBackoffMs'>, emailId: string, priority: number): JobsOptions {
  return {
    jobId: emailId,
    priority,
    attempts: config.sendMaxAttempts,
    backoff: { type: 'exponential', delay: config.sendBackoffMs },
    // Status lives in Postgres; Redis keeps recent history only, for the dashboard.
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/**
 * A Redis connection for BullMQ, the rate limiter and the send-rate gate: a single server (`REDIS_URL`) or a
 * Redis Cluster (`REDIS_CLUSTER_NODES`; every key carries the `QUEUE_PREFIX` hash tag, so each queue's keys and
 * Lua scripts stay in one slot, as BullMQ requires).
 *
 * - `worker`: `maxRetriesPerRequest: null`, as BullMQ workers require (blocking commands wait out outages).
 * - `producer`: fails fast (no offline queue, one retry), so an API request never hangs on a Redis outage:
 *   the email row is already committed and the reconciler enqueues it later.
 *
 * A cluster client is returned as the `Redis` type: it answers the same commands (ioredis `Cluster`), and BullMQ
 * and rate-limiter-flexible detect it.
 */
export function createRedis(config: Pick<Config, 'redisUrl' | 'redisClusterNodes'>, role: 'worker' | 'producer'): Redis {
  const options: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: false }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000 };
  let redis: Redis;
  if (config.redisClusterNodes.length > 0) {
    const url = new URL(config.redisUrl);
    const nodeOptions: RedisOptions = {
      ...options,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
    const nodes = config.redisClusterNodes.map((n) => {
      const [host, port] = n.split(':');
      return { host: host, port: Number(port) };
    });
    redis = new IORedis.Cluster(nodes, {
      redisOptions: nodeOptions,
      enableOfflineQueue: role === 'worker',
      enableReadyCheck: true,
      ...(role === 'worker' ? {} : { clusterRetryStrategy: (times: number) => Math.min(times * 200, 2_000) }),
    }) as unknown as Redis;
  } else {
    redis = new IORedis(config.redisUrl, options);
  }
  // Connection errors are retried by ioredis; without a listener they would be unhandled 'error' events.
  redis.on('error', () => undefined);
  return redis;
}

/** Options shared by every Queue/Worker of this process: the connection and the (hash-tagged) key prefix. */
export function queueOptions(config: Pick<Config, 'queuePrefix'>, connection: Redis): QueueOptions {
  return { connection, prefix: config.queuePrefix };
}

/** Creates the producer side of the `send` queue. */
export function createSendQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue<SendJobPayload> {
  return new Queue<SendJobPayload>(QueueName.send, queueOptions(config, connection));
}

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
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/** Creates the producer side of the `contact-import` queue. */
export function createImportQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue<ImportJobPayload> {
  return new Queue<ImportJobPayload>(QueueName.contactImport, queueOptions(config, connection));
}

/** Payload of a `campaign` job; the campaign row holds the state. */
export const CampaignJobPayload = Type.Object(
  {
    campaignId: Type.String({ format: 'uuid' }),
    projectId: Type.String({ format: 'uuid' }),
  },
  { additionalProperties: false },
);
export type CampaignJobPayload = Static<typeof CampaignJobPayload>;

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
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/** Creates the producer side of the `campaign` queue. */
export function createCampaignQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue<CampaignJobPayload> {
  return new Queue<CampaignJobPayload>(QueueName.campaign, queueOptions(config, connection));
}

/**
 * Makes sure a campaign has exactly one job, due at `runAt`: adds it when missing (or finished), moves a delayed
 * one to the new time (a reschedule), and leaves a waiting or running one alone (it re-reads the campaign).
 */
export async function scheduleCampaignJob(queue: Queue<CampaignJobPayload>, campaign: { id: string; projectId: string }, runAt: Date): Promise<void> {
  const delay = runAt.getTime() - Date.now();
  const job = await queue.getJob(campaign.id);
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
  await queue.add('campaign', { campaignId: campaign.id, projectId: campaign.projectId }, campaignJobOptions(campaign.id, delay));
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
        return job.promote().then(() => true, () => false);
      }),
    );
    promoted += woken.filter(Boolean).length;
  }
  return promoted;
}

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

/** Name of the worker's backoff strategy that reads {@link Config.webhookRetryScheduleMs}. */
export const WEBHOOK_BACKOFF = 'webhook-schedule';


/**
 * Job options of a `webhook` job: one attempt plus one per entry of the retry schedule, waits taken from the
 * schedule by the worker's {@link WEBHOOK_BACKOFF} strategy.
 */
export function webhookJobOptions(config: Pick<Config, 'webhookRetryScheduleMs'>, ref: WebhookDeliveryRef): JobsOptions {
  return {
    jobId: `wh-${ref.id}-${ref.generation}`,
    attempts: config.webhookRetryScheduleMs.length + 1,
    backoff: { type: WEBHOOK_BACKOFF },
    removeOnComplete: { age: 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/** Creates the producer side of the `webhook` queue. */
export function createWebhookQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue<WebhookJobPayload> {
  return new Queue<WebhookJobPayload>(QueueName.webhook, queueOptions(config, connection));
}

/**
 * Enqueues deliveries written by a committed transaction. A failure is logged by the caller and repaired by the
 * reconciler (the rows are the outbox), so it never fails the work that produced the events.
 */
export async function enqueueWebhookDeliveries(
  queue: Queue<WebhookJobPayload>,
  config: Pick<Config, 'webhookRetryScheduleMs'>,
  refs: readonly WebhookDeliveryRef[],
): Promise<void> {
  if (refs.length === 0) return;
  await queue.addBulk(
    refs.map((ref) => ({ name: 'webhook', data: { deliveryId: ref.id, projectId: ref.projectId, generation: ref.generation }, opts: webhookJobOptions(config, ref) })),
  );
}

/**
 * {@link enqueueWebhookDeliveries} for code whose own work is already committed: a failure (Redis down) is
 * logged, never thrown; the reconciler enqueues those deliveries later.
 */
export async function announceWebhookDeliveries(
  queue: Queue<WebhookJobPayload>,
  config: Pick<Config, 'webhookRetryScheduleMs'>,
  refs: readonly WebhookDeliveryRef[],
  log: { warn: (o: object, m: string) => void },
): Promise<void> {
  try {
    await enqueueWebhookDeliveries(queue, config, refs);
  } catch (err) {
    log.warn({ err, deliveries: refs.length }, 'webhook enqueue failed; the reconciler will enqueue these deliveries');
  }
}

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
    removeOnFail: { age: 7 * 24 * 3600 },
  };
}

/** Creates the producer side of the `workflow` queue. */
export function createWorkflowQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue<WorkflowJobPayload> {
  return new Queue<WorkflowJobPayload>(QueueName.workflow, queueOptions(config, connection));
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
