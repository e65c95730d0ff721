/**
 * What the SES quota watcher and the campaign lane's fair share read: live sends counted in `reputation_counts`
 * (hourly, UTC; test emails never counted), the live SENDING campaigns, and how many projects and campaigns
 * share the campaign lane.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '../client';

/** The current UTC hour's bucket start, as `reputation_counts.hour` stores it. */
const CURRENT_HOUR = sql`(date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC')`;

/**
 * Live emails sent in the last 24 hours, all projects (the local account provider's `SentLast24Hours`). The counts
 * are hourly, so this sums the current hour and the 24 before it: the oldest hour counts wholly until it has
 * left the window, an over-count of at most one hour's sends, never an under-count.
 */
export async function sentInLast24Hours(db: DbOrTx): Promise<number> {
  const r = await db.execute<{ n: string | number | null }>(sql`
    select coalesce(sum(sent), 0)::bigint as n from reputation_counts where hour >= ${CURRENT_HOUR} - interval '24 hours'`);
  return Number(r.rows[0]?.n ?? 0);
}

/**
 * Live emails counted in the hourly buckets from `hour` on (all projects), and that hour's start: read with an
 * SES account reading and again later, the difference is what this deployment sent in between.
 *
 * @param hour - any time; its UTC hour's bucket is the first counted. Omitted: the current hour.
 */
export async function sentSinceHour(db: DbOrTx, hour?: Date): Promise<{ hour: Date; sent: number }> {
  const from = hour
    ? sql`(date_trunc('hour', ${hour.toISOString()}::timestamptz at time zone 'UTC') at time zone 'UTC')`
    : CURRENT_HOUR;
  const r = await db.execute<{ hour: Date | string; n: string | number | null }>(sql`
    select ${from} as hour, (select coalesce(sum(sent), 0)::bigint from reputation_counts where hour >= ${from}) as n`);
  return { hour: new Date(r.rows[0].hour), sent: Number(r.rows[0].n ?? 0) };
}

/** SENDING campaigns that send through SES (not test campaigns), oldest first: the quota watcher pauses these. */
export async function sendingLiveCampaigns(db: DbOrTx, limit: number): Promise<{ id: string; projectId: string }[]> {
  const r = await db.execute<{ id: string; project_id: string }>(sql`
    select id, project_id from campaigns where status = 'SENDING' and not test order by id limit ${limit}`);
  return r.rows.map((x) => ({ id: x.id, projectId: x.project_id }));
}

/** Who shares the campaign lane with a campaign (of the campaign's own mode, live or test). */
export interface LaneShare {
  /** Projects with a campaign of this mode still feeding the lane (this campaign's project included). */
  projects: number;
  /** Campaigns of this campaign's project and mode still feeding the lane (this one included). */
  campaignsOfProject: number;
}

/**
 * How many projects, and campaigns of `projectId`, share the campaign lane now: SENDING campaigns that still have
 * emails to hand to the send queue (fan-out not done, or rows beyond the enqueue cursor). A campaign whose every
 * email is already in the queue or final takes no share. `campaignId` always counts (it is asking to feed).
 *
 * Live and test campaigns are counted apart: test traffic has a share of its own, so a test campaign (which never
 * reaches SES) never takes a part of the lane from the live projects, and live campaigns never squeeze test runs
 * to nothing either. Reads the partial index of active campaigns.
 */
export async function campaignLaneShare(db: DbOrTx, campaignId: string, projectId: string): Promise<LaneShare> {
  const r = await db.execute<{ projects: number; mine: number }>(sql`
    with feeding as (
      select id, project_id from campaigns
      where status = 'SENDING' and (id = ${campaignId}::uuid or not fanout_done or enqueue_cursor is distinct from fanout_cursor)
        and test = (select k.test from campaigns k where k.id = ${campaignId}::uuid)
    )
    select count(distinct project_id)::int as projects, count(*) filter (where project_id = ${projectId}::uuid)::int as mine from feeding`);
  const row = r.rows[0];
  return { projects: Math.max(1, row?.projects ?? 1), campaignsOfProject: Math.max(1, row?.mine ?? 1) };
}
