/**
 * The one keyset page of the list endpoints (docs/api/overview.md, pagination): newest first by id (UUIDv7, so creation
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
  /** False when `total` is the `countCap` lower bound. */
  totalExact: boolean;
}

/**
 * Reads one page of `table` rows matching `where` (which must include the project scope), newest first.
 *
 * @param q.limit - page size (rows); one more row is read to know whether more follow.
 * @param q.beforeId - the last id of the previous page (decoded cursor).
 * @param q.countCap - count at most this many rows (a table that grows without bound); `totalExact` says whether
 *   the cap was reached.
 * @param q.offset - rows to skip (Plunk's page numbers: `(page - 1) * pageSize`, capped by the caller); with a
 *   cursor the page is pure keyset and no offset is given.
 */
export async function keysetList<T extends PgTable & { id: PgColumn }>(
  db: DbOrTx,
  table: T,
  where: SQL | undefined,
  q: { limit: number; beforeId?: string; countCap?: number; offset?: number },
): Promise<KeysetPage<T['$inferSelect']>> {
  const page = (await db
    .select()
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- widening T lets drizzle's conditional types resolve
    .from(table as PgTable)
    .where(and(where, q.beforeId ? sql`${table.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(desc(table.id))
    .limit(q.limit + 1)
    .offset(q.offset ?? 0)) as T['$inferSelect'][];
  const items = page.slice(0, q.limit);
  if (q.countCap !== undefined) {
    const capped = db
      .select({ one: sql`1` })
      .from(table as PgTable)
      .where(where)
      .limit(q.countCap + 1)
      .as('capped');
    const [count] = await db.select({ n: sql<number>`count(*)::int` }).from(capped);
    const n = count?.n ?? 0;
    return { items, hasMore: page.length > q.limit, total: Math.min(n, q.countCap), totalExact: n <= q.countCap };
  }
  const [count] = await db
    .select({ n: sql<number>`count(*)::int` })
    // eslint-disable-next-line @typescript-eslint/no-unnecessary-type-assertion -- widening T lets drizzle's conditional types resolve
    .from(table as PgTable)
    .where(where);
  return { items, hasMore: page.length > q.limit, total: count?.n ?? 0, totalExact: true };
}
