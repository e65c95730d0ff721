/**
 * The `webhook` queue's consumer settings: many deliveries in flight (they wait on other people's servers, not
 * on SES), retries spaced by the configured schedule ({@link Config.webhookRetryScheduleMs}).
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName, WEBHOOK_BACKOFF } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';

/**
 * The wait (ms) before retry number `attemptsMade` (1-based: after the first failure, `schedule[0]`); the last
 * entry repeats if attempts outnumber it.
 */
export function webhookBackoffMs(schedule: readonly number[], attemptsMade: number): number {
  if (schedule.length === 0) return 0;
  return schedule[Math.min(attemptsMade, schedule.length) - 1] ?? schedule[0];
}

/** Creates the `webhook` worker (not yet running). */
export function createWebhookWorker(config: Config, connection: Redis, processor: ConstructorParameters<typeof Worker>[1]): Worker {
  return new Worker(QueueName.webhook, processor, {
    ...queueOptions(config, connection),
    concurrency: config.webhookConcurrency,
    lockDuration: Math.max(config.workerLockMs, config.webhookTimeoutMs * 2),
    stalledInterval: Math.max(config.workerLockMs, config.webhookTimeoutMs * 2),
    maxStalledCount: 10,
    autorun: false,
    settings: {
      backoffStrategy: (attemptsMade: number, type?: string) => {
        if (type !== WEBHOOK_BACKOFF) return 1_000;
        return webhookBackoffMs(config.webhookRetryScheduleMs, attemptsMade);
      },
    },
  });
}
