/**
 * Contact upserts, shared by `/v1/send`, `/v1/track` and `POST /contacts`.
 *
 * Merge rules (one home: `batch-upsert.ts`): `data` is shallow-merged in SQL (never read-modify-write, so
 * concurrent writers lose no key); a key set to `null` is removed, and one set to `""` is ignored (`data-patch.ts`);
 * `subscribed` changes only when the caller states it, and otherwise a new contact gets the caller's default.
 *
 * @module
 */
import { and, eq, sql, type SQL } from 'drizzle-orm';
import { emailKey, normalizedKey, type NormalizedEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { isIgnoredDataValue, splitPatch } from '@mailroom/db/queries/data-patch';
import { executeNamed } from '@mailroom/db/queries/named';
import { likePattern } from '@mailroom/db/queries/like';
import type { DbOrTx } from '@mailroom/db/client';
import { contacts, contactStatsNow } from '@mailroom/db/schema';
import { BATCH_SUBSCRIPTION_EVENTS, BATCH_UPSERT_WITH_SNOOZE } from '@mailroom/db/queries/batch-upsert';

/** One contact to create or update. */
export interface ContactUpsert {
  /** Normalised by the caller where the address came in (`normalizeEmail`). */
  email: NormalizedEmail;
  /** Stated subscription; `undefined` keeps an existing contact's value. */
  subscribed?: boolean;
  /** Applied to new contacts when `subscribed` is not stated. */
  defaultSubscribed: boolean;
  /** Shallow patch of `data`; `null` values remove keys. */
  data?: Record<string, unknown>;
}

/** A contact after the upsert; `inserted` tells a new contact from an updated one. */
export interface UpsertedContact {
  id: string;
  email: string;
  emailKey: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
  inserted: boolean;
  /** End of the contact's snooze (`null`: none); absent where the statement did not read it (batched writes). */
  snoozedUntil?: Date | null;
}

/** An upsert input row with its key (see {@link mergeInputs}). */
export type UpsertRow = ContactUpsert & { key: string };

/** Merges rows with the same address (later rows win, `data` shallow-merged) and sorts them by key (lock order). */
export function mergeInputs(inputs: ContactUpsert[]): UpsertRow[] {
  const merged = new Map<string, UpsertRow>();
  for (const input of inputs) {
    const key = normalizedKey(input.email);
    const prev = merged.get(key);
    merged.set(key, {
      ...input,
      key,
      email: prev?.email ?? input.email,
      subscribed: input.subscribed ?? prev?.subscribed,
      // A later row's ignored value (an empty string) leaves an earlier row's value standing.
      data: {
        ...(prev?.data ?? {}),
        ...Object.fromEntries(Object.entries(input.data ?? {}).filter(([, v]) => !isIgnoredDataValue(v))),
      },
    });
  }
  return [...merged.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/**
 * The `input`, `prior` and `upserted` common table expressions of a contact upsert in one project, to follow
 * `WITH`: the merge rule of `batch-upsert.ts` ({@link BATCH_UPSERT_WITH_SNOOZE}) over these rows. `upserted` returns
 * `id, project_id, email, email_key, subscribed, data, created_at, updated_at, inserted, snoozed_until`. Rows must
 * be distinct by key. `guard`: a condition without which nothing is upserted (and nothing that follows from
 * `upserted` written).
 */
export function upsertCtes(projectId: string, rows: UpsertRow[], test = false, guard?: SQL): SQL {
  const values = sql.join(
    rows.map((r) => {
      const { set, removed } = splitPatch(r.data);
      return sql`(${newId()}::uuid, ${projectId}::uuid, ${r.email}, ${r.key}, ${r.subscribed ?? r.defaultSubscribed}::boolean,
        ${r.subscribed !== undefined}::boolean, ${JSON.stringify(set)}::jsonb, ${JSON.stringify(removed)}::jsonb, ${test}::boolean)`;
    }),
    sql`, `,
  );
  return sql`input (id, project_id, email, email_key, subscribed, stated, patch, removed, test) as (
      select * from (values ${values}) v${guard ? sql` where ${guard}` : sql``}
    ),
    ${sql.raw(BATCH_UPSERT_WITH_SNOOZE)}${mayChangeSubscription(rows) ? sql`, ${sql.raw(BATCH_SUBSCRIPTION_EVENTS)}` : sql``}`;
}

/**
 * Whether an upsert can change a subscription: a row states `subscribed`, or new contacts default to subscribed.
 * `/v1/send` without `subscribed` cannot, and then skips the subscription CTE (and the `events` triggers a CTE
 * inserting into `events` fires even for no rows: measured, 25% of `/v1/send`'s statement).
 */
function mayChangeSubscription(rows: UpsertRow[]): boolean {
  return rows.some((r) => r.subscribed !== undefined || r.defaultSubscribed);
}

/** A row of the `upserted` CTE as the driver returns it. */
export type ContactSqlRow = {
  id: string;
  email: string;
  email_key: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  created_at: Date | string;
  updated_at: Date | string;
  inserted: boolean;
  snoozed_until?: Date | string | null;
};

/** The {@link UpsertedContact} of an `upserted` row. */
export function fromSql(r: ContactSqlRow): UpsertedContact {
  return {
    id: r.id,
    email: r.email,
    emailKey: r.email_key,
    subscribed: r.subscribed,
    data: r.data,
    createdAt: new Date(r.created_at),
    updatedAt: new Date(r.updated_at),
    inserted: r.inserted,
    ...(r.snoozed_until !== undefined
      ? { snoozedUntil: r.snoozed_until === null ? null : new Date(r.snoozed_until) }
      : {}),
  };
}

/**
 * Creates or updates contacts in one statement, race-free (`INSERT … ON CONFLICT (project_id, email_key)`).
 * Input rows with the same address are merged first (later rows win). Rows are locked in address order so
 * concurrent multi-recipient upserts cannot deadlock. Meant for request-sized inputs (up to a few hundred
 * rows); bulk imports use {@link importContactBatch}.
 *
 * @param opts.test - a test key's request: the subscription events it records are test events.
 * @returns one row per distinct address, in address order.
 */
export async function upsertContacts(
  db: DbOrTx,
  projectId: string,
  inputs: ContactUpsert[],
  opts: { test?: boolean } = {},
): Promise<UpsertedContact[]> {
  const rows = mergeInputs(inputs);
  if (rows.length === 0) return [];
  const result = await db.execute<ContactSqlRow>(
    sql`with ${upsertCtes(projectId, rows, opts.test)} select * from upserted`,
  );
  return result.rows.map(fromSql).sort((a, b) => (a.emailKey < b.emailKey ? -1 : a.emailKey > b.emailKey ? 1 : 0));
}

/** What `POST /v1/track` records. */
export interface TrackInput {
  email: string;
  subscribed?: boolean;
  /** Stored on the contact (shallow merge; `null` removes a key). */
  contactData: Record<string, unknown>;
  /** Event name, already checked. */
  name: string;
  /** Stored on the event (includes non-persistent values). */
  eventData: Record<string, unknown>;
  /** Tracked with a test key: a test event (and its subscription event); it starts and wakes test executions only. */
  test?: boolean;
}

/** Result of a track (`trackEvent` in `track-batch.ts`). */
export interface TrackResult {
  contact: UpsertedContact;
  eventId: string;
  createdAt: Date;
}

/** A stored contact. */
export type ContactRow = typeof contacts.$inferSelect;

/** A contact of the project, or `undefined` (also for another project's id). */
export async function getContact(db: DbOrTx, projectId: string, id: string): Promise<ContactRow | undefined> {
  const [row] = await db
    .select()
    .from(contacts)
    .where(and(eq(contacts.projectId, projectId), eq(contacts.id, id)));
  return row;
}

/** The contact with this address (case-insensitive), or `undefined`. */
export async function findContactByEmail(
  db: DbOrTx,
  projectId: string,
  email: string,
): Promise<ContactRow | undefined> {
  const [row] = await db
    .select()
    .from(contacts)
    .where(and(eq(contacts.projectId, projectId), eq(contacts.emailKey, emailKey(email))));
  return row;
}

/**
 * `PATCH /contacts/{id}`: merges `data` in SQL (shallow; `null` removes a key) and sets `subscribed` when given.
 *
 * @param opts.test - a test key's request or a test execution's UPDATE_CONTACT: the subscription event is a test event.
 * @returns the updated contact, or `undefined` when the project has no such contact.
 */
export async function updateContact(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: { subscribed?: boolean; data?: Record<string, unknown> },
  opts: { test?: boolean } = {},
): Promise<ContactRow | undefined> {
  const { set, removed } = splitPatch(patch.data);
  // `old` locks the row before the update reads it, so the subscription change is seen exactly once. Named (parsed
  // once per connection, and planned once where Postgres keeps a generic plan: `named.ts`): a workflow's
  // UPDATE_CONTACT step runs it for every execution.
  const rows = await executeNamed<Record<string, unknown>>(
    db,
    sql`
    with old as (select id, subscribed from contacts where project_id = ${projectId}::uuid and id = ${id}::uuid for update),
    updated as (
      update contacts c set
        subscribed = coalesce(${patch.subscribed ?? null}::boolean, c.subscribed),
        data = (c.data || ${JSON.stringify(set)}::jsonb) - ${sql.param(removed)}::text[],
        updated_at = now()
      from old where c.id = old.id
      returning c.*, old.subscribed as old_subscribed
    ),
    subscription_events as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, u.id,
        case when u.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end, '{"method":"api"}'::jsonb, clock_timestamp(), ${opts.test ?? false}::boolean
      from updated u where u.subscribed <> u.old_subscribed
    )
    select id, project_id, email, email_key, subscribed, data, snoozed_until, created_at, updated_at from updated
  `,
  );
  const r = rows.rows[0];
  if (!r) return undefined;
  return {
    id: r.id as string,
    projectId: r.project_id as string,
    email: r.email as string,
    emailKey: r.email_key as string,
    subscribed: r.subscribed as boolean,
    data: r.data as Record<string, unknown>,
    snoozedUntil: r.snoozed_until === null ? null : new Date(r.snoozed_until as string),
    createdAt: new Date(r.created_at as string),
    updatedAt: new Date(r.updated_at as string),
  };
}

/** Exact counts are made up to this many matches; beyond it `total` is this lower bound. */
export const SEARCH_COUNT_CAP = 10_000;

/** Filters and paging of {@link listContacts}. */
export interface ContactListQuery {
  limit: number;
  /** Keyset: contacts created before this id (newest first). */
  beforeId?: string;
  subscribed?: boolean;
  /** Case-insensitive substring of the address. */
  search?: string;
  /** A compiled segment filter over `contacts` (`compileFilter`, alias `contacts`). */
  predicate?: SQL;
}

/**
 * Lists contacts newest first by keyset (`id < cursor`), so a page never repeats or skips a contact that
 * exists for the whole listing, whatever is inserted or deleted meanwhile.
 *
 * `total`: from the maintained counters (exact, O(1)) without `search` or `predicate`; with either, an exact
 * count capped at {@link SEARCH_COUNT_CAP} (`totalExact: false` when the cap is reached).
 */
export async function listContacts(db: DbOrTx, projectId: string, q: ContactListQuery) {
  const filters: SQL[] = [eq(contacts.projectId, projectId)];
  if (q.subscribed !== undefined) filters.push(eq(contacts.subscribed, q.subscribed));
  if (q.search) {
    filters.push(sql`${contacts.emailKey} like ${likePattern(q.search.toLowerCase())}`);
  }
  if (q.predicate) filters.push(q.predicate);
  const page = await db
    .select()
    .from(contacts)
    .where(and(...filters, q.beforeId ? sql`${contacts.id} < ${q.beforeId}::uuid` : undefined))
    .orderBy(sql`${contacts.id} desc`)
    .limit(q.limit + 1);

  let total: number;
  let totalExact = true;
  if (q.search || q.predicate) {
    const counted = await db.execute<{ n: number }>(
      sql`select count(*)::int as n from (select 1 from contacts where ${and(...filters)} limit ${SEARCH_COUNT_CAP + 1}) m`,
    );
    total = counted.rows[0].n;
    if (total > SEARCH_COUNT_CAP) {
      total = SEARCH_COUNT_CAP;
      totalExact = false;
    }
  } else {
    const [stats] = await db.select().from(contactStatsNow).where(eq(contactStatsNow.projectId, projectId));
    const all = stats?.total ?? 0;
    const subscribed = stats?.subscribed ?? 0;
    total = q.subscribed === undefined ? all : q.subscribed ? subscribed : all - subscribed;
  }
  return { items: page.slice(0, q.limit), hasMore: page.length > q.limit, total, totalExact };
}
