/**
 * A campaign's A/B test (docs/guides/campaigns.md, A/B tests): `GET /campaigns/{id}/variants` (per-variant figures
 * and the decision) and `POST /campaigns/{id}/winner` (pick the winner now, by the metric or by hand). The test is
 * set with the campaign's `variants` and `abTest` (`campaigns.ts`).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { requireCampaign } from '@mailroom/campaigns/lifecycle';
import { pickWinnerNow } from '@mailroom/campaigns/ab-actions';
import { variantStats } from '@mailroom/campaigns/ab-decide';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import { Campaign, presentCampaign } from './campaign-schemas';
import { presentVariants, VariantsReport } from './campaign-ab-schemas';
import { IdParams } from './common';

const WinnerBody = Type.Object(
  {
    variant: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 4,
        description: 'the variant (0-based) to send to the rest; left out, the highest metric rate so far',
      }),
    ),
  },
  { additionalProperties: false },
);

/** The A/B test routes. */
export function campaignAbRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const reads = readDb(deps);
  return [
    route({
      method: 'get',
      path: '/campaigns/:id/variants',
      operationId: 'getCampaignVariants',
      tag: 'Campaigns',
      summary: "An A/B-tested campaign's figures per variant, and the winner",
      description:
        "Per variant: recipients, sent, delivered, opens, clicks and the metric's count and rate so far. `decision` " +
        "holds the figures the winner was chosen on (the test group's), the p-value of the two-proportion z-test " +
        'between the top two and a note when the difference is within noise (p ≥ 0.05). 409 for a campaign without an A/B test.',
      auth: 'secret',
      params: IdParams,
      response: VariantsReport,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth }) => {
        const c = await requireCampaign(db, auth.projectId, params.id);
        if (!c.abTest)
          throw new AppError(ErrorCode.INVALID_STATE, 'This campaign has no A/B test', {
            suggestion: 'See GET /campaigns/{id}/stats for its figures.',
          });
        return { data: presentVariants(c, await variantStats(reads, c)) };
      },
    }),
    route({
      method: 'post',
      path: '/campaigns/:id/winner',
      operationId: 'pickCampaignWinner',
      tag: 'Campaigns',
      summary: "Pick an A/B test's winner now",
      description:
        'While the campaign is SENDING or PAUSED in its test (abTest.phase TESTING or WAITING): records `variant` as ' +
        'the winner, or without it the highest metric rate so far (ties to the first), with the figures in ' +
        '`abTest.decision`. The rest of the audience then gets the winner, once the test group is fanned out. ' +
        '409 for a campaign without a test, in another state, or whose winner is already chosen.',
      auth: 'secret',
      params: IdParams,
      body: WinnerBody,
      response: Campaign,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth, log }) => ({
        data: presentCampaign(await pickWinnerNow(deps, log, auth, auth.projectId, params.id, body.variant)),
      }),
    }),
  ];
}
