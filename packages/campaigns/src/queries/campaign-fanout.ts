/**
 * A campaign's fan-out and feeding: its audience turned into queued email rows in batches behind `fanout_cursor`
 * (one transaction each, with the cursor advance), and those rows handed to the send queue behind
 * `enqueue_cursor`, at most a window at a time.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { errorCode } from '@mailroom/platform/errors';
import { trackingSql } from '@mailroom/db/queries/tracking-rule';
import { contactSuppressedSql } from '@mailroom/db/queries/suppression-rule';
import type { DbOrTx } from '@mailroom/db/client';
import type { CampaignStatus } from '@mailroom/db/schema';
import { NIL_UUID, type CampaignRow } from './campaigns';

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
