/**
 * The suppression list as a project edits it: manual entries (reason `manual`), each announced as a
 * `contact.suppressed` webhook. Entries from bounces and complaints come from `applySesFeedback`.
 *
 * @module
 */
import { validationError } from '@mailroom/platform/errors';
import { emailKey, normalizeEmail } from '@mailroom/platform/address';
import { addSuppressions, type SuppressionRow } from './queries/suppressions';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { type DbOrTx } from '@mailroom/db/client';

/** The result of suppressing: the new entries, the addresses that were on the list already, and the deliveries. */
export interface ManualSuppression {
  added: SuppressionRow[];
  /** Normalised, each once, in request order. */
  alreadySuppressed: string[];
  /** `contact.suppressed` deliveries of the new entries, to enqueue once `tx` commits. */
  deliveries: WebhookDeliveryRef[];
}

/**
 * Suppresses one address (`email`) or many (`emails`), with `note` kept in `details.note`. An address already on
 * the list keeps its entry.
 *
 * @throws {@link AppError} 422 unless exactly one of `email` and `emails` is given.
 */
export async function suppressManually(
  tx: DbOrTx,
  projectId: string,
  body: { email?: string; emails?: string[]; note?: string },
): Promise<ManualSuppression> {
  if ((body.email === undefined) === (body.emails === undefined)) {
    throw validationError([{ field: 'email', message: 'give either `email` or `emails`', code: 'invalid_type' }]);
  }
  const emails = body.emails ?? [body.email!];
  const details = body.note ? { note: body.note } : {};
  const added = await addSuppressions(
    tx,
    projectId,
    emails.map((email) => ({ email, reason: 'manual' as const, details })),
  );
  const deliveries = await recordWebhookEvents(
    tx,
    projectId,
    added.map((a) => ({
      type: 'contact.suppressed',
      data: { email: a.email, contactId: null, reason: a.reason, sourceEmailId: null, suppressionId: a.id },
    })),
  );
  const addedKeys = new Set(added.map((a) => a.emailKey));
  const alreadySuppressed = [
    ...new Set(emails.map((e) => normalizeEmail(e)).filter((e) => !addedKeys.has(emailKey(e)))),
  ];
  return { added, alreadySuppressed, deliveries };
}
