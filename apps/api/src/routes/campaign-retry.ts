/**
 * `POST /campaigns/{id}/retry-failed` (docs/guides/campaigns.md): send a SENT campaign once more to the recipients
 * whose email failed for a transient reason, never to bounced, complained, suppressed, unsubscribed or permanently
 * failed ones. Once per campaign.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { retryFailedNow } from '@mailroom/campaigns/recovery';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { Campaign, presentCampaign } from './campaign-schemas';
import { IdParams } from './common';

const RetryFailedResponse = Type.Intersect([
  Campaign,
  Type.Object({
    retried: Type.Integer({ description: 'transiently failed emails put back in the queue' }),
    skipped: Type.Integer({
      description:
        'transiently failed emails left failed because their contact was deleted or unsubscribed, or the address is suppressed',
    }),
  }),
]);

/** The retry-failed route. */
export function campaignRetryRoutes(deps: AppDeps) {
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
        const r = await retryFailedNow(deps, log, auth, auth.projectId, params.id);
        return {
          status: r.retried > 0 ? 202 : 200,
          data: { ...presentCampaign(r.campaign), retried: r.retried, skipped: r.skipped },
        };
      },
    }),
  ];
}
