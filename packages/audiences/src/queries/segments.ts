/**
 * Segments: CRUD, static membership, live members of dynamic segments, previews, and the worker's recount /
 * membership tracking. Every query is scoped by project.
 *
 * @module
 */
import { and, desc, eq, sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { campaigns, contacts, segments, type SegmentType } from '@mailroom/db/schema';
import { compileAudience, segmentAudience } from '../audience';
import type { ContactRow } from '@mailroom/contacts/queries/contacts';

export type SegmentRow = typeof segments.$inferSelect;

/** Fields of a new segment; `filter` is the raw JSON, already validated by `parseSegmentFilter`. */
export interface NewSegment {
  name: string;
  description?: string | null;
  type: SegmentType;
  filter?: unknown;
  trackMembership?: boolean;
}

/** Inserts a segment. A duplicate name raises the driver's unique violation (23505). */
export async function createSegment(db: DbOrTx, projectId: string, input: NewSegment): Promise<SegmentRow> {
  const [row] = await db
    .insert(segments)
    .values({
      projectId,
      name: input.name,
      description: input.description ?? null,
      type: input.type,
      filter: input.type === 'DYNAMIC' ? input.filter : null,
      trackMembership: input.trackMembership ?? false,
      // A STATIC segment starts empty; a DYNAMIC one is counted by the worker.
      // Membership rows (STATIC, tracked DYNAMIC) are counted by trigger from zero; untracked DYNAMIC by the worker.
      memberCount: input.type === 'STATIC' || input.trackMembership ? 0 : null,
      memberCountAt: input.type === 'STATIC' ? new Date() : null,
    })
    .returning();
  return row;
}

/** A segment of the project, or `undefined`. */
export async function getSegment(db: DbOrTx, projectId: string, id: string): Promise<SegmentRow | undefined> {
  const [row] = await db
    .select()
    .from(segments)
    .where(and(eq(segments.projectId, projectId), eq(segments.id, id)));
  return row;
}

/** Segments newest first by keyset (or skipping `offset` rows for page numbers), with the project's total. */
export async function listSegments(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string; offset?: number },
) {
  return keysetList(db, segments, eq(segments.projectId, projectId), q);
}

/**
 * Updates a segment. A new filter invalidates the cached count (the worker recounts it); turning tracking off
 * drops the materialised members of a DYNAMIC segment.
 */
export async function updateSegment(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: { name?: string; description?: string | null; filter?: unknown; trackMembership?: boolean },
): Promise<SegmentRow | undefined> {
  return db.transaction(async (tx) => {
    const [current] = await tx
      .select()
      .from(segments)
      .where(and(eq(segments.projectId, projectId), eq(segments.id, id)))
      .for('update');
    if (!current) return undefined;
    const dynamic = current.type === 'DYNAMIC';
    if (dynamic && current.trackMembership && patch.trackMembership === false) {
      await tx.execute(sql`delete from segment_members where segment_id = ${id}::uuid`);
    }
    const [row] = await tx
      .update(segments)
      .set({
        ...(patch.name !== undefined ? { name: patch.name } : {}),
        ...(patch.description !== undefined ? { description: patch.description } : {}),
        ...(patch.trackMembership !== undefined ? { trackMembership: patch.trackMembership } : {}),
        // Tracking starts from no membership rows, which the trigger counts up from zero.
        ...(dynamic && patch.trackMembership === true && !current.trackMembership ? { memberCount: 0 } : {}),
        ...(patch.filter !== undefined && dynamic ? { filter: patch.filter } : {}),
        ...((patch.filter !== undefined || patch.trackMembership !== undefined) && dynamic
          ? { memberCountAt: null }
          : {}),
        updatedAt: new Date(),
      })
      .where(eq(segments.id, id))
      .returning();
    return row;
  });
}

/** Why a segment could not be deleted. */
export type DeleteSegmentResult =
  /** `failedTestCampaigns`: those of `failedCampaigns` that are test campaigns (their webhooks say `test: true`). */
  | { deleted: true; failedCampaigns: string[]; failedTestCampaigns: string[] }
  | { deleted: false; reason: 'missing' | 'in-use'; campaignId?: string };

/**
 * Deletes a segment. Campaigns SCHEDULED on it become FAILED (their audience is gone) in the same transaction;
 * a campaign still building its recipient list from it (SENDING or PAUSED) blocks the delete (`in-use`). DRAFT campaigns keep
 * `segmentId: null` and must be given another audience before sending.
 */
export async function deleteSegment(db: DbOrTx, projectId: string, id: string): Promise<DeleteSegmentResult> {
  return db.transaction(async (tx) => {
    const locked = await tx.execute(
      sql`select id, name from segments where project_id = ${projectId}::uuid and id = ${id}::uuid for update`,
    );
    const seg = locked.rows[0] as { name: string } | undefined;
    if (!seg) return { deleted: false, reason: 'missing' };
    const using = await tx.execute<{ id: string; status: string; fanout_done: boolean }>(sql`
      select id, status, fanout_done from campaigns
      where project_id = ${projectId}::uuid and segment_id = ${id}::uuid and status in ('SCHEDULED', 'SENDING', 'PAUSED')
      order by id for update
    `);
    const fanningOut = using.rows.find((c) => (c.status === 'SENDING' || c.status === 'PAUSED') && !c.fanout_done);
    if (fanningOut) return { deleted: false, reason: 'in-use', campaignId: fanningOut.id };
    const failed = await tx
      .update(campaigns)
      .set({
        status: 'FAILED',
        error: `segment "${seg.name}" was deleted before the campaign started`,
        completedAt: new Date(),
        updatedAt: new Date(),
      })
      .where(and(eq(campaigns.projectId, projectId), eq(campaigns.segmentId, id), eq(campaigns.status, 'SCHEDULED')))
      .returning({ id: campaigns.id, test: campaigns.test });
    await tx.delete(segments).where(eq(segments.id, id));
    return {
      deleted: true,
      failedCampaigns: failed.map((f) => f.id),
      failedTestCampaigns: failed.filter((f) => f.test).map((f) => f.id),
    };
  });
}

/**
 * Contacts matching a predicate, newest first by keyset. Shared by `GET /contacts?filter=`,
 * `GET /segments/{id}/contacts` and previews.
 *
 * @param q.offset - rows to skip (Plunk's page numbers, capped by the caller); absent with a cursor.
 */
export async function listMatchingContacts(
  db: DbOrTx,
  projectId: string,
  predicate: SQL,
  q: { limit: number; beforeId?: string; offset?: number },
): Promise<{ items: ContactRow[]; hasMore: boolean }> {
  const page = await matchingPageQuery(db, projectId, predicate, q);
  return { items: page.slice(0, q.limit), hasMore: page.length > q.limit };
}

/** The query of {@link listMatchingContacts}: `q.limit + 1` rows, newest first (`npm run bench` explains it). */
export function matchingPageQuery(
  db: DbOrTx,
  projectId: string,
  predicate: SQL,
  q: { limit: number; beforeId?: string; offset?: number },
) {
  return db
    .select()
    .from(contacts)
    .where(
      and(
        eq(contacts.projectId, projectId),
        predicate,
        q.beforeId ? sql`${contacts.id} < ${q.beforeId}::uuid` : undefined,
      ),
    )
    .orderBy(desc(contacts.id))
    .limit(q.limit + 1)
    .offset(q.offset ?? 0);
}

/** The statement of {@link countMatchingContacts} (`n`: the count, up to `cap + 1`), run after {@link COUNT_SETTINGS}. */
export function matchingCountQuery(projectId: string, predicate: SQL, cap?: number): SQL {
  const limit = cap !== undefined ? sql` limit ${cap + 1}` : sql``;
  return sql`select count(*)::int as n from (select 1 from contacts where contacts.project_id = ${projectId}::uuid and ${predicate}${limit}) m`;
}

/**
 * Settings of a count's transaction: no JIT compilation. A count over a large project is costed above
 * `jit_above_cost` (and past 500,000, the inlining and optimisation thresholds), and JIT then spends tens to
 * hundreds of milliseconds compiling expressions that one scan does not earn back.
 */
export const COUNT_SETTINGS = sql`set local jit = off`;

/**
 * Counts the project's contacts matching a predicate over `contacts` (the one {@link listMatchingContacts} takes,
 * e.g. `compileAudience(…)` with the default alias), exactly, or up to `cap` (then `exact: false`).
 *
 * Runs in a transaction of its own with {@link COUNT_SETTINGS} (inside a caller's transaction, a savepoint: the
 * settings then last until that transaction ends).
 */
export async function countMatchingContacts(
  db: DbOrTx,
  projectId: string,
  predicate: SQL,
  cap?: number,
): Promise<{ count: number; exact: boolean }> {
  const result = await db.transaction(async (tx) => {
    await tx.execute(COUNT_SETTINGS);
    return tx.execute<{ n: number }>(matchingCountQuery(projectId, predicate, cap));
  });
  const n = result.rows[0].n;
  return cap !== undefined && n > cap ? { count: cap, exact: false } : { count: n, exact: true };
}

/** Result of a membership change. */
export interface MembershipChange {
  /** Contacts whose membership changed. */
  changed: number;
  /** Requested ids or addresses that are not contacts of the project. */
  notFound: string[];
}

function entryExitEvents(
  segmentId: string,
  name: string,
  kind: 'entry' | 'exit',
  projectId: string,
  cte: string,
  test = false,
) {
  return sql`insert into events (id, project_id, contact_id, name, data, created_at, test)
    select mailroom_uuid_v7(t.at), ${projectId}::uuid, x.contact_id, ${`segment.${name}.${kind}`},
      jsonb_build_object('segmentId', ${segmentId}::text), t.at, ${test}::boolean
    from ${sql.identifier(cte)} x, (select date_trunc('milliseconds', now()) as at) t`;
}

/**
 * Adds contacts (by id or address) to a STATIC segment, or removes them. With tracking on, records
 * `segment.<name>.entry` / `.exit` events for the contacts that actually changed, in the same statement
 * (test events with `opts.test`: a test key's request).
 */
export async function changeStaticMembers(
  db: DbOrTx,
  segment: SegmentRow,
  action: 'add' | 'remove',
  refs: { contactIds?: string[]; emails?: string[] },
  opts: { test?: boolean } = {},
): Promise<MembershipChange> {
  const ids = refs.contactIds ?? [];
  const keys = (refs.emails ?? []).map((e) => e.trim().toLowerCase());
  const matched = await db.execute<{ id: string; email_key: string }>(sql`
    select id, email_key from contacts where project_id = ${segment.projectId}::uuid
      and (id = any(${sql.param(ids)}::uuid[]) or email_key = any(${sql.param(keys)}::text[]))
  `);
  const foundIds = new Set(matched.rows.map((r) => r.id));
  const foundKeys = new Set(matched.rows.map((r) => r.email_key));
  const notFound = [
    ...ids.filter((i) => !foundIds.has(i)),
    ...(refs.emails ?? []).filter((e) => !foundKeys.has(e.trim().toLowerCase())),
  ];
  const targets = [...foundIds];
  if (targets.length === 0) return { changed: 0, notFound };
  const change =
    action === 'add'
      ? sql`insert into segment_members (segment_id, contact_id)
          select ${segment.id}::uuid, unnest(${sql.param(targets)}::uuid[]) on conflict do nothing returning contact_id`
      : sql`delete from segment_members where segment_id = ${segment.id}::uuid and contact_id = any(${sql.param(targets)}::uuid[]) returning contact_id`;
  const track = segment.trackMembership
    ? sql`, ev as (${entryExitEvents(segment.id, segment.name, action === 'add' ? 'entry' : 'exit', segment.projectId, 'changed', opts.test)})`
    : sql``;
  const result = await db.execute<{ n: number }>(
    sql`with changed as (${change})${track} select count(*)::int as n from changed`,
  );
  return { changed: result.rows[0].n, notFound };
}

/** Segments whose count is missing or older than `staleMs`, for the worker's refresher (oldest first). */
export async function dueSegments(db: DbOrTx, staleMs: number, limit: number): Promise<SegmentRow[]> {
  return db
    .select()
    .from(segments)
    .where(
      and(
        eq(segments.type, 'DYNAMIC'),
        sql`(${segments.memberCountAt} is null or ${segments.memberCountAt} < now() - make_interval(secs => ${staleMs / 1000}))`,
      ),
    )
    .orderBy(sql`${segments.memberCountAt} asc nulls first`)
    .limit(limit);
}

/**
 * Re-evaluates a DYNAMIC segment. Untracked: stores the count. Tracked: in one statement, inserts new members and
 * deletes departed ones (the trigger keeps the count) and records their entry / exit events.
 *
 * @returns the member count and how many contacts entered and exited.
 */
export async function refreshSegment(
  db: DbOrTx,
  segment: SegmentRow,
): Promise<{ count: number; entered: number; exited: number }> {
  const predicate = compileAudience(segment.projectId, segmentAudience(segment), { now: Date.now(), alias: 'c' });
  if (!segment.trackMembership) {
    const result = await db.execute<{ n: number }>(sql`
      with counted as (select count(*)::bigint as n from contacts c where c.project_id = ${segment.projectId}::uuid and ${predicate})
      update segments set member_count = counted.n, member_count_at = now() from counted
      where id = ${segment.id}::uuid returning counted.n::int as n
    `);
    return { count: result.rows[0]?.n ?? 0, entered: 0, exited: 0 };
  }
  const result = await db.execute<{ entered: number; exited: number }>(sql`
    with matching as materialized (
      select c.id from contacts c where c.project_id = ${segment.projectId}::uuid and ${predicate}
    ),
    entered as (
      insert into segment_members (segment_id, contact_id) select ${segment.id}::uuid, id from matching
      on conflict do nothing returning contact_id
    ),
    exited as (
      delete from segment_members sm where sm.segment_id = ${segment.id}::uuid
        and not exists (select 1 from matching m where m.id = sm.contact_id)
      returning contact_id
    ),
    ev_in as (${entryExitEvents(segment.id, segment.name, 'entry', segment.projectId, 'entered')}),
    ev_out as (${entryExitEvents(segment.id, segment.name, 'exit', segment.projectId, 'exited')})
    select (select count(*) from entered)::int as entered, (select count(*) from exited)::int as exited
  `);
  // The membership triggers keep member_count; mark the evaluation time (a no-change pass fires no trigger).
  const [row] = await db
    .update(segments)
    .set({ memberCountAt: new Date() })
    .where(eq(segments.id, segment.id))
    .returning({ n: segments.memberCount });
  return { count: row?.n ?? 0, entered: result.rows[0].entered, exited: result.rows[0].exited };
}
