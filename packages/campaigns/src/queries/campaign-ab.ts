/**
 * The A/B test moves of a campaign (docs/guides/campaigns.md, A/B tests) and the per-variant counts they are decided
 * on. Each move is one conditional UPDATE on the campaign row, so the campaign job, a second job and the API's
 * "pick the winner" never both make it:
 *
 * - TESTING → WAITING ({@link enterWaiting}): the test group is fanned out, every test email handed to the send
 *   queue and final; `ab_decide_at` = now + the wait.
 * - the winner is recorded ({@link recordWinner}): once, in TESTING or WAITING (by the job when `ab_decide_at` has
 *   come, or by hand).
 * - TESTING/WAITING → WINNER ({@link startRemainder}): with a winner, the test group fanned out and every test email
 *   handed to the send queue; the fan-out cursors start again for the rest of the audience.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import type { AbDecision, AbMetric } from '@mailroom/db/schema/campaigns';
import { campaigns } from '@mailroom/db/schema';
import { NIL_UUID, type CampaignRow } from './campaigns';

/** Statuses that count as sent (a later status implies it), as the campaign stats count them. */
const SENT_STATUSES = sql.raw(`('sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained')`);

/** A campaign row read back from raw SQL, in the ORM's shape. */
async function campaignById(db: DbOrTx, id: string): Promise<CampaignRow | undefined> {
  const [row] = await db
    .select()
    .from(campaigns)
    .where(sql`${campaigns.id} = ${id}::uuid`);
  return row;
}

/**
 * TESTING → WAITING, when the test group is fanned out and none of its emails is queued or sending (nor a winner
 * chosen already: then the remainder starts instead). @returns the campaign in WAITING, or undefined.
 */
export async function enterWaiting(db: DbOrTx, id: string, waitSeconds: number): Promise<CampaignRow | undefined> {
  const moved = await db.execute<{ id: string }>(sql`
    update campaigns set ab_phase = 'WAITING', ab_decide_at = now() + make_interval(secs => ${waitSeconds}), updated_at = now()
    where id = ${id}::uuid and status = 'SENDING' and ab_phase = 'TESTING' and fanout_done and ab_winner is null
      and not exists (select 1 from emails where campaign_id = ${id}::uuid and status in ('queued', 'sending'))
    returning id
  `);
  return moved.rows.length > 0 ? campaignById(db, id) : undefined;
}

/**
 * TESTING or WAITING → WINNER: the winner goes to the rest of the audience. Needs a winner, the test group fanned
 * out, and every test email handed to the send queue (none `queued` beyond `enqueue_cursor`), because the cursors
 * start again: the remainder is fanned out and fed from the first contact id, and test emails still in flight
 * are finished by their send jobs. @returns whether it moved.
 */
export async function startRemainder(db: DbOrTx, id: string): Promise<boolean> {
  const moved = await db.execute(sql`
    update campaigns set ab_phase = 'WINNER', fanout_cursor = null, fanout_done = false, enqueue_cursor = null, updated_at = now()
    where id = ${id}::uuid and status = 'SENDING' and ab_phase in ('TESTING', 'WAITING') and fanout_done and ab_winner is not null
      and not exists (
        select 1 from emails where campaign_id = ${id}::uuid and status = 'queued'
          and contact_id > coalesce((select enqueue_cursor from campaigns where id = ${id}::uuid), ${NIL_UUID}::uuid))
    returning id
  `);
  return (moved.rowCount ?? 0) > 0;
}

/**
 * Records the winner and the figures it was chosen on, once: the campaign must be SENDING or PAUSED, in TESTING or
 * WAITING, without a winner. Runs in the caller's transaction, after {@link lockForDecision}.
 *
 * @returns the updated campaign, or undefined when it no longer qualifies.
 */
export async function recordWinner(tx: DbOrTx, id: string, decision: AbDecision): Promise<CampaignRow | undefined> {
  const moved = await tx.execute<{ id: string }>(sql`
    update campaigns set ab_winner = ${decision.winner}, ab_decision = ${JSON.stringify(decision)}::jsonb,
      ab_decide_at = least(coalesce(ab_decide_at, now()), now()), updated_at = now()
    where id = ${id}::uuid and status in ('SENDING', 'PAUSED') and ab_phase in ('TESTING', 'WAITING') and ab_winner is null
    returning id
  `);
  return moved.rows.length > 0 ? campaignById(tx, id) : undefined;
}

/** Locks the campaign row for a decision (`for update`) and reads it; undefined when it is not of the project. */
export async function lockForDecision(tx: DbOrTx, projectId: string, id: string): Promise<CampaignRow | undefined> {
  await tx.execute(sql`select 1 from campaigns where id = ${id}::uuid and project_id = ${projectId}::uuid for update`);
  const [row] = await tx
    .select()
    .from(campaigns)
    .where(sql`${campaigns.id} = ${id}::uuid and ${campaigns.projectId} = ${projectId}::uuid`);
  return row;
}

/** One variant's counts. */
export interface VariantCounts {
  variant: number;
  /** Emails of the variant (queued, sent, failed… every row). */
  recipients: number;
  /** Accepted by SES (including those later delivered, opened, bounced…). */
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  /** The metric's conversions: opened, clicked, or sent emails whose contact recorded the event after the send. */
  conversions: number;
}

/**
 * Counts the emails of a campaign by variant: recipients, sent, delivered, opened, clicked (first-event timestamps,
 * as the campaign stats), and the metric's conversions. For a custom event, an email converts when its contact
 * recorded the event (same project, same test flag) between the email's `sent_at` and `until`.
 *
 * @param c - the campaign (its id, project and test flag).
 * @param until - the end of the event window (the decision time; now for live figures).
 */
export async function countByVariant(
  db: DbOrTx,
  c: Pick<CampaignRow, 'id' | 'projectId'>,
  metric: AbMetric,
  event: string | null,
  until: Date,
): Promise<VariantCounts[]> {
  const conversions =
    metric === 'opens'
      ? sql`count(*) filter (where e.opened_at is not null or e.clicked_at is not null)`
      : metric === 'clicks'
        ? sql`count(*) filter (where e.clicked_at is not null)`
        : sql`count(*) filter (where e.sent_at is not null and exists (
            select 1 from events ev where ev.project_id = ${c.projectId}::uuid and ev.name = ${event ?? ''} and ev.contact_id = e.contact_id
              and ev.test = e.test and ev.created_at >= e.sent_at and ev.created_at <= ${until.toISOString()}::timestamptz))`;
  const rows = await db.execute<Omit<VariantCounts, never>>(sql`
    select e.variant::int as variant, count(*)::int as recipients,
      count(*) filter (where e.status in ${SENT_STATUSES})::int as sent,
      count(*) filter (where e.delivered_at is not null or e.opened_at is not null or e.clicked_at is not null
        or e.status in ('delivered', 'opened', 'clicked', 'complained'))::int as delivered,
      count(*) filter (where e.opened_at is not null or e.clicked_at is not null)::int as opened,
      count(*) filter (where e.clicked_at is not null)::int as clicked,
      ${conversions}::int as conversions
    from emails e where e.campaign_id = ${c.id}::uuid and e.variant is not null
    group by e.variant order by e.variant
  `);
  return rows.rows;
}
