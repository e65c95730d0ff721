/**
 * The `contact-import` queue's consumer settings: a few long jobs per process (`IMPORT_CONCURRENCY`), no rate
 * limit (imports write Postgres, not SES). BullMQ renews the job lock while a job runs; a worker that dies
 * leaves its job stalled, and another worker resumes it from the last committed batch.
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';

/** Creates the `contact-import` worker (not yet running). */
export function createImportWorker(config: Config, connection: Redis, processor: ConstructorParameters<typeof Worker>[1]): Worker {
  return new Worker(QueueName.contactImport, processor, {
    ...queueOptions(config, connection),
    concurrency: config.importConcurrency,
    lockDuration: config.workerLockMs,
    stalledInterval: config.workerLockMs,
    maxStalledCount: 100,
    autorun: false,
  });
}
