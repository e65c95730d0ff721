/**
 * `POST /campaigns/{id}/retry-failed` (issue 18): send a SENT campaign once more to the recipients whose email
 * failed for a transient reason, never to bounced, complained, suppressed, unsubscribed or permanently failed
 * ones. Once per campaign.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { announceWebhookDeliveries, scheduleCampaignJob } from '@mailroom/queues/enqueue';
import { getCampaign } from '@mailroom/db/queries/campaigns';
import { retryFailedCampaign } from '@mailroom/db/queries/campaign-retry';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { Campaign, presentCampaign, refuseTestKeyOnLive } from './campaign-shapes';
import { IdParams } from './common';

const RetryFailedResponse = Type.Intersect([
  Campaign,
  Type.Object({
    retried: Type.Integer({ description: 'transiently failed emails put back in the queue' }),
    skipped: Type.Integer({
      description: 'transiently failed emails left failed because their contact was deleted or unsubscribed, or the address is suppressed',
    }),
  }),
]);

/** The retry-failed route. */
export function campaignRetryRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/campaigns/:id/retry-failed',
      operationId: 'retryFailedCampaignEmails',
      tag: 'Campaigns',
      summary: "Retry a sent campaign's transiently failed emails, once",
      description:
        'Only for a SENT campaign, and once per campaign. Emails that ended `failed` for a transient reason (SES ' +
        'answered 5xx, or another retryable error, until their attempts ran out) go back to the queue, unless ' +
        'their contact was deleted or unsubscribed or the address is suppressed since. Bounced, complained, ' +
        'suppressed, cancelled and permanently failed emails (SES refused the message) are never retried. ' +
        'With emails to retry (202) the campaign is SENDING again, announces `campaign.sending` ' +
        '(`data.retryFailed: true`, `retried`), sends them at the campaign lane and becomes SENT again ' +
        '(`campaign.sent`) when they are final; each retried email announces `email.sent` or `email.failed` as ' +
        'usual and its timeline shows `retried`. With none (200) the campaign stays SENT. Either way the ' +
        "campaign's timeline gets `retry_failed` with the counts, and a second call is 409.",
      auth: 'secret',
      params: IdParams,
      response: RetryFailedResponse,
      status: 202,
      otherStatuses: { 200: 'nothing to retry: the campaign stays SENT (the retry is used all the same)' },
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        const c = await getCampaign(db, auth.projectId, params.id);
        if (!c) throw notFound('Campaign');
        refuseTestKeyOnLive(auth, c, 'retry the failed emails of');
        const r = await retryFailedCampaign(db, auth.projectId, params.id);
        if (!r.ok) {
          if (r.reason === 'missing') throw notFound('Campaign');
          if (r.reason === 'already') {
            throw new AppError(ErrorCode.INVALID_STATE, `The failed emails of this campaign were already retried (at ${r.at.toISOString()}); retry-failed runs once per campaign`, {
              suggestion: "See the campaign's timeline (GET /campaigns/{id}/timeline) for what the retry re-queued.",
            });
          }
          throw new AppError(ErrorCode.INVALID_STATE, `Cannot retry the failed emails of a campaign that is ${r.status}; only a SENT campaign's can be retried`, {
            suggestion: 'Wait until the campaign is SENT (every recipient final); DRAFT, SCHEDULED, SENDING, PAUSED, CANCELLED and FAILED campaigns are refused.',
          });
        }
        await announceWebhookDeliveries(deps.queues.webhook, deps.config, r.deliveries, log);
        if (r.retried > 0) {
          try {
            await scheduleCampaignJob(deps.queues.campaign, r.campaign, new Date());
          } catch (err) {
            // Committed: the reconciler gives a SENDING campaign its job once Redis answers.
            log.warn({ err, campaignId: r.campaign.id }, 'campaign job not scheduled for the retry; the reconciler will');
          }
        }
        log.info({ campaignId: r.campaign.id, retried: r.retried, skipped: r.skipped }, 'campaign failed emails retried');
        return { status: r.retried > 0 ? 202 : 200, data: { ...presentCampaign(r.campaign), retried: r.retried, skipped: r.skipped } };
      },
    }),
  ];
}
