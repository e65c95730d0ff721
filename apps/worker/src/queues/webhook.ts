/**
 * The `webhook` queue's consumer settings: many deliveries in flight (they wait on other people's servers, not
 * on SES), retries spaced by the configured schedule ({@link Config.webhookRetryScheduleMs}).
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName, queueOptions, WEBHOOK_BACKOFF } from '@mailroom/queues/queues';
import { type Config } from '@mailroom/platform/config';
import { webhookBackoffMs } from '@mailroom/webhooks/delivery';

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
