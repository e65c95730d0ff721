/**
 * `snoozedUntil` on `POST /contacts` and `PATCH /contacts/{id}`: the field, its checks, and the change with its
 * event and webhook (`@mailroom/audiences/snooze`).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { validationError } from '@mailroom/platform/errors';
import { snoozeInTransaction } from '@mailroom/audiences/snooze';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { Nullable } from './common';

/** The request field: an ISO 8601 date-time in the future, or null to clear the snooze. */
export const SnoozeField = Type.Optional(
  Nullable(
    Type.String({
      format: 'date-time',
      description:
        'pause marketing email until this time (ISO 8601, in the future); null clears a snooze. Transactional email is not affected',
    }),
  ),
);

/**
 * Reads the field. @returns `undefined` (not given: unchanged), `null` (clear) or the time.
 * @throws {@link AppError} 422 `VALIDATION_ERROR` on `snoozedUntil` when the time is not in the future.
 */
export function checkSnooze(value: string | null | undefined, now = Date.now()): Date | null | undefined {
  if (value === undefined || value === null) return value;
  const until = new Date(value);
  if (!(until.getTime() > now))
    throw validationError([
      { field: 'snoozedUntil', message: 'must be in the future (null clears a snooze)', code: 'too_small' },
    ]);
  return until;
}

/**
 * Sets or clears the snooze of a contact of the project inside `tx` (`method: api`).
 * @returns the deliveries of its webhook, to enqueue after the commit (none when nothing changed).
 */
export async function applySnooze(
  tx: DbOrTx,
  projectId: string,
  contactId: string,
  until: Date | null,
  test: boolean,
): Promise<{ snoozedUntil: Date | null; deliveries: WebhookDeliveryRef[] }> {
  const { deliveries } = await snoozeInTransaction(tx, projectId, contactId, until, { method: 'api', test });
  return { snoozedUntil: until, deliveries };
}
