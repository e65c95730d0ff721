/**
 * The expiry of unconfirmed double opt-ins (docs/guides/topics.md, double opt-in), a worker maintenance pass:
 * confirmations pending for longer than `DOUBLE_OPT_IN_EXPIRY_HOURS` are marked expired (their link answers 410),
 * and a contact the double opt-in created that never confirmed and is still unsubscribed is erased as
 * `DELETE /contacts/{id}` erases it (`eraseContact`: its emails scrubbed, its events gone).
 *
 * @module
 */
import { expirePendingConfirmations } from './queries/confirmations';
import { eraseContact } from './queries/erase';
import type { DbOrTx } from '@mailroom/db/client';
import type { Logger } from '@mailroom/platform/logger';
import type { ContactsConfig } from './config';

/** Confirmations expired per statement. */
const BATCH = 500;
/** Batches per pass at most: a pass stays short; the next one goes on. */
const MAX_BATCHES = 20;

/** What one pass did. */
export interface ExpiryResult {
  expired: number;
  deleted: number;
}

/**
 * One expiry pass. @returns how many confirmations expired and how many contacts were erased.
 */
export async function expireDoubleOptInsOnce(deps: {
  config: Pick<ContactsConfig, 'doubleOptInExpiryHours'>;
  database: { db: DbOrTx };
  logger: Logger;
}): Promise<ExpiryResult> {
  const { db } = deps.database;
  const result: ExpiryResult = { expired: 0, deleted: 0 };
  for (let i = 0; i < MAX_BATCHES; i++) {
    const due = await expirePendingConfirmations(db, deps.config.doubleOptInExpiryHours, BATCH);
    result.expired += due.length;
    for (const d of due.filter((x) => x.erase)) {
      if (await eraseContact(db, d.projectId, d.contactId)) result.deleted++;
    }
    if (due.length < BATCH) break;
  }
  if (result.expired > 0) deps.logger.info(result, 'double opt-in confirmations expired');
  return result;
}
