/**
 * The `send` queue's consumer settings.
 *
 * Rate: BullMQ's limiter is global (kept in Redis, shared by every worker process). A limiter of
 * `{ max: 14, duration: 1000 }` releases bursts of 14 at each window start, so a sliding second can see 28;
 * one job per `ceil(1000 / rate)` ms keeps every one-second window at `rate` or fewer (see README, "Sending rate").
 *
 * @module
 */
import { Worker, type WorkerOptions } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName, queueOptions, type Config } from '@mailroom/core';

/** The smooth limiter for `emailsPerSecond`: one job every `ceil(1000 / rate)` ms. */
export function smoothLimiter(emailsPerSecond: number): { max: number; duration: number } {
  return { max: 1, duration: Math.ceil(1000 / emailsPerSecond) };
}

/** Options of the `send` worker. */
export function sendWorkerOptions(config: Config, connection: Redis): WorkerOptions {
  return {
    ...queueOptions(config, connection),
    concurrency: config.workerConcurrency,
    limiter: smoothLimiter(config.sesMaxSendRate),
    lockDuration: config.workerLockMs,
    stalledInterval: config.workerLockMs,
    // A job whose worker died is retried, not failed: the claim makes a retry safe.
    maxStalledCount: 1_000,
    autorun: false,
  };
}

/** Creates the `send` worker (not yet running). */
export function createSendWorker(
  config: Config,
  connection: Redis,
  processor: ConstructorParameters<typeof Worker>[1],
): Worker {
  return new Worker(QueueName.send, processor, sendWorkerOptions(config, connection));
}
