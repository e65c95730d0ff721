/**
 * Retrying a SENT campaign's transiently failed emails (`POST /campaigns/{id}/retry-failed`, docs/guides/campaigns.md),
 * once per campaign.
 *
 * An email ends `failed` with `failure_kind = 'transient'` when its attempts ran out on a retryable error (SES
 * 5xx, an internal error), and `'permanent'` when SES refused the message itself. Only the transient ones are
 * worth another try, and only to recipients who may still be mailed: the contact still exists, is subscribed,
 * and neither its address nor the address the email went to is suppressed. Bounced, complained, suppressed,
 * cancelled and permanently failed emails are never touched (their status or kind leaves them out).
 *
 * The retry is set-based (one UPDATE, never the audience in memory): the rows go back to `queued`, the campaign
 * back to SENDING with its `enqueue_cursor` cleared, so the campaign job's bounded window feeds them again in
 * contact order; the worker frees the finished send jobs that still hold their ids ({@link retriedEmailIds}).
 * The campaign becomes SENT again when they are final (`completeCampaign`).
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import type { CampaignStatus } from '@mailroom/db/schema';
import { loadCampaign, type CampaignRow } from './campaigns';
import { contactSuppressedSql, onSuppressionListSql, recipientKeySql } from '@mailroom/db/queries/suppression-rule';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';

/** Outcome of {@link retryFailedCampaign}. */
export type RetryFailedResult =
  | {
      ok: true;
      campaign: CampaignRow;
      /** Emails put back in the queue. */
      retried: number;
      /** Transiently failed emails left failed: contact deleted or unsubscribed, or address suppressed. */
      skipped: number;
      /** `campaign.sending` deliveries (only when something was retried), to announce after commit. */
      deliveries: WebhookDeliveryRef[];
    }
  | { ok: false; reason: 'missing' }
  | { ok: false; reason: 'state'; status: CampaignStatus }
  | { ok: false; reason: 'already'; at: Date; status: CampaignStatus };

/**
 * Re-queues, in one transaction, the transiently failed emails of a SENT campaign whose recipients may still be
 * mailed, and moves the campaign back to SENDING (its feeding cursor cleared, `completed_at` cleared). With
 * nothing to retry the campaign stays SENT. Either way `retry_failed_at` is set (the retry is used) and the
 * campaign's timeline gets `retry_failed` `{ retried, skipped, previousCompletedAt }`; each re-queued email's
 * timeline gets `retried` `{ previousError }`. The campaign row is locked first, so two calls (or a call and a
 * cancel) serialise: the second sees `retry_failed_at` and is refused.
 *
 * A re-queued row keeps its `attempts` (claims so far, shown by `GET /emails/{id}`); its new send job has a
 * fresh `SEND_MAX_ATTEMPTS` budget.
 *
 * @returns the outcome; `missing` for an unknown id or another project's campaign, `already` when the retry was
 *   used, `state` when the campaign is not SENT.
 */
export async function retryFailedCampaign(
  db: DbOrTx,
  projectId: string,
  campaignId: string,
): Promise<RetryFailedResult> {
  return db.transaction(async (tx) => {
    const locked = await tx.execute<{
      status: CampaignStatus;
      retry_failed_at: Date | string | null;
      completed_at: Date | string | null;
      test: boolean;
    }>(sql`
      select status, retry_failed_at, completed_at, test from campaigns
      where id = ${campaignId}::uuid and project_id = ${projectId}::uuid
      for update
    `);
    const c = locked.rows[0];
    if (!c) return { ok: false, reason: 'missing' };
    if (c.retry_failed_at !== null)
      return { ok: false, reason: 'already', at: new Date(c.retry_failed_at), status: c.status };
    if (c.status !== 'SENT') return { ok: false, reason: 'state', status: c.status };

    const requeued = await tx.execute<{ retried: number; transient: number }>(sql`
      with eligible as (
        select e.id, e.error from emails e
        join contacts c on c.id = e.contact_id and c.project_id = e.project_id
        where e.campaign_id = ${campaignId}::uuid and e.status = 'failed' and e.failure_kind = 'transient' and e.retried_at is null
          and c.subscribed and not ${contactSuppressedSql('c')}
          and not ${onSuppressionListSql(sql`e.project_id`, recipientKeySql('e'))}
        for update of e
      ), retried as (
        update emails e set status = 'queued', retried_at = now(), error = null, failure_kind = null,
          claim_token = null, claimed_at = null, updated_at = now()
        from eligible x where e.id = x.id
        returning e.id, e.project_id, x.error
      ), timeline as (
        insert into email_events (id, email_id, project_id, type, data)
        select mailroom_uuid_v7(clock_timestamp()), id, project_id, 'retried', jsonb_build_object('previousError', error) from retried
      )
      select (select count(*) from retried)::int as retried,
        (select count(*) from emails where campaign_id = ${campaignId}::uuid and status = 'failed' and failure_kind = 'transient')::int as transient
    `);
    const { retried, transient } = requeued.rows[0];
    const skipped = Math.max(0, transient - retried);
    const previousCompletedAt = c.completed_at === null ? null : new Date(c.completed_at).toISOString();
    const again = retried > 0;
    await tx.execute(sql`
      with moved as (
        update campaigns set retry_failed_at = now(), updated_at = now(),
          status = case when ${again}::boolean then 'SENDING' else status end,
          completed_at = case when ${again}::boolean then null else completed_at end,
          -- The campaign job's window feeds the re-queued rows again from the start, in contact order.
          enqueue_cursor = case when ${again}::boolean then null else enqueue_cursor end
        where id = ${campaignId}::uuid
        returning id
      )
      insert into campaign_events (id, campaign_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), id, ${projectId}::uuid, 'retry_failed',
        ${JSON.stringify({ retried, skipped, previousCompletedAt })}::jsonb from moved
    `);
    const deliveries = again
      ? await recordWebhookEvents(tx, projectId, [
          {
            type: 'campaign.sending',
            data: { campaignId, retryFailed: true, retried, ...(c.test ? { test: true } : {}) },
          },
        ])
      : [];
    const campaign = await loadCampaign(tx, campaignId);
    return { ok: true, campaign: campaign!, retried, skipped, deliveries };
  });
}

/**
 * Which of `emailIds` (emails of campaign `campaignId` about to be handed to the send queue) were re-queued by
 * retry-failed: their send job of the first try may still sit in the queue, finished, under the same job id.
 * One indexed lookup; for a campaign never retried the statement stops at the campaign row.
 */
export async function retriedEmailIds(db: DbOrTx, campaignId: string, emailIds: readonly string[]): Promise<string[]> {
  if (emailIds.length === 0) return [];
  const rows = await db.execute<{ id: string }>(sql`
    select e.id from emails e
    where exists (select 1 from campaigns k where k.id = ${campaignId}::uuid and k.retry_failed_at is not null)
      and e.id = any(${sql.param([...emailIds])}::uuid[]) and e.retried_at is not null
  `);
  return rows.rows.map((r) => r.id);
}
