/**
 * The `send` queue's consumer settings.
 *
 * Rate: BullMQ's limiter is global (kept in Redis, shared by every worker process). A limiter of
 * `{ max: 14, duration: 1000 }` releases bursts of 14 at each window start, so a sliding second can see 28;
 * a smooth one (one job per ~1000/rate ms) avoids the bursts (see README, "Sending rate").
 *
 * @module
 */
import { Worker, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { effectiveSendRate } from '@mailroom/mail/ses-account';
import { QueueName } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';

/**
 * The smooth limiter for `emailsPerSecond`: one job start every `floor(1000 / rate)` ms. It paces jobs so they
 * wait in Redis rather than in worker memory; the exact bound is enforced at the SES call by `SendRateGate`,
 * which is slightly slower, so jobs arrive at the gate just ahead of their slot.
 */
export function smoothLimiter(emailsPerSecond: number): { max: number; duration: number } {
  return { max: 1, duration: Math.max(1, Math.floor(1000 / emailsPerSecond)) };
}

/**
 * Options of the `send` worker.
 *
 * @param emailsPerSecond - the send rate in force (see `AccountWatcher`); default `SES_MAX_SEND_RATE`, else 14.
 */
export function sendWorkerOptions(config: Config, connection: Redis, emailsPerSecond = effectiveSendRate(undefined, config.sesMaxSendRate)): WorkerOptions {
  return {
    ...queueOptions(config, connection),
    concurrency: config.workerConcurrency,
    limiter: smoothLimiter(emailsPerSecond),
    lockDuration: config.workerLockMs,
    stalledInterval: config.workerLockMs,
    // A job whose worker died is retried, not failed: the claim makes a retry safe.
    maxStalledCount: 1_000,
    autorun: false,
  };
}

/** Creates the `send` worker (not yet running), pacing job starts at `emailsPerSecond`. */
export function createSendWorker(
  config: Config,
  connection: Redis,
  processor: ConstructorParameters<typeof Worker>[1],
  emailsPerSecond?: number,
): Worker {
  return new Worker(QueueName.send, processor, sendWorkerOptions(config, connection, emailsPerSecond));
}

/**
 * Moves a running `send` worker's limiter to a new rate. BullMQ reads `opts.limiter` on every fetch of a job
 * (its `moveToActive` script gets the limiter as an argument), so the next job start follows the new pace.
 */
export function setSendWorkerRate(worker: Worker, emailsPerSecond: number): void {
  worker.opts.limiter = smoothLimiter(emailsPerSecond);
}
