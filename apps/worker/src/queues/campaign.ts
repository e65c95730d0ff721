/**
 * The `campaign` queue's consumer settings: a few campaigns at once per process; no rate limit (a campaign job
 * writes Postgres and enqueues `send` jobs, which carry the SES limit).
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';

/** Campaign jobs run at once per worker process. */
export const CAMPAIGN_CONCURRENCY = 4;

/** Creates the `campaign` worker (not yet running). */
export function createCampaignWorker(config: Config, connection: Redis, processor: ConstructorParameters<typeof Worker>[1]): Worker {
  return new Worker(QueueName.campaign, processor, {
    ...queueOptions(config, connection),
    concurrency: CAMPAIGN_CONCURRENCY,
    lockDuration: config.workerLockMs,
    stalledInterval: config.workerLockMs,
    maxStalledCount: 100,
    autorun: false,
  });
}
