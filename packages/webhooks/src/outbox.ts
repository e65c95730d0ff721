/**
 * Changes that outbound webhooks announce, for routes that write outside an idempotent request's transaction:
 * the change and its webhook deliveries commit together ({@link withWebhookEvents}), then the deliveries are
 * enqueued (a Redis failure is logged and repaired by the reconciler, never returned to the caller).
 *
 * @module
 */
import type { Queues } from '@mailroom/queues/create';
import { announceWebhookDeliveries } from '@mailroom/queues/enqueue';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger } from '@mailroom/platform/logger';
import { withWebhookEvents, type WebhookEvent } from '@mailroom/db/queries/webhooks';
import { type DbOrTx } from '@mailroom/db/client';

/** What announcing a change needs: the database, the webhook queue and the retry schedule. */
export interface AnnounceDeps {
  database: { db: DbOrTx };
  queues: Pick<Queues, 'webhook'>;
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>;
}

/**
 * Runs `change` in a transaction with the webhook events it announces (`events(result)`, empty when nothing
 * changed), then enqueues their deliveries. @returns the change's result.
 */
export async function announcedChange<T>(
  deps: AnnounceDeps,
  log: Logger,
  projectId: string,
  change: (tx: DbOrTx) => Promise<T>,
  events: (result: T) => WebhookEvent[],
): Promise<T> {
  const { result, deliveries } = await withWebhookEvents(deps.database.db, projectId, change, events);
  await announceWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
  return result;
}
