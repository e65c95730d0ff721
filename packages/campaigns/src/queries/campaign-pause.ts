/**
 * Pausing and resuming a campaign (the guardrails: docs/architecture.md#guardrails). PAUSED is entered only from
 * SENDING, for a reason (`bounce_rate`, `complaint_rate`, `quota`) with the figures that made it pause; it is left by
 * resume (back to SENDING, where it continues exactly where it stopped) or by cancel. While PAUSED its queued emails
 * are not claimed by the worker (they stay queued, see `claimEmail`), and its job neither fans out nor feeds the queue.
 * Each move is one conditional UPDATE, writes the campaign's timeline entry and its webhook deliveries
 * (`campaign.paused`, `campaign.resumed`) in the caller's transaction.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import type { CampaignPauseReason } from '@mailroom/db/schema';
import { loadCampaign, NIL_UUID, type CampaignRow } from './campaigns';
import { campaignOutcomesJson } from '@mailroom/db/queries/reputation-counts';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';

/** A campaign's timeline entry (`GET /campaigns/{id}/timeline`). */
export interface CampaignEvent {
  id: string;
  type: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/** Outcome of a pause or resume: whether it moved, the webhook deliveries to announce. */
export interface PauseMove {
  moved: boolean;
  deliveries: WebhookDeliveryRef[];
}

/**
 * SENDING → PAUSED, with its reason and figures (e.g. `{ hardBounceRate, complaintRate, outcomes, threshold }`).
 * Call inside a transaction: the move, its timeline entry and its `campaign.paused` webhook deliveries commit
 * together. @returns `moved: false` when the campaign was not SENDING (already paused, cancelled, sent).
 */
export async function pauseCampaign(
  tx: DbOrTx,
  campaignId: string,
  reason: CampaignPauseReason,
  details: Record<string, unknown>,
): Promise<PauseMove> {
  const rows = await tx.execute<{ project_id: string; test: boolean }>(sql`
    with moved as (
      update campaigns set status = 'PAUSED', paused_reason = ${reason}, paused_at = now(),
        pause_details = ${JSON.stringify(details)}::jsonb, updated_at = now()
      where id = ${campaignId}::uuid and status = 'SENDING'
      returning id, project_id, test
    ), timeline as (
      insert into campaign_events (id, campaign_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), id, project_id, 'paused', ${JSON.stringify({ reason, ...details })}::jsonb from moved
    )
    select project_id, test from moved
  `);
  const projectId = rows.rows[0]?.project_id;
  if (!projectId) return { moved: false, deliveries: [] };
  const test = rows.rows[0].test ? { test: true } : {};
  const deliveries = await recordWebhookEvents(tx, projectId, [
    { type: 'campaign.paused', data: { campaignId, reason, ...details, ...test } },
  ]);
  return { moved: true, deliveries };
}

/**
 * PAUSED → SENDING (`POST /campaigns/{id}/resume`, or the quota watcher with `onlyReason: 'quota'`). The fan-out
 * and feeding cursors are untouched, so the campaign continues exactly where it stopped. Leaving a guardrail
 * pause (`bounce_rate`, `complaint_rate`), the `resumed` timeline entry keeps the campaign's outcome totals as
 * `baseline`: the guardrail then judges only the outcomes after it. Call inside a
 * transaction. @returns the resumed campaign, or undefined when it was not PAUSED (for that reason) in the project.
 */
export async function resumeCampaign(
  tx: DbOrTx,
  projectId: string,
  campaignId: string,
  opts: { onlyReason?: CampaignPauseReason; by: 'api' | 'quota' },
): Promise<{ campaign?: CampaignRow; deliveries: WebhookDeliveryRef[] }> {
  const rows = await tx.execute<{ id: string; reason: string; paused_ms: number }>(sql`
    with prior as (
      select id, paused_reason, paused_at from campaigns
      where id = ${campaignId}::uuid and project_id = ${projectId}::uuid and status = 'PAUSED'
        and (${opts.onlyReason ?? null}::text is null or paused_reason = ${opts.onlyReason ?? null}::text)
      for update
    ), moved as (
      update campaigns c set status = 'SENDING', paused_reason = null, paused_at = null, pause_details = null, updated_at = now()
      from prior where c.id = prior.id
      returning c.id, prior.paused_reason as reason, (extract(epoch from now() - prior.paused_at) * 1000)::bigint as paused_ms
    ), timeline as (
      insert into campaign_events (id, campaign_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), id, ${projectId}::uuid, 'resumed',
        jsonb_build_object('previousReason', reason, 'pausedMs', paused_ms, 'by', ${opts.by}::text)
        -- The guardrail re-arms on the outcomes after this point (see enforceCampaignGuardrail).
        || case when reason in ('bounce_rate', 'complaint_rate') then jsonb_build_object('baseline', ${campaignOutcomesJson(sql`moved.id`)}) else '{}'::jsonb end
      from moved
    )
    select id, reason, paused_ms::float8 as paused_ms from moved
  `);
  const row = rows.rows[0];
  if (!row) return { deliveries: [] };
  const campaign = await loadCampaign(tx, campaignId);
  const deliveries = await recordWebhookEvents(tx, projectId, [
    {
      type: 'campaign.resumed',
      data: {
        campaignId,
        previousReason: row.reason,
        pausedMs: row.paused_ms,
        ...(campaign?.test ? { test: true } : {}),
      },
    },
  ]);
  return { campaign, deliveries };
}

/**
 * The ids of a campaign's emails that are in the send queue (handed over, still queued): at most the campaign's
 * queue window. Their jobs wait delayed while the campaign is PAUSED; a resume wakes them.
 */
export async function campaignEmailsInQueue(db: DbOrTx, campaignId: string, limit: number): Promise<string[]> {
  const rows = await db.execute<{ id: string }>(sql`
    select e.id from emails e join campaigns k on k.id = e.campaign_id
    where e.campaign_id = ${campaignId}::uuid and e.status = 'queued' and e.contact_id <= coalesce(k.enqueue_cursor, ${NIL_UUID}::uuid)
    order by e.contact_id
    limit ${limit}
  `);
  return rows.rows.map((r) => r.id);
}

/** Campaigns PAUSED for `reason`, oldest pause first (the quota watcher's list). */
export async function pausedCampaigns(
  db: DbOrTx,
  reason: CampaignPauseReason,
  limit: number,
): Promise<{ id: string; projectId: string }[]> {
  const rows = await db.execute<{ id: string; project_id: string }>(sql`
    select id, project_id from campaigns where status = 'PAUSED' and paused_reason = ${reason} order by paused_at, id limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id }));
}

/** A campaign's timeline, oldest first (keyset after `afterId`). */
export async function campaignTimeline(
  db: DbOrTx,
  projectId: string,
  campaignId: string,
  limit: number,
  afterId?: string,
): Promise<CampaignEvent[]> {
  const rows = await db.execute<{
    id: string;
    type: string;
    data: Record<string, unknown>;
    created_at: Date | string;
  }>(sql`
    select id, type, data, created_at from campaign_events
    where project_id = ${projectId}::uuid and campaign_id = ${campaignId}::uuid and id > ${afterId ?? NIL_UUID}::uuid
    order by id limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, type: r.type, data: r.data, createdAt: new Date(r.created_at) }));
}

/**
 * PAUSED campaigns of every project, counted by reason (`bounce_rate`, `complaint_rate`, `quota`), for the worker's
 * `mailroom_campaigns_paused` gauge: one index-only read of `campaigns_paused_idx`. Not scoped by project on purpose
 * (an operator's figure across the deployment, carrying no project data).
 */
export async function pausedCampaignCounts(db: DbOrTx): Promise<{ reason: string; count: number }[]> {
  const rows = await db.execute<{ reason: string | null; count: number }>(sql`
    select paused_reason as reason, count(*)::int as count from campaigns where status = 'PAUSED' group by paused_reason
  `);
  return rows.rows.map((r) => ({ reason: r.reason ?? 'unknown', count: r.count }));
}
