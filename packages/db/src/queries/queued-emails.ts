/**
 * Queuing an email: the row in `queued` and its first timeline entry, the statement every owner that makes an email
 * outside an accepted send shares (a campaign's test send, a double opt-in's confirmation, a workflow's
 * send step). Accepted sends write theirs in one statement of their own (`@mailroom/sending`'s
 * `queries/transactional`); the worker claims and finishes both (`queries/email-batches`).
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '../client';
import { emailEvents, emails } from '../schema';
import { trackingSql } from './tracking-rule';

/** An email row to insert: the columns of `emails` but its timestamps and status, which the insert sets. */
export type NewEmail = Omit<typeof emails.$inferInsert, 'createdAt' | 'updatedAt' | 'status'>;

/**
 * Inserts new `queued` emails and their first timeline entries (two statements, same transaction as the caller).
 * A recipient held back by the suppression rule is never written here: the callers decide it with
 * `suppressionCauseSql` first (a workflow step skips; an accepted send writes its `suppressed` row in its own
 * statement, `@mailroom/sending`'s `queries/transactional`), and the worker's claim re-checks every queued email.
 */
export async function insertQueuedEmails(
  db: DbOrTx,
  rows: (Omit<NewEmail, 'tracking'> & { id: string; tracking?: boolean | null })[],
): Promise<void> {
  if (rows.length === 0) return;
  await db.insert(emails).values(
    rows.map(({ tracking, ...r }) => ({
      ...r,
      // `tracking` is the email's own override (null: its project's `tracking_mode` decides, in the statement).
      tracking: trackingSql(
        sql`${r.projectId}::uuid`,
        sql`${tracking ?? null}::boolean`,
        sql`${r.marketing ?? false}::boolean`,
      ),
      status: 'queued' as const,
      error: null,
    })),
  );
  await db.insert(emailEvents).values(
    rows.map((r) => ({
      emailId: r.id,
      projectId: r.projectId,
      type: 'queued',
      data: null,
    })),
  );
}
