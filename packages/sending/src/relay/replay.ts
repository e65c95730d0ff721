/**
 * The answer to a relayed message submitted again: its idempotency key (Message-ID, key and recipients, see
 * `./accept-relay`) was claimed by an earlier submission, whose write statement stored as its answer the ids of the
 * emails it made (`StoredEmails` of `../accept-write`). The earlier answer is rebuilt from those emails as they are
 * now; an answer stored whole (a `SendResult`, as the relay stored before the claim moved into the write statement) is
 * replayed as it is.
 *
 * @module
 */
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { findIdempotencyKey, type KeyEmail } from '../queries/idempotency';
import { SUPPRESSION_CAUSES, SUPPRESSION_REASONS, type SuppressionCause } from '@mailroom/db/queries/suppression-rule';
import type { DbOrTx } from '@mailroom/db/client';
import type { SendResult } from '../accept-enqueue';

/** Why a stored `suppressed` email was held back, read back from its `error` (`suppressed: <reason>`). */
function causeOf(error: string | null): SuppressionCause {
  const reason = error?.startsWith('suppressed: ') ? error.slice('suppressed: '.length) : '';
  return SUPPRESSION_CAUSES.find((c) => SUPPRESSION_REASONS[c] === reason) ?? 'suppression_list';
}

/** The send result of emails as stored: `suppressed` ones with their cause, every other one `queued` (accepted). */
export function resultOfEmails(emails: KeyEmail[]): SendResult {
  return {
    emails: emails.map((e) => ({
      contact: { id: e.contactId ?? '', email: e.contactEmail },
      email: e.id,
      ...(e.status === 'suppressed'
        ? { status: 'suppressed' as const, reason: causeOf(e.error) }
        : { status: 'queued' as const }),
    })),
    suppressed: emails.filter((e) => e.status === 'suppressed').map((e) => e.toEmail),
    timestamp: new Date().toISOString(),
  };
}

/**
 * The earlier answer of a held key.
 *
 * @param fingerprint - the submission's (a hash of its bytes): another one than the key's is a conflict.
 * @throws {@link AppError} 422 `IDEMPOTENCY_CONFLICT` for other bytes under the same key; a plain `Error` (a
 *   temporary failure: the client retries) when the key is gone meanwhile; the database's errors.
 */
export async function replayRelay(
  db: DbOrTx,
  projectId: string,
  key: string,
  fingerprint: string,
  messageId: string,
): Promise<SendResult> {
  const stored = await findIdempotencyKey(db, projectId, key);
  if (!stored) throw new Error(`the idempotency key of ${messageId} was held, then gone`);
  if (stored.fingerprint !== fingerprint) {
    throw new AppError(
      ErrorCode.IDEMPOTENCY_CONFLICT,
      `Message-ID ${messageId} was already submitted with this key for another message`,
      {
        suggestion: 'Give each message its own Message-ID; resubmit a message only unchanged.',
      },
    );
  }
  const whole = stored.response as Partial<SendResult> | null;
  if (whole && Array.isArray(whole.emails)) return whole as SendResult;
  return resultOfEmails(stored.emails);
}
