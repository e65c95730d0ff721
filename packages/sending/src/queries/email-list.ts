/**
 * The keyset list of a project's emails, newest first, with its filters.
 *
 * @module
 */
import { and, desc, eq, sql, type SQL } from 'drizzle-orm';
import { idLowerBound } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { emails, type EmailStatus } from '@mailroom/db/schema';

/** Filters and paging of {@link listEmails}. */
export interface EmailListQuery {
  limit: number;
  /** Keyset: emails created before this id (newest first). */
  beforeId?: string;
  /** Only emails in this status. */
  status?: EmailStatus;
  /** Only this contact's emails (an address filter is resolved to a contact by the caller). */
  contactId?: string;
  /** Only this campaign's emails. */
  campaignId?: string;
  /** Inclusive lower bound (ms precision). */
  since?: Date;
  /** Inclusive upper bound (ms precision). */
  until?: Date;
}

/**
 * Lists emails newest first. Email ids are UUIDv7 of their `createdAt` millisecond, so `since`/`until` become id
 * bounds on `emails_project_id_idx (project_id, id)`, which the month partitions share.
 *
 * `total` counts the matching emails exactly, capped at `countCap` (`totalExact: false` beyond).
 *
 * @returns the rows (every column), whether more follow, and the count.
 */
export async function listEmails(db: DbOrTx, projectId: string, q: EmailListQuery, countCap = 10_000) {
  const filters: (SQL | undefined)[] = [eq(emails.projectId, projectId)];
  if (q.status) filters.push(eq(emails.status, q.status));
  if (q.contactId) filters.push(eq(emails.contactId, q.contactId));
  if (q.campaignId) filters.push(eq(emails.campaignId, q.campaignId));
  if (q.since) filters.push(sql`${emails.id} >= ${idLowerBound(q.since.getTime())}::uuid`);
  if (q.until) filters.push(sql`${emails.id} < ${idLowerBound(q.until.getTime() + 1)}::uuid`);
  const where = and(...filters);
  const rows = await db
    .select()
    .from(emails)
    .where(and(where, q.beforeId ? sql`${emails.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(desc(emails.id))
    .limit(q.limit + 1);
  const counted = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from (select 1 from emails where ${where} limit ${countCap + 1}) m`,
  );
  const n = counted.rows[0].n;
  return {
    items: rows.slice(0, q.limit),
    hasMore: rows.length > q.limit,
    total: Math.min(n, countCap),
    totalExact: n <= countCap,
  };
}
