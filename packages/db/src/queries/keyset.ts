/**
 * The one keyset page of the list endpoints (API.md "Pagination"): newest first by id (UUIDv7, so creation
 * order), after an optional `beforeId`, plus the number of rows matching the filters.
 *
 * @module
 */
import { and, desc, sql, type SQL } from 'drizzle-orm';
import type { PgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { DbOrTx } from '../client';

/** A page: at most `limit` rows, whether more follow, and the total matching `where`. */
export interface KeysetPage<R> {
  items: R[];
  hasMore: boolean;
  total: number;
}

/**
 * Reads one page of `table` rows matching `where` (which must include the project scope), newest first.
 *
 * @param q.limit - page size (rows); one more row is read to know whether more follow.
 * @param q.beforeId - the last id of the previous page (decoded cursor).
 */
export async function keysetList<T extends PgTable & { id: PgColumn }>(
  db: DbOrTx,
  table: T,
  where: SQL | undefined,
  q: { limit: number; beforeId?: string },
): Promise<KeysetPage<T['$inferSelect']>> {
  const page = (await db
    .select()
    .from(table as PgTable)
    .where(and(where, q.beforeId ? sql`${table.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(desc(table.id))
    .limit(q.limit + 1)) as T['$inferSelect'][];
  const [count] = await db.select({ n: sql<number>`count(*)::int` }).from(table as PgTable).where(where);
  return { items: page.slice(0, q.limit), hasMore: page.length > q.limit, total: count?.n ?? 0 };
}
