/**
 * The queue catalog: names (persisted data: never renamed), payload schemas, priorities and job options, and
 * the Redis connections BullMQ needs. Both the API (producer) and the worker (consumer) use this module.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { Queue, type JobsOptions, type QueueOptions } from 'bullmq';
import IORedis, { type Redis, type RedisOptions } from 'ioredis';
import type { Config } from './config';

/** Queue names. They are keys in Redis: renaming one strands its jobs. */
export const QueueName = {
  /** One job per email row (`jobId` = email id). */
  send: 'send',
  /** One job per contact import (`jobId` = import id). */
  contactImport: 'contact-import',
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
 * A Redis connection for BullMQ.
 *
 * - `worker`: `maxRetriesPerRequest: null`, as BullMQ workers require (blocking commands wait out outages).
 * - `producer`: fails fast (no offline queue, one retry), so an API request never hangs on a Redis outage:
 *   the email row is already committed and the reconciler enqueues it later.
 */
export function createRedis(config: Pick<Config, 'redisUrl'>, role: 'worker' | 'producer'): Redis {
  const options: RedisOptions =
    role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: false }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000 };
  const redis = new IORedis(config.redisUrl, options);
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
