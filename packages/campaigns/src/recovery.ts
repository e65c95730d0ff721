/**
 * Carrying on after a stop (docs/guides/campaigns.md): resuming a PAUSED campaign, and retrying once the emails of a
 * SENT campaign that failed for a transient reason. Both refuse a test key on a live campaign (they would send real
 * mail).
 *
 * @module
 */
import type { Logger } from '@mailroom/platform/logger';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { relayWebhookDeliveries, promoteDelayedJobs, scheduleCampaignJob } from '@mailroom/queues/enqueue';
import { campaignEmailsInQueue, resumeCampaign } from './queries/campaign-pause';
import { getCampaign, type CampaignRow } from './queries/campaigns';
import { retryFailedCampaign } from './queries/campaign-retry';
import type { CampaignActionDeps } from './lifecycle';
import { refused, refuseTestKeyOnLive } from './rules';

/** Who asks: a live or a test key. */
export interface Caller {
  mode: 'live' | 'test';
}

/**
 * PAUSED → SENDING (`campaign.resumed`): the campaign continues exactly where it stopped; its job is woken to feed
 * the rest of the audience and its emails already in the send queue wake at once. A Redis failure is logged: the
 * reconciler gives a SENDING campaign its job, and waiting emails recheck on their own.
 *
 * @throws {@link AppError} 404; 403 for a test key on a live campaign; 409 `INVALID_STATE` unless PAUSED.
 */
export async function resumeNow(
  deps: CampaignActionDeps,
  log: Logger,
  caller: Caller,
  projectId: string,
  id: string,
): Promise<CampaignRow> {
  const { db } = deps.database;
  const before = await getCampaign(db, projectId, id);
  if (!before) throw notFound('Campaign');
  refuseTestKeyOnLive(caller, before, 'resume');
  const { campaign, deliveries } = await db.transaction((tx) => resumeCampaign(tx, projectId, id, { by: 'api' }));
  if (!campaign) {
    const c = await getCampaign(db, projectId, id);
    throw refused(c ? { ok: false, reason: 'state', status: c.status } : { ok: false, reason: 'missing' }, 'resume');
  }
  await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
  try {
    // The job feeds the rest of the audience; the emails already in the queue wake at once.
    await scheduleCampaignJob(deps.queues.campaign, campaign, new Date());
    await promoteDelayedJobs(
      deps.queues.send,
      await campaignEmailsInQueue(db, campaign.id, deps.config.campaignQueueWindow),
    );
  } catch (err) {
    // Committed: the reconciler gives a SENDING campaign its job, and waiting emails recheck on their own.
    log.warn(
      { err, campaignId: campaign.id },
      'resumed campaign not woken; it continues within CAMPAIGN_PAUSE_RECHECK_MS',
    );
  }
  return campaign;
}

/** What a retry of failed emails did. */
export interface RetriedFailed {
  campaign: CampaignRow;
  /** Transiently failed emails put back in the queue (the campaign is SENDING again when there are any). */
  retried: number;
  /** Transiently failed emails left failed: contact deleted or unsubscribed, or address suppressed. */
  skipped: number;
}

/**
 * Retries, once, the transiently failed emails of a SENT campaign (`retryFailedCampaign`): announces
 * `campaign.sending` and gives the campaign its job when some were re-queued.
 *
 * @throws {@link AppError} 404; 403 for a test key on a live campaign; 409 `INVALID_STATE` when the retry was used
 *   or the campaign is not SENT.
 */
export async function retryFailedNow(
  deps: CampaignActionDeps,
  log: Logger,
  caller: Caller,
  projectId: string,
  id: string,
): Promise<RetriedFailed> {
  const { db } = deps.database;
  const c = await getCampaign(db, projectId, id);
  if (!c) throw notFound('Campaign');
  refuseTestKeyOnLive(caller, c, 'retry the failed emails of');
  const r = await retryFailedCampaign(db, projectId, id);
  if (!r.ok) {
    if (r.reason === 'missing') throw notFound('Campaign');
    if (r.reason === 'already') {
      throw new AppError(
        ErrorCode.INVALID_STATE,
        `The failed emails of this campaign were already retried (at ${r.at.toISOString()}); retry-failed runs once per campaign`,
        {
          suggestion: "See the campaign's timeline (GET /campaigns/{id}/timeline) for what the retry re-queued.",
        },
      );
    }
    throw new AppError(
      ErrorCode.INVALID_STATE,
      `Cannot retry the failed emails of a campaign that is ${r.status}; only a SENT campaign's can be retried`,
      {
        suggestion:
          'Wait until the campaign is SENT (every recipient final); DRAFT, SCHEDULED, SENDING, PAUSED, CANCELLED and FAILED campaigns are refused.',
      },
    );
  }
  await relayWebhookDeliveries(deps.queues.webhook, deps.config, r.deliveries, log);
  if (r.retried > 0) {
    try {
      await scheduleCampaignJob(deps.queues.campaign, r.campaign, new Date());
    } catch (err) {
      // Committed: the reconciler gives a SENDING campaign its job once Redis answers.
      log.warn({ err, campaignId: r.campaign.id }, 'campaign job not scheduled for the retry; the reconciler will');
    }
  }
  log.info({ campaignId: r.campaign.id, retried: r.retried, skipped: r.skipped }, 'campaign failed emails retried');
  return { campaign: r.campaign, retried: r.retried, skipped: r.skipped };
}
