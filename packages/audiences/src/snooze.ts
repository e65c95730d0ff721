/**
 * Snoozes and their webhooks: `contact.snoozed` / `contact.unsnoozed` are announced if and only if the change
 * committed (the deliveries are written in its transaction, then enqueued). The changes themselves are
 * `@mailroom/contacts/queries/snooze`.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import type { QueueConfig } from '@mailroom/queues/config';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { recordWebhookEvents, type WebhookEvent } from '@mailroom/db/queries/webhooks';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { expireSnoozes, setContactSnooze, type SnoozeChange } from '@mailroom/contacts/queries/snooze';
import type { DbOrTx } from '@mailroom/db/client';
import type { Logger } from '@mailroom/platform/logger';

/** Days a contact may pause marketing email for from the unsubscribe page. */
export const PAUSE_CHOICES_DAYS = [30, 90] as const;

/**
 * The webhook event of a snooze change: `data` is `{contactId, email, snoozedUntil, previousSnoozedUntil, method}`
 * (ISO 8601 times or null), with `emailId` and `campaignId` for a pause from an email's page, and `test: true`
 * for a test event.
 */
export function snoozeWebhookEvent(
  c: SnoozeChange,
  extra: { emailId?: string; campaignId?: string | null } = {},
): WebhookEvent {
  return {
    type: c.type,
    data: {
      contactId: c.contactId,
      email: c.email,
      snoozedUntil: c.snoozedUntil?.toISOString() ?? null,
      previousSnoozedUntil: c.previousSnoozedUntil?.toISOString() ?? null,
      method: c.method,
      ...(extra.emailId ? { emailId: extra.emailId, campaignId: extra.campaignId ?? null } : {}),
      ...(c.test ? { test: true } : {}),
    },
  };
}

/**
 * Sets or clears a snooze inside the caller's transaction `tx` and writes its webhook deliveries there too.
 *
 * @returns the change (`null`: nothing changed, or no such contact) and the deliveries to enqueue after commit.
 */
export async function snoozeInTransaction(
  tx: DbOrTx,
  projectId: string,
  contactId: string,
  until: Date | null,
  opts: { method: 'api' | 'link'; test?: boolean; emailId?: string; campaignId?: string | null },
): Promise<{ change: SnoozeChange | null; deliveries: WebhookDeliveryRef[] }> {
  const change = await setContactSnooze(tx, projectId, contactId, until, opts);
  const deliveries = change ? await recordWebhookEvents(tx, projectId, [snoozeWebhookEvent(change, opts)]) : [];
  return { change, deliveries };
}

/** What the expiry pass needs. */
export interface SnoozeExpiryDeps {
  database: { db: DbOrTx };
  webhookQueue: Queue<WebhookJobPayload>;
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>;
  logger: Logger;
}

/** Snoozes cleared per statement of the expiry pass. */
const EXPIRY_BATCH = 500;

/** Statements per pass at most (the next pass carries on). */
const EXPIRY_ROUNDS = 20;

/**
 * One expiry pass: clears the snoozes that have run out, in batches, each batch in one transaction with its
 * `contact.unsnoozed` events and webhook deliveries (enqueued after the commit; a failed enqueue is repaired by
 * the reconciler). Each snooze is cleared, and announced, once.
 *
 * @returns how many snoozes were cleared.
 */
export async function expireSnoozesOnce(deps: SnoozeExpiryDeps): Promise<number> {
  let cleared = 0;
  for (let round = 0; round < EXPIRY_ROUNDS; round++) {
    const { changes, deliveries } = await deps.database.db.transaction(async (tx) => {
      const changes = await expireSnoozes(tx, EXPIRY_BATCH);
      const byProject = new Map<string, WebhookEvent[]>();
      for (const c of changes)
        byProject.set(c.projectId, [...(byProject.get(c.projectId) ?? []), snoozeWebhookEvent(c)]);
      const deliveries: WebhookDeliveryRef[] = [];
      for (const [projectId, events] of byProject)
        deliveries.push(...(await recordWebhookEvents(tx, projectId, events)));
      return { changes, deliveries };
    });
    await relayWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, deps.logger);
    cleared += changes.length;
    if (changes.length < EXPIRY_BATCH) break;
  }
  if (cleared > 0) deps.logger.info({ cleared }, 'expired snoozes cleared');
  return cleared;
}
