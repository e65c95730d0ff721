/**
 * The `workflow` queue's consumer settings: many executions at once (a step is a few statements, or one HTTP call
 * of a WEBHOOK step), a job lock that outlasts the longest WEBHOOK timeout (30 s).
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';

/** Creates the `workflow` worker (not yet running). */
export function createWorkflowWorker(config: Config, connection: Redis, processor: ConstructorParameters<typeof Worker>[1]): Worker {
  return new Worker(QueueName.workflow, processor, {
    ...queueOptions(config, connection),
    concurrency: config.workflowConcurrency,
    lockDuration: Math.max(config.workerLockMs, 60_000),
    stalledInterval: Math.max(config.workerLockMs, 60_000),
    // A job whose worker died is retried, not failed: the lease and compare-and-set make a retry safe.
    maxStalledCount: 1_000,
    autorun: false,
  });
}
