/**
 * The transactional outbox of outbound webhooks, for code that writes outside an idempotent request's transaction:
 * a change and its webhook deliveries (the outbox rows) commit together ({@link withWebhookEvents}), then the
 * deliveries are relayed to the `webhook` queue (a Redis failure is logged and repaired by the reconciler, which
 * relays the rows later; never returned to the caller).
 *
 * @module
 */
import type { Queues } from '@mailroom/queues/create';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger } from '@mailroom/platform/logger';
import { withWebhookEvents, type WebhookEvent } from '@mailroom/db/queries/webhooks';
import { type DbOrTx } from '@mailroom/db/client';

/** What committing a change with its outbox needs: the database, the webhook queue and the retry schedule. */
export interface OutboxDeps {
  database: { db: DbOrTx };
  queues: Pick<Queues, 'webhook'>;
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>;
}

/**
 * Runs `change` in a transaction with the webhook events it raises (`events(result)`, empty when nothing
 * changed) written to the outbox, then relays their deliveries to the queue. @returns the change's result.
 */
export async function commitWithOutbox<T>(
  deps: OutboxDeps,
  log: Logger,
  projectId: string,
  change: (tx: DbOrTx) => Promise<T>,
  events: (result: T) => WebhookEvent[],
): Promise<T> {
  const { result, deliveries } = await withWebhookEvents(deps.database.db, projectId, change, events);
  await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
  return result;
}
