/**
 * The test-mode sink: the MIME message of each test email (`emails.test`), stored where SES would have received
 * it, and read back by `GET /emails/{id}/raw`. Live emails keep no copy. Messages are kept for
 * `TEST_MESSAGE_RETENTION_HOURS` ({@link pruneTestMessages}).
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { emails, testMessages } from '@mailroom/db/schema';

/**
 * Stores the raw MIME of a test email (RFC 5322 bytes, exactly what SES would have been given). Idempotent: a
 * second delivery of the same email (a worker that died after storing, before finishing) replaces the bytes.
 */
export async function storeTestMessage(db: DbOrTx, emailId: string, projectId: string, raw: Buffer): Promise<void> {
  await db
    .insert(testMessages)
    .values({ emailId, projectId, raw })
    .onConflictDoUpdate({ target: testMessages.emailId, set: { raw, createdAt: sql`now()` } });
}

/** Rows deleted per statement by {@link pruneTestMessages}. */
export const TEST_MESSAGE_PRUNE_BATCH = 1_000;

/**
 * Deletes test messages stored more than `retentionHours` ago, oldest first, {@link TEST_MESSAGE_PRUNE_BATCH}
 * rows per statement (found through `test_messages_created_idx`, deleted through the primary key: `= any(array(…))`
 * rather than `in (…)`, which the planner may turn into a hash join over the whole table), until a statement deletes fewer
 * or `budgetMs` has passed. Rows another pass is deleting are skipped (`skip locked`), so overlapping passes never
 * wait on each other. The emails themselves stay: `GET /emails/{id}/raw` then says the message expired.
 *
 * @param retentionHours - `TEST_MESSAGE_RETENTION_HOURS` (hours).
 * @param budgetMs - no further statement starts after this long (ms); the next pass goes on.
 * @returns rows deleted, and `more` when the budget ran out before a statement deleted fewer than a batch.
 */
export async function pruneTestMessages(
  db: DbOrTx,
  retentionHours: number,
  budgetMs = 30_000,
): Promise<{ deleted: number; more: boolean }> {
  const started = Date.now();
  let deleted = 0;
  for (;;) {
    const res = await db.execute(sql`
      delete from test_messages where email_id = any(array(
        select email_id from test_messages
        where created_at < now() - make_interval(hours => ${retentionHours}::int)
        order by created_at
        limit ${TEST_MESSAGE_PRUNE_BATCH}
        for update skip locked))`);
    const n = res.rowCount ?? 0;
    deleted += n;
    if (n < TEST_MESSAGE_PRUNE_BATCH) return { deleted, more: false };
    if (Date.now() - started >= budgetMs) return { deleted, more: true };
  }
}

/** Statuses a test email reaches only after its message was stored (`sent`, then what SES events make of it). */
const STORED_STATUSES = new Set(['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained']);

/** What {@link getTestMessage} finds for an email id of a project. */
export type TestMessageLookup =
  | { found: 'message'; raw: Buffer }
  /** A test email with no message yet (still queued or sending, or never sent: suppressed, cancelled, failed). */
  | { found: 'pending'; status: string }
  /** A test email that was sent, whose message has since been deleted by the retention pass. */
  | { found: 'expired'; status: string }
  /** A live email: its message went to SES and no copy is kept. */
  | { found: 'live' }
  | { found: 'none' };

/**
 * The stored MIME of a project's test email, or why there is none. Scoped by `projectId`: another project's
 * email is `none`. A sent test email without a message is `expired` (its message is stored before it is marked
 * sent, so only the retention pass removes it).
 */
export async function getTestMessage(db: DbOrTx, projectId: string, emailId: string): Promise<TestMessageLookup> {
  const [row] = await db
    .select({ test: emails.test, status: emails.status, raw: testMessages.raw })
    .from(emails)
    .leftJoin(testMessages, and(eq(testMessages.emailId, emails.id), eq(testMessages.projectId, projectId)))
    .where(and(eq(emails.projectId, projectId), eq(emails.id, emailId)));
  if (!row) return { found: 'none' };
  if (!row.test) return { found: 'live' };
  if (row.raw) return { found: 'message', raw: row.raw };
  return STORED_STATUSES.has(row.status)
    ? { found: 'expired', status: row.status }
    : { found: 'pending', status: row.status };
}
