/**
 * Maintenance of `reputation_counts`: live sending outcomes per project, UTC hour, sending domain and campaign.
 * Counted inside the statement that records the outcome (the `sent` write, the SES event), so a count exists if
 * and only if its outcome committed. Test emails are never counted.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { MARKETING_NO_CAMPAIGN, NO_CAMPAIGN } from '../schema';

/**
 * An `insert … on conflict do update` adding outcome counts, usable as a CTE body.
 *
 * @param rows - a `select` of `project_id, from_email, campaign_id, marketing, sent, delivered, hard, soft,
 *   complaints` (counts as integers; `campaign_id` null outside campaigns; `marketing` the email's stream, which
 *   keys mail outside campaigns under {@link NO_CAMPAIGN} or {@link MARKETING_NO_CAMPAIGN}). Rows are summed per key first, so one statement
 *   may count several outcomes of one key, and the keys are written in order (no deadlock between two statements
 *   that count several). The hour is the current UTC hour.
 */
export function countReputation(rows: SQL): SQL {
  return sql`
    insert into reputation_counts as r (project_id, hour, domain, campaign_id, sent, delivered, hard_bounces, soft_bounces, complaints)
    select project_id, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC',
      lower(split_part(from_email, '@', 2)),
      coalesce(campaign_id, case when marketing then ${MARKETING_NO_CAMPAIGN}::uuid else ${NO_CAMPAIGN}::uuid end),
      sum(sent), sum(delivered), sum(hard), sum(soft), sum(complaints)
    from (${rows}) as outcome
    group by 1, 2, 3, 4
    -- Counter rows are locked in key order, so two statements counting several keys cannot deadlock.
    order by 1, 2, 3, 4
    on conflict (project_id, hour, domain, campaign_id) do update set
      sent = r.sent + excluded.sent,
      delivered = r.delivered + excluded.delivered,
      hard_bounces = r.hard_bounces + excluded.hard_bounces,
      soft_bounces = r.soft_bounces + excluded.soft_bounces,
      complaints = r.complaints + excluded.complaints`;
}

/**
 * A campaign's outcome totals over all its hours and sending domains, as a scalar subquery giving one jsonb
 * `{ delivered, hardBounces, softBounces, complaints }` (numbers; zeros when nothing was counted). Reads through
 * `reputation_counts_campaign_idx`.
 *
 * @param campaignId - an SQL expression of the campaign id (a parameter or an outer column).
 */
export function campaignOutcomesJson(campaignId: SQL): SQL {
  return sql`(select jsonb_build_object('delivered', coalesce(sum(delivered), 0), 'hardBounces', coalesce(sum(hard_bounces), 0),
      'softBounces', coalesce(sum(soft_bounces), 0), 'complaints', coalesce(sum(complaints), 0))
    from reputation_counts where campaign_id = ${campaignId} and ${isCampaignKey(sql`campaign_id`)})`;
}

/** Whether a `reputation_counts.campaign_id` expression names a campaign (not one of the two keys outside campaigns). */
export function isCampaignKey(column: SQL): SQL {
  return sql`${column} not in (${NO_CAMPAIGN}::uuid, ${MARKETING_NO_CAMPAIGN}::uuid)`;
}

/** The SQL condition that a `reputation_counts.campaign_id` expression counts mail of `stream`. */
export function streamKeySql(column: SQL, stream: 'transactional' | 'marketing'): SQL {
  return stream === 'transactional' ? sql`${column} = ${NO_CAMPAIGN}::uuid` : sql`${column} <> ${NO_CAMPAIGN}::uuid`;
}

/**
 * {@link countReputation} per email tag, into `reputation_tag_counts`: each row's outcomes counted once under each
 * of its tags. Usable as a CTE body; rows without tags count nothing.
 *
 * @param rows - a `select` of `project_id, from_email, campaign_id, marketing, tags, sent, delivered, hard, soft,
 *   complaints` (`marketing` keys mail outside campaigns as {@link countReputation} does; `tags` the email's jsonb `[{ name, value }]`, or null). Summed per key and written in key order, as
 *   {@link countReputation}.
 */
export function countTagReputation(rows: SQL): SQL {
  return sql`
    insert into reputation_tag_counts as r (project_id, tag_name, tag_value, hour, domain, campaign_id, sent, delivered, hard_bounces, soft_bounces, complaints)
    select project_id, t.name, t.value, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC',
      lower(split_part(from_email, '@', 2)),
      coalesce(campaign_id, case when marketing then ${MARKETING_NO_CAMPAIGN}::uuid else ${NO_CAMPAIGN}::uuid end),
      sum(sent), sum(delivered), sum(hard), sum(soft), sum(complaints)
    from (${rows}) as outcome
      cross join lateral jsonb_to_recordset(coalesce(outcome.tags, '[]'::jsonb)) as t(name text, value text)
    group by 1, 2, 3, 4, 5, 6
    order by 1, 2, 3, 4, 5, 6
    on conflict (project_id, tag_name, tag_value, hour, domain, campaign_id) do update set
      sent = r.sent + excluded.sent,
      delivered = r.delivered + excluded.delivered,
      hard_bounces = r.hard_bounces + excluded.hard_bounces,
      soft_bounces = r.soft_bounces + excluded.soft_bounces,
      complaints = r.complaints + excluded.complaints`;
}
