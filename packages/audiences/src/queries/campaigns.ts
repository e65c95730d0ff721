/**
 * Campaigns: CRUD and state transitions (docs/api/overview.md, campaign states), the worker's fan-out and feeding of
 * the send queue, completion, and statistics. Every transition is one conditional UPDATE on the status, so two requests
 * (or a request and the worker) can never both move a campaign.
 *
 * @module
 */
import { trackingSql } from '@mailroom/db/queries/tracking';
import { and, eq, ilike, inArray, or, sql, type SQL } from 'drizzle-orm';
import { contactSuppressedSql } from '@mailroom/db/queries/suppression-rule';
import { errorCode } from '@mailroom/platform/errors';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { campaigns, type CampaignStatus } from '@mailroom/db/schema';

export type CampaignRow = typeof campaigns.$inferSelect;
export type NewCampaign = Pick<
  typeof campaigns.$inferInsert,
  | 'name'
  | 'description'
  | 'subject'
  | 'body'
  | 'fromEmail'
  | 'fromName'
  | 'replyTo'
  | 'tracking'
  | 'audienceType'
  | 'segmentId'
  | 'audienceFilter'
  | 'abTest'
  | 'templateId'
  | 'templateVersion'
  | 'contentVersion'
  | 'topicId'
  | 'tags'
>;

export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

/** A campaign with an A/B test starts SENDING in its TESTING phase; one without has no phase. */
const abPhaseAtStart = sql<'TESTING' | null>`case when ${campaigns.abTest} is not null then 'TESTING' end`;

/** Inserts a DRAFT campaign. */
export async function createCampaign(db: DbOrTx, projectId: string, input: NewCampaign): Promise<CampaignRow> {
  const [row] = await db
    .insert(campaigns)
    .values({ ...input, projectId, status: 'DRAFT' })
    .returning();
  return row;
}

/** A campaign of the project, or `undefined`. */
export async function getCampaign(db: DbOrTx, projectId: string, id: string): Promise<CampaignRow | undefined> {
  const [row] = await db
    .select()
    .from(campaigns)
    .where(and(eq(campaigns.projectId, projectId), eq(campaigns.id, id)));
  return row;
}

/**
 * Campaigns newest first by keyset (or skipping `offset` rows for page numbers), optionally of one status and
 * matching `search` (case-insensitive substring of name, subject or sender, as Plunk's list), with the matching total.
 */
export async function listCampaigns(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string; offset?: number; status?: CampaignStatus; search?: string },
) {
  const pattern = q.search ? `%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%` : undefined;
  const matches = pattern
    ? or(ilike(campaigns.name, pattern), ilike(campaigns.subject, pattern), ilike(campaigns.fromEmail, pattern))
    : undefined;
  return keysetList(
    db,
    campaigns,
    and(eq(campaigns.projectId, projectId), q.status ? eq(campaigns.status, q.status) : undefined, matches),
    q,
  );
}

/** Outcome of a transition: the updated row, or why not. */
export type Transition =
  | { ok: true; campaign: CampaignRow }
  | { ok: false; reason: 'missing' }
  | { ok: false; reason: 'state'; status: CampaignStatus };

async function explainMiss(db: DbOrTx, projectId: string, id: string): Promise<Transition> {
  const current = await getCampaign(db, projectId, id);
  return current ? { ok: false, reason: 'state', status: current.status } : { ok: false, reason: 'missing' };
}

/** Updates content or audience of a DRAFT or SCHEDULED campaign. */
export async function updateCampaign(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: Partial<NewCampaign>,
): Promise<Transition> {
  const [row] = await db
    .update(campaigns)
    .set({ ...patch, updatedAt: new Date() })
    .where(
      and(eq(campaigns.projectId, projectId), eq(campaigns.id, id), inArray(campaigns.status, ['DRAFT', 'SCHEDULED'])),
    )
    .returning();
  return row ? { ok: true, campaign: row } : explainMiss(db, projectId, id);
}

/** Deletes a DRAFT campaign. */
export async function deleteDraftCampaign(db: DbOrTx, projectId: string, id: string): Promise<Transition> {
  const [row] = await db
    .delete(campaigns)
    .where(and(eq(campaigns.projectId, projectId), eq(campaigns.id, id), eq(campaigns.status, 'DRAFT')))
    .returning();
  return row ? { ok: true, campaign: row } : explainMiss(db, projectId, id);
}

/**
 * `POST /campaigns/{id}/send`: from DRAFT or SCHEDULED, to SCHEDULED at `scheduledAt` (a future time; also
 * reschedules) or to SENDING now (`scheduledAt` null).
 *
 * @param test - sent with a test key: the campaign and every email it fans out are test data (delivered to the
 *   test sink, never to SES). The last send or reschedule decides.
 */
export async function sendCampaign(
  db: DbOrTx,
  projectId: string,
  id: string,
  scheduledAt: Date | null,
  test = false,
): Promise<Transition> {
  const [row] = await db
    .update(campaigns)
    .set(
      scheduledAt
        ? { status: 'SCHEDULED', scheduledAt, test, updatedAt: new Date() }
        : {
            status: 'SENDING',
            scheduledAt: sql`coalesce(${campaigns.scheduledAt}, now())`,
            startedAt: new Date(),
            test,
            abPhase: abPhaseAtStart,
            updatedAt: new Date(),
          },
    )
    .where(
      and(eq(campaigns.projectId, projectId), eq(campaigns.id, id), inArray(campaigns.status, ['DRAFT', 'SCHEDULED'])),
    )
    .returning();
  return row ? { ok: true, campaign: row } : explainMiss(db, projectId, id);
}

/**
 * Cancels a DRAFT, SCHEDULED, SENDING or PAUSED campaign, and in the same transaction its emails already handed to the
 * send queue and not yet claimed by a worker (`queued` → `cancelled`, with a timeline entry): at most the
 * campaign's queue window, so the request stays short at any audience size. The rest (rows beyond the window) can
 * no longer be fed to the queue; the campaign job sweeps them with {@link sweepCancelledCampaign}. A worker that
 * claims an email of a cancelled campaign cancels it too, so nothing more reaches SES. Emails already handed to
 * SES stay sent.
 *
 * @returns the transition and how many emails were cancelled here.
 */
export async function cancelCampaign(
  db: DbOrTx,
  projectId: string,
  id: string,
): Promise<Transition & { cancelledEmails?: number }> {
  return db.transaction(async (tx) => {
    // Takes the row lock a fan-out batch also takes: a batch commits wholly before or after the cancel.
    const [row] = await tx
      .update(campaigns)
      .set({ status: 'CANCELLED', cancelledAt: new Date(), completedAt: new Date(), updatedAt: new Date() })
      .where(
        and(
          eq(campaigns.projectId, projectId),
          eq(campaigns.id, id),
          inArray(campaigns.status, ['DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED']),
        ),
      )
      .returning();
    if (!row) return explainMiss(tx, projectId, id);
    const cancelled = await tx.execute<{ n: number }>(sql`
      with cancelled as (
        update emails set status = 'cancelled', error = 'campaign cancelled', updated_at = now()
        where campaign_id = ${id}::uuid and status = 'queued' and contact_id <= ${row.enqueueCursor ?? NIL_UUID}::uuid
        returning id
      ), timeline as (
        insert into email_events (id, email_id, project_id, type, data)
        select mailroom_uuid_v7(clock_timestamp()), c.id, ${projectId}::uuid, 'cancelled', '{"reason":"campaign cancelled"}'::jsonb from cancelled c
      )
      select count(*)::int as n from cancelled
    `);
    return { ok: true, campaign: row, cancelledEmails: cancelled.rows[0].n };
  });
}

/**
 * Cancels up to `limit` still-queued emails of a CANCELLED campaign (with their timeline entries).
 *
 * @returns how many; 0 when none are left.
 */
export async function sweepCancelledCampaign(db: DbOrTx, id: string, limit: number): Promise<number> {
  // The batch's ids as an array probed through each partition's primary key: joined to the batch instead, the update
  // was planned as a hash join over the whole month partition, once per batch.
  const result = await db.execute<{ n: number }>(sql`
    with cancelled as (
      update emails e set status = 'cancelled', error = 'campaign cancelled', updated_at = now()
      where e.id = any(array(
        select id from emails where campaign_id = ${id}::uuid and status = 'queued'
          and exists (select 1 from campaigns where id = ${id}::uuid and status = 'CANCELLED')
        limit ${limit}))
        and e.status = 'queued'
      returning e.id, e.project_id
    ), timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), c.id, c.project_id, 'cancelled', '{"reason":"campaign cancelled"}'::jsonb from cancelled c
    )
    select count(*)::int as n from cancelled
  `);
  return result.rows[0].n;
}

/** Marks a SCHEDULED or SENDING campaign FAILED with a reason (it cannot start). @returns whether it moved. */
export async function failCampaign(db: DbOrTx, id: string, error: string): Promise<boolean> {
  const rows = await db
    .update(campaigns)
    .set({ status: 'FAILED', error, completedAt: new Date(), updatedAt: new Date() })
    .where(and(eq(campaigns.id, id), inArray(campaigns.status, ['SCHEDULED', 'SENDING'])))
    .returning({ id: campaigns.id });
  return rows.length > 0;
}

/** A campaign by id, for the worker (its payload names the project too). */
export async function loadCampaign(db: DbOrTx, id: string): Promise<CampaignRow | undefined> {
  const [row] = await db.select().from(campaigns).where(eq(campaigns.id, id));
  return row;
}

/** SCHEDULED → SENDING once `scheduled_at` has come. @returns the started campaign, or undefined. */
export async function startScheduledCampaign(db: DbOrTx, id: string): Promise<CampaignRow | undefined> {
  const [row] = await db
    .update(campaigns)
    .set({ status: 'SENDING', startedAt: new Date(), abPhase: abPhaseAtStart, updatedAt: new Date() })
    .where(and(eq(campaigns.id, id), eq(campaigns.status, 'SCHEDULED'), sql`${campaigns.scheduledAt} <= now()`))
    .returning();
  return row;
}

/**
 * The id of a new campaign email, as SQL over the campaign row aliased `k`: a UUIDv7 whose timestamp is the campaign's
 * start (fixed once it is SENDING), so a campaign's emails share one month partition, and whose other bits are the next
 * value of `mailroom_campaign_email_seq` (`mailroom_uuid_v7_ordered`, migration 0024), so they follow each other in
 * the partition's indexes in fan-out order. Evaluate it after the rows are sorted (a volatile expression in a
 * sorted SELECT's list is). One email per contact per campaign is the partition's unique index on
 * (campaign_id, contact_id) (`emails_campaign_contact_key_<partition>`), which holds because of the shared month.
 */
export function campaignEmailIdSql(k: string): SQL {
  const c = sql.raw(k);
  return sql`mailroom_uuid_v7_ordered(coalesce(${c}.started_at, ${c}.created_at), nextval('mailroom_campaign_email_seq'))`;
}

/** Result of one fan-out batch. */
export interface FanoutBatch {
  /** False when the campaign is no longer SENDING (cancelled meanwhile) or the audience was already done. */
  applied: boolean;
  inserted: number;
  done: boolean;
}

/** An A/B test phase's part of a fan-out batch, as SQL over `contacts c` (`campaigns/ab-assign.ts`). */
export interface FanoutSelection {
  /** Which contacts of the audience this phase takes. */
  where: SQL;
  /** The variant each gets (`smallint`). */
  variant: SQL;
  /** The phase this selection belongs to: a batch of another phase's run (a duplicated job) applies nothing. */
  phase: string;
}

/**
 * Turns the next `batchSize` contacts of the audience (after `fanout_cursor`, in contact id order) into queued
 * email rows, in one transaction holding the campaign row lock: a bulk `INSERT` (redone with `ON CONFLICT DO NOTHING`
 * when it hits the partition's unique index on (campaign_id, contact_id), see {@link campaignEmailIdSql}) and the
 * cursor advance commit together, so a retried or duplicated batch inserts nobody twice. Only subscribed contacts whose address is not on the suppression list are taken (one that
 * bounces later is caught again at send time). Snoozed contacts (`snoozed_until` ahead) are read with the batch,
 * so the keyset scan keeps its index, but get no email: they are counted in `skipped_snoozed`, in the same
 * statement, committed with the cursor advance.
 *
 * @param audience - predicate over `contacts` aliased `c` (segment, filter, or `true` for ALL).
 * @param selection - for a campaign with an A/B test, the phase's contacts and their variant (test group, or the
 *   rest of the audience with the winner); the cursor then walks that phase's contacts.
 */
export async function fanoutBatch(
  db: DbOrTx,
  campaignId: string,
  audience: SQL,
  batchSize: number,
  selection?: FanoutSelection,
): Promise<FanoutBatch> {
  return db.transaction(async (tx) => {
    const locked = await tx.execute<{
      status: CampaignStatus;
      fanout_done: boolean;
      fanout_cursor: string | null;
      project_id: string;
      ab_phase: string | null;
    }>(
      sql`select status, fanout_done, fanout_cursor, project_id, ab_phase from campaigns where id = ${campaignId}::uuid for update`,
    );
    const c = locked.rows[0];
    if (!c || c.status !== 'SENDING' || c.fanout_done)
      return { applied: false, inserted: 0, done: c?.fanout_done ?? true };
    // A run that read another phase of the A/B test (the cursor restarted since) must not walk the new phase's cursor.
    if ((selection?.phase ?? null) !== c.ab_phase) return { applied: false, inserted: 0, done: false };
    const statement = (onConflict: SQL) => sql`
      with batch as (
        select c.id, c.email, ${selection?.variant ?? sql`null::smallint`} as variant, coalesce(c.snoozed_until > now(), false) as snoozed from contacts c
        where c.project_id = ${c.project_id}::uuid and c.subscribed and c.id > ${c.fanout_cursor ?? NIL_UUID}::uuid and ${audience}
          and ${selection?.where ?? sql`true`} and not ${contactSuppressedSql('c')}
        order by c.id
        limit ${batchSize}
      ),
      ins as (
        insert into emails (id, project_id, contact_id, campaign_id, template_id, template_version, marketing, tracking, source, to_email, from_email, from_name, reply_to, status, test, variant, topic_id, tags)
        select ${campaignEmailIdSql('k')}, k.project_id, b.id, k.id, k.template_id, k.content_version, true, ${trackingSql(sql`k.project_id`, sql`k.tracking`, sql`true`)}, 'campaign', b.email,
          k.from_email, k.from_name, k.reply_to, 'queued', k.test, b.variant, k.topic_id, k.tags
        from batch b, campaigns k where k.id = ${campaignId}::uuid and not b.snoozed
        order by b.id
        ${onConflict}
        returning id
      ),
      moved as (
        update campaigns set
          fanout_cursor = coalesce((select max(id::text)::uuid from batch), fanout_cursor),
          fanout_done = (select count(*) from batch) < ${batchSize},
          recipients = recipients + (select count(*) from ins),
          skipped_snoozed = skipped_snoozed + (select count(*) from batch where snoozed),
          updated_at = now()
        where id = ${campaignId}::uuid
        returning 1
      )
      select (select count(*) from ins)::int as inserted, (select count(*) from batch)::int as taken, (select count(*) from moved)::int as moved
    `;
    // A plain insert first: no speculative insertion per row. Rows already there (the batch re-run after its cursor
    // advance was lost) fail it on the partition's unique index; it is then redone skipping them.
    let result;
    try {
      result = await tx.transaction((sp) => sp.execute<{ inserted: number; taken: number }>(statement(sql``)));
    } catch (err) {
      if (errorCode(err) !== '23505') throw err;
      result = await tx.execute<{ inserted: number; taken: number }>(statement(sql`on conflict do nothing`));
    }
    const r = result.rows[0];
    return { applied: true, inserted: r.inserted, done: r.taken < batchSize };
  });
}

/** A campaign email to enqueue. */
export interface CampaignEmailRef {
  id: string;
  contactId: string;
}

/**
 * The next emails to hand to the send queue, keeping at most `window` of the campaign's emails outstanding
 * (queued or sending, already handed over). Only rows of committed fan-out batches are returned.
 */
export async function nextCampaignEmails(
  db: DbOrTx,
  campaign: Pick<CampaignRow, 'id'>,
  window: number,
): Promise<CampaignEmailRef[]> {
  const state = await db.execute<{ status: string; enqueue_cursor: string | null; fanout_cursor: string | null }>(
    sql`select status, enqueue_cursor, fanout_cursor from campaigns where id = ${campaign.id}::uuid`,
  );
  const s = state.rows[0];
  if (!s || s.status !== 'SENDING' || !s.fanout_cursor) return [];
  const enqueued = s.enqueue_cursor ?? NIL_UUID;
  const outstanding = await db.execute<{ n: number }>(sql`
    select count(*)::int as n from emails
    where campaign_id = ${campaign.id}::uuid and status in ('queued', 'sending') and contact_id <= ${enqueued}::uuid
  `);
  const room = window - outstanding.rows[0].n;
  if (room <= 0) return [];
  const rows = await db.execute<{ id: string; contact_id: string }>(sql`
    select id, contact_id from emails
    where campaign_id = ${campaign.id}::uuid and status in ('queued', 'sending')
      and contact_id > ${enqueued}::uuid and contact_id <= ${s.fanout_cursor}::uuid
    order by contact_id
    limit ${room}
  `);
  return rows.rows.map((r) => ({ id: r.id, contactId: r.contact_id }));
}

/** Records that emails up to contact id `contactId` were handed to the send queue (never moves backwards). */
export async function advanceEnqueueCursor(db: DbOrTx, campaignId: string, contactId: string): Promise<void> {
  await db.execute(sql`
    update campaigns set enqueue_cursor = ${contactId}::uuid
    where id = ${campaignId}::uuid and (enqueue_cursor is null or enqueue_cursor < ${contactId}::uuid)
  `);
}

/**
 * SENDING → SENT when the audience is exhausted and every recipient's email is final (nothing queued or
 * sending); with an A/B test, only once the winner went to the rest (phase WINNER). @returns whether the campaign
 * is now SENT.
 */
export async function completeCampaign(db: DbOrTx, id: string): Promise<boolean> {
  const rows = await db.execute(sql`
    update campaigns set status = 'SENT', completed_at = now(), updated_at = now()
    where id = ${id}::uuid and status = 'SENDING' and fanout_done and (ab_phase is null or ab_phase = 'WINNER')
      and not exists (select 1 from emails where campaign_id = ${id}::uuid and status in ('queued', 'sending'))
    returning id
  `);
  return (rows.rowCount ?? 0) > 0;
}

/**
 * Campaigns that should have a live campaign job: SENDING, SCHEDULED and due within `horizonMs`, or CANCELLED
 * with emails still to sweep.
 */
export async function activeCampaigns(
  db: DbOrTx,
  horizonMs: number,
): Promise<Pick<CampaignRow, 'id' | 'projectId' | 'status' | 'scheduledAt'>[]> {
  return db
    .select({
      id: campaigns.id,
      projectId: campaigns.projectId,
      status: campaigns.status,
      scheduledAt: campaigns.scheduledAt,
    })
    .from(campaigns)
    .where(
      sql`(${campaigns.status} in ('SCHEDULED', 'SENDING') and (${campaigns.status} = 'SENDING' or ${campaigns.scheduledAt} <= now() + make_interval(secs => ${horizonMs / 1000})))
        or (${campaigns.status} = 'CANCELLED' and ${campaigns.recipients} > 0 and ${campaigns.cancelledAt} > now() - interval '7 days'
          and exists (select 1 from emails e where e.campaign_id = ${campaigns.id} and e.status = 'queued'))`,
    )
    .orderBy(campaigns.id)
    .limit(1000);
}

/**
 * Email counts of a campaign by status, how many were sent in the last `rateWindowMs`, and how many were
 * delivered, opened and clicked (from SES events: first-event timestamps, so the order events arrive in and a
 * later status such as `complained` do not hide them).
 */
export async function campaignEmailCounts(db: DbOrTx, campaignId: string, rateWindowMs: number) {
  const rows = await db.execute<{
    status: string;
    n: number;
    recent: number;
    delivered: number;
    opened: number;
    clicked: number;
  }>(sql`
    select status, count(*)::int as n,
      count(*) filter (where sent_at > now() - make_interval(secs => ${rateWindowMs / 1000}))::int as recent,
      -- An open or a click proves delivery, and a click an open, whatever order SES reported them in.
      count(*) filter (where delivered_at is not null or opened_at is not null or clicked_at is not null
        or status in ('delivered', 'opened', 'clicked', 'complained'))::int as delivered,
      count(*) filter (where opened_at is not null or clicked_at is not null)::int as opened,
      count(*) filter (where clicked_at is not null)::int as clicked
    from emails where campaign_id = ${campaignId}::uuid group by status
  `);
  const byStatus: Record<string, number> = {};
  let recentlySent = 0;
  const engaged = { delivered: 0, opened: 0, clicked: 0 };
  for (const r of rows.rows) {
    byStatus[r.status] = r.n;
    recentlySent += r.recent;
    engaged.delivered += r.delivered;
    engaged.opened += r.opened;
    engaged.clicked += r.clicked;
  }
  return { byStatus, recentlySent, ...engaged };
}

/**
 * Progress of every SENDING campaign, for metrics: recipients so far and emails not yet final (`queued`/`sending`,
 * counted on the partial index `emails_campaign_pending_idx`, so finished rows cost nothing).
 */
export async function sendingCampaignProgress(
  db: DbOrTx,
): Promise<{ id: string; projectId: string; recipients: number; pending: number }[]> {
  const rows = await db.execute<{ id: string; project_id: string; recipients: string | number; pending: number }>(sql`
    select c.id, c.project_id, c.recipients,
      (select count(*)::int from emails m where m.campaign_id = c.id and m.status in ('queued', 'sending')) as pending
    from campaigns c where c.status = 'SENDING'
  `);
  return rows.rows.map((r) => ({
    id: r.id,
    projectId: r.project_id,
    recipients: Number(r.recipients),
    pending: r.pending,
  }));
}
