/**
 * A paused campaign (docs/architecture.md#guardrails): `POST /campaigns/{id}/resume` and the campaign's timeline
 * `GET /campaigns/{id}/timeline` (paused with the reason and figures, resumed, retry-failed).
 *
 * A campaign pauses itself (SENDING → PAUSED) when a guardrail trips (its hard-bounce or complaint rate after
 * the minimum sample) or the SES 24-hour quota is nearly spent; its queued emails stay queued. Resume continues
 * exactly where it stopped; cancel (campaigns.ts) ends it.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { encodeCursor } from '@mailroom/platform/ids';
import { campaignTimeline } from '@mailroom/campaigns/queries/campaign-pause';
import { requireCampaign } from '@mailroom/campaigns/lifecycle';
import { resumeNow } from '@mailroom/campaigns/recovery';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { Campaign, presentCampaign } from './campaign-schemas';
import { cursorId, IdParams, PageQuery, Timestamp } from './common';

const CampaignEvent = Type.Object({
  id: Type.String(),
  type: Type.String({ description: 'paused, resumed, retry_failed' }),
  data: Type.Record(Type.String(), Type.Unknown(), {
    description:
      'paused: reason and the figures (guardrails: hardBounceRate, complaintRate, outcomes, hardBounces, complaints, delivered, ' +
      'threshold, minSample, sinceResume); resumed: previousReason, pausedMs, by, and after a guardrail pause baseline (the outcome ' +
      'totals the guardrail counts from); retry_failed: retried, skipped, previousCompletedAt',
  }),
  createdAt: Timestamp,
});

/** The resume and timeline routes. */
export function campaignGuardrailRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/campaigns/:id/resume',
      operationId: 'resumeCampaign',
      tag: 'Campaigns',
      summary: 'Resume a paused campaign',
      description:
        'PAUSED → SENDING. The campaign continues exactly where it stopped: its queued emails are sent, the rest of ' +
        'the audience follows, nobody is mailed twice. A campaign paused by a guardrail is judged afresh on the ' +
        'outcomes after the resume (the resumed timeline entry keeps the totals at that point as `baseline`): it ' +
        'pauses again only if those cross a threshold after a new minimum sample. One paused for the quota pauses ' +
        'again while the quota is spent.',
      auth: 'secret',
      params: IdParams,
      response: Campaign,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        const campaign = await resumeNow(deps, log, auth, auth.projectId, params.id);
        return { data: presentCampaign(campaign) };
      },
    }),
    route({
      method: 'get',
      path: '/campaigns/:id/timeline',
      operationId: 'getCampaignTimeline',
      tag: 'Campaigns',
      summary: "A campaign's timeline: pauses (with the reason and figures), resumes, retries of failed emails",
      auth: 'secret',
      params: IdParams,
      query: Type.Object({ ...PageQuery }, { additionalProperties: false }),
      response: Type.Object({ data: Type.Array(CampaignEvent), nextCursor: Type.Union([Type.String(), Type.Null()]) }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        const c = await requireCampaign(db, auth.projectId, params.id);
        const limit = query.limit;
        const rows = await campaignTimeline(db, auth.projectId, c.id, limit + 1, cursorId(query.cursor));
        const page = rows.slice(0, limit);
        return {
          data: {
            data: page.map((e) => ({ ...e, createdAt: e.createdAt.toISOString() })),
            nextCursor: rows.length > limit ? encodeCursor(page[page.length - 1].id) : null,
          },
        };
      },
    }),
  ];
}
