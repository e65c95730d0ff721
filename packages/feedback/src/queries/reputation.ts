/**
 * Reading `reputation_counts` (`GET /reputation`, the reputation gauges of `/metrics`). Counts are kept per UTC
 * hour, so a window is a whole number of hourly buckets ending with the current one: "the last 24 hours" is the
 * 24 buckets from the start of the hour 23 hours before the current one up to now (between 23 and 24 hours of
 * history), "the last 7 days" the 168 such buckets.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { NO_CAMPAIGN } from '@mailroom/db/schema';
import { isCampaignKey, streamKeySql } from '@mailroom/db/queries/reputation-counts';

/** The mail streams reputation is split by (`reputation_counts.campaign_id`: {@link NO_CAMPAIGN} is transactional). */
export const REPUTATION_STREAMS = ['transactional', 'marketing'] as const;
export type ReputationStream = (typeof REPUTATION_STREAMS)[number];

/** The reporting windows and their number of hourly buckets. */
export const REPUTATION_WINDOWS = { last24h: 24, last7d: 168 } as const;
export type ReputationWindow = keyof typeof REPUTATION_WINDOWS;

/** Outcome counts over a window. */
export interface ReputationCounts {
  sent: number;
  delivered: number;
  hardBounces: number;
  softBounces: number;
  complaints: number;
}

/** One window of a project's reputation. */
export interface ReputationWindowCounts {
  /** Start of the window's first hourly bucket. */
  since: Date;
  overall: ReputationCounts;
  /** Per mail stream: transactional (`/v1/send`, workflows, TRANSACTIONAL templates) and marketing (campaigns, MARKETING templates). */
  streams: Record<ReputationStream, ReputationCounts>;
  /** Per sending domain with activity in the window, most sent first. */
  domains: (ReputationCounts & { domain: string })[];
  /** Per campaign with activity in the window, most sent first, at most the limit asked. */
  campaigns: (ReputationCounts & { campaignId: string; name: string | null })[];
  /** More campaigns had activity than were listed. */
  campaignsTruncated: boolean;
}

const ZERO: ReputationCounts = { sent: 0, delivered: 0, hardBounces: 0, softBounces: 0, complaints: 0 };
const COLUMNS = {
  sent: 'sent',
  delivered: 'delivered',
  hardBounces: 'hard_bounces',
  softBounces: 'soft_bounces',
  complaints: 'complaints',
} as const;
type Prefix = 'd' | 'w';
type Sums = Record<`${Prefix}_${keyof ReputationCounts}`, number>;

/** `coalesce(sum(<alias>.<column>) filter (where …), 0)::float8 as <prefix>_<field>` for every count. */
function sums(alias: string, prefix: Prefix, filter: SQL = sql`true`): SQL {
  return sql.join(
    Object.entries(COLUMNS).map(
      ([field, column]) =>
        sql`coalesce(sum(${sql.identifier(alias)}.${sql.identifier(column)}) filter (where ${filter}), 0)::float8 as ${sql.identifier(`${prefix}_${field}`)}`,
    ),
    sql`, `,
  );
}

function pick(r: Sums, prefix: Prefix): ReputationCounts {
  return {
    sent: r[`${prefix}_sent`],
    delivered: r[`${prefix}_delivered`],
    hardBounces: r[`${prefix}_hardBounces`],
    softBounces: r[`${prefix}_softBounces`],
    complaints: r[`${prefix}_complaints`],
  };
}

/** The current UTC hour's start, as `countReputation` stamps it (the database's clock). */
const CURRENT_HOUR = sql`(date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC')`;

const active = (c: ReputationCounts) => c.sent + c.delivered + c.hardBounces + c.softBounces + c.complaints > 0;

/** The current hour and the windows' first buckets, read once so that every read of one answer uses the same. */
async function windowStarts(db: DbOrTx): Promise<{ hour: Date; starts: Record<ReputationWindow, Date> }> {
  const r = await db.execute<{ hour: Date | string }>(sql`select ${CURRENT_HOUR} as hour`);
  const hour = new Date(r.rows[0].hour);
  const start = (buckets: number) => new Date(hour.getTime() - (buckets - 1) * 3_600_000);
  return { hour, starts: { last24h: start(REPUTATION_WINDOWS.last24h), last7d: start(REPUTATION_WINDOWS.last7d) } };
}

/**
 * A project's outcome counts over the last 24 hours and the last 7 days: overall, per sending domain and per
 * campaign (mail outside campaigns is in the overall and domain figures only). Reads by the primary key's
 * `(project_id, hour)` prefix.
 *
 * @param campaignLimit - most campaigns listed per window.
 * @param stream - only mail of this stream (every figure: overall, domains, campaigns); unset: all.
 * @param tag - only the outcomes of emails carrying this tag (`reputation_tag_counts`).
 * @returns the current hour's start and both windows.
 */
export async function projectReputation(
  db: DbOrTx,
  projectId: string,
  campaignLimit: number,
  stream?: ReputationStream,
  tag?: { name: string; value: string },
): Promise<{ hour: Date; windows: Record<ReputationWindow, ReputationWindowCounts> }> {
  const { hour, starts } = await windowStarts(db);
  // With a tag, the same figures of the emails carrying it: `reputation_tag_counts` has the same keys plus the tag,
  // first in its primary key after the project, so this reads one tag's rows by the key's prefix.
  const counts = tag
    ? sql`reputation_tag_counts r where r.project_id = ${projectId}::uuid and r.tag_name = ${tag.name} and r.tag_value = ${tag.value}`
    : sql`reputation_counts r where r.project_id = ${projectId}::uuid`;
  const day = sql`r.hour >= ${starts.last24h.toISOString()}::timestamptz`;
  const only = stream ? sql`and ${streamKeySql(sql`r.campaign_id`, stream)}` : sql``;
  // A literal, not a parameter: the expression must read the same in the select list and the grouping sets.
  const streamOf = sql.raw(
    `(case when r.campaign_id = '${NO_CAMPAIGN}'::uuid then 'transactional' else 'marketing' end)`,
  );
  const grouped = await db.execute<
    Sums & { domain: string | null; stream: ReputationStream | null; kind: 'total' | 'domain' | 'stream' }
  >(sql`
    select case when grouping(r.domain) = 0 then 'domain' when grouping(${streamOf}) = 0 then 'stream' else 'total' end as kind,
      r.domain, ${streamOf} as stream, ${sums('r', 'd', day)}, ${sums('r', 'w')}
    from ${counts} and r.hour >= ${starts.last7d.toISOString()}::timestamptz ${only}
    group by grouping sets ((), (r.domain), (${streamOf}))
  `);
  const total = grouped.rows.find((r) => r.kind === 'total');
  const streamsOf = (prefix: Prefix) =>
    Object.fromEntries(
      REPUTATION_STREAMS.map((s) => {
        const row = grouped.rows.find((r) => r.kind === 'stream' && r.stream === s);
        return [s, row ? pick(row, prefix) : ZERO];
      }),
    ) as Record<ReputationStream, ReputationCounts>;
  const domainsOf = (prefix: Prefix) =>
    grouped.rows
      .filter((r) => r.kind === 'domain')
      .map((r) => ({ domain: r.domain!, ...pick(r, prefix) }))
      .filter(active)
      .sort((a, b) => b.sent - a.sent || a.domain.localeCompare(b.domain));

  const campaignsOf = async (from: Date) => {
    const r = await db.execute<Sums & { campaign_id: string; name: string | null }>(sql`
      select r.campaign_id, c.name, ${sums('r', 'w')}
      from (select r.* from ${counts}) r left join campaigns c on c.id = r.campaign_id and c.project_id = r.project_id
      where r.hour >= ${from.toISOString()}::timestamptz and ${isCampaignKey(sql`r.campaign_id`)} ${only}
      group by r.campaign_id, c.name
      order by w_sent desc, r.campaign_id
      limit ${campaignLimit + 1}
    `);
    const list = r.rows.map((x) => ({ campaignId: x.campaign_id, name: x.name, ...pick(x, 'w') }));
    return { campaigns: list.slice(0, campaignLimit), campaignsTruncated: list.length > campaignLimit };
  };

  return {
    hour,
    windows: {
      last24h: {
        since: starts.last24h,
        overall: total ? pick(total, 'd') : ZERO,
        streams: streamsOf('d'),
        domains: domainsOf('d'),
        ...(await campaignsOf(starts.last24h)),
      },
      last7d: {
        since: starts.last7d,
        overall: total ? pick(total, 'w') : ZERO,
        streams: streamsOf('w'),
        domains: domainsOf('w'),
        ...(await campaignsOf(starts.last7d)),
      },
    },
  };
}

/** How many domains and campaigns of each project `/metrics` carries (see {@link reputationForMetrics}). */
export interface ReputationMetricsLimits {
  /** Sending domains per project, most sent in the last 7 days first. */
  domainsPerProject: number;
  /** Campaigns per project with activity in the last 24 hours, most sent in them first. */
  campaignsPerProject: number;
}

/** One series' figures over both windows. */
type Windows = Record<ReputationWindow, ReputationCounts>;

/** What `/metrics` carries: `GET /reputation`'s figures for every project, bounded per project. */
export interface ReputationMetrics {
  /** Per project with activity in the last 7 days. */
  projects: { projectId: string; windows: Windows }[];
  /** Per project and sending domain with activity in the last 7 days: at most `domainsPerProject` per project. */
  domains: { projectId: string; domain: string; windows: Windows }[];
  /**
   * Per campaign with activity (a send or an outcome) in the last 24 hours: at most `campaignsPerProject` per
   * project. Its figures are of both windows, like the rest.
   */
  campaigns: { projectId: string; campaignId: string; windows: Windows }[];
}

/**
 * Every project's outcome counts over both windows, overall, per sending domain and per campaign, for `/metrics`:
 * one grouped read (grouping sets) through `reputation_counts_hour_idx`. The domains and campaigns are bounded per
 * project ({@link ReputationMetricsLimits}) so the number of series stays bounded whatever the tenants do (a sender
 * may use any subdomain of a verified domain; a project may run campaigns without end).
 */
export async function reputationForMetrics(db: DbOrTx, limits: ReputationMetricsLimits): Promise<ReputationMetrics> {
  const start = (buckets: number) => sql`(${CURRENT_HOUR} - make_interval(hours => ${buckets - 1}::int))`;
  const day = sql`r.hour >= ${start(REPUTATION_WINDOWS.last24h)}`;
  const rows = await db.execute<
    Sums & {
      project_id: string;
      domain: string | null;
      campaign_id: string | null;
      kind: 'project' | 'domain' | 'campaign';
    }
  >(sql`
    with g as (
      select r.project_id, r.domain, r.campaign_id,
        case when grouping(r.domain) = 0 then 'domain' when grouping(r.campaign_id) = 0 then 'campaign' else 'project' end as kind,
        ${sums('r', 'd', day)}, ${sums('r', 'w')}
      from reputation_counts r
      where r.hour >= ${start(REPUTATION_WINDOWS.last7d)}
      group by grouping sets ((r.project_id), (r.project_id, r.domain), (r.project_id, r.campaign_id))
    ), listed as (
      select g.*, case
          when kind = 'domain' then true
          when kind = 'campaign' then ${isCampaignKey(sql`campaign_id`)} and "d_sent" + "d_delivered" + "d_hardBounces" + "d_softBounces" + "d_complaints" > 0
          else true end as eligible
      from g
    ), ranked as (
      select listed.*, row_number() over (
          partition by project_id, kind, eligible
          order by case when kind = 'campaign' then "d_sent" else "w_sent" end desc, domain, campaign_id) as rank
      from listed
    )
    select * from ranked
    where kind = 'project'
      or (kind = 'domain' and rank <= ${limits.domainsPerProject})
      or (kind = 'campaign' and eligible and rank <= ${limits.campaignsPerProject})
  `);
  const out: ReputationMetrics = { projects: [], domains: [], campaigns: [] };
  for (const r of rows.rows) {
    const windows = { last24h: pick(r, 'd'), last7d: pick(r, 'w') };
    if (r.kind === 'project') out.projects.push({ projectId: r.project_id, windows });
    else if (r.kind === 'domain') out.domains.push({ projectId: r.project_id, domain: r.domain!, windows });
    else out.campaigns.push({ projectId: r.project_id, campaignId: r.campaign_id!, windows });
  }
  return out;
}
