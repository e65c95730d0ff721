/**
 * Contact events: the keyset list with its filters, and the distinct names (maintained by trigger).
 *
 * @module
 */
import { and, asc, count, desc, eq, gt, sql, type SQL } from 'drizzle-orm';
import { idLowerBound } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { contacts, eventNamesNow as eventNames, events } from '@mailroom/db/schema';

/** Filters and paging of {@link listEvents}. */
export interface EventListQuery {
  limit: number;
  /** Keyset: events recorded before this id (newest first). */
  beforeId?: string;
  /** Rows to skip (Plunk's page numbers, capped by the caller); not combined with `beforeId` by the API. */
  offset?: number;
  /** Only this contact's events (the `email` filter is resolved to a contact by the caller). */
  contactId?: string;
  /** Exact event name. */
  name?: string;
  /** Inclusive lower bound (ms precision). */
  since?: Date;
  /** Inclusive upper bound (ms precision). */
  until?: Date;
}

/** An event with its contact's address. */
export interface EventItem {
  id: string;
  name: string;
  contactId: string;
  email: string;
  data: Record<string, unknown>;
  /** Recorded with a test key (test mode). */
  test: boolean;
  createdAt: Date;
}

/**
 * Lists events newest first. Event ids are UUIDv7 of their `createdAt` millisecond, so `since`/`until` become id
 * bounds and every filter is served by an index whose last column is the id.
 *
 * `total` counts the matching events exactly, capped at `countCap` (`totalExact: false` beyond).
 */
export async function listEvents(db: DbOrTx, projectId: string, q: EventListQuery, countCap = 10_000) {
  const filters: (SQL | undefined)[] = [eq(events.projectId, projectId)];
  if (q.contactId) filters.push(eq(events.contactId, q.contactId));
  if (q.name) filters.push(eq(events.name, q.name));
  if (q.since) filters.push(sql`${events.id} >= ${idLowerBound(q.since.getTime())}::uuid`);
  if (q.until) filters.push(sql`${events.id} < ${idLowerBound(q.until.getTime() + 1)}::uuid`);
  const where = and(...filters);
  const rows = await db
    .select({
      id: events.id,
      name: events.name,
      contactId: events.contactId,
      email: contacts.email,
      data: events.data,
      test: events.test,
      createdAt: events.createdAt,
    })
    .from(events)
    .innerJoin(contacts, eq(contacts.id, events.contactId))
    .where(and(where, q.beforeId ? sql`${events.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(desc(events.id))
    .limit(q.limit + 1)
    .offset(q.offset ?? 0);
  const counted = await db.execute<{ n: number }>(
    sql`select count(*)::int as n from (select 1 from events where ${where} limit ${countCap + 1}) m`,
  );
  const n = counted.rows[0].n;
  return {
    items: rows.slice(0, q.limit) as EventItem[],
    hasMore: rows.length > q.limit,
    total: Math.min(n, countCap),
    totalExact: n <= countCap,
  };
}

/**
 * Distinct event names of a project, alphabetically (keyset on the name), with their counts and first/last
 * occurrence, exact at the moment of reading (`event_names_now`: folded counts plus pending deltas). `total` is the
 * number of distinct names.
 */
export async function listEventNames(db: DbOrTx, projectId: string, q: { limit: number; after?: string }) {
  const where = eq(eventNames.projectId, projectId);
  const rows = await db
    .select({
      name: eventNames.name,
      count: eventNames.count,
      firstSeenAt: eventNames.firstSeenAt,
      lastSeenAt: eventNames.lastSeenAt,
    })
    .from(eventNames)
    .where(and(where, q.after !== undefined ? gt(eventNames.name, q.after) : undefined))
    .orderBy(asc(eventNames.name))
    .limit(q.limit + 1);
  const [{ total }] = (await db.select({ total: count() }).from(eventNames).where(where)) as [{ total: number }];
  return { items: rows.slice(0, q.limit), hasMore: rows.length > q.limit, total };
}
