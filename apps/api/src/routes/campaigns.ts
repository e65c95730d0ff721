/**
 * Campaigns: `GET/POST /campaigns`, `GET/PATCH/DELETE /campaigns/{id}`, `POST /campaigns/{id}/send|cancel|test`,
 * `GET /campaigns/{id}/stats` (spec "Campaign"; docs/api/overview.md, campaign states).
 *
 * The states, their moves and the rules a campaign must pass are `@mailroom/campaigns` (rules.ts,
 * lifecycle.ts); the worker's `campaign` job does the fan-out. This module translates HTTP into those calls and
 * their results back.
 *
 * Plunk v2 compatibility (docs/api/overview.md), where the specification is silent: `PUT /campaigns/{id}` is the PATCH;
 * `audienceCondition` stands for `audienceFilter`, `scheduledFor` for `scheduledAt`, the test's `email` for `to`, and
 * Plunk's `type` (`MARKETING`; campaigns here are marketing mail) is accepted. Answers carry Plunk's names beside
 * ours (`audienceCondition`, `scheduledFor`, `totalRecipients`, `sentAt`; the list's `campaigns`, `page`,
 * `pageSize`, `totalPages`; the stats' counts and percentages).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { normalizeEmail } from '@mailroom/platform/address';
import { validationError } from '@mailroom/platform/errors';
import { listCampaigns, type NewCampaign } from '@mailroom/campaigns/queries/campaigns';
import {
  cancelNow,
  createDraft,
  deleteDraft,
  editCampaign,
  requireCampaign,
  sendableCampaign,
  sendOrSchedule,
  sendTestEmails,
  testableCampaign,
  type AbGiven,
} from '@mailroom/campaigns/lifecycle';
import type { AbTestInput, VariantsInput } from './campaign-ab-schemas';
import { campaignStats } from '@mailroom/campaigns/stats';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import {
  cursorId,
  Deleted,
  IdParams,
  keysetPage,
  PageFields,
  PlunkPageFields,
  plunkPageFields,
  resolvePaging,
} from './common';
import { contentColumns, refreshContent } from './campaign-template';
import {
  Campaign,
  presentCampaign,
  presentStats,
  fromPlunk,
  CreateCampaign,
  UpdateCampaign,
  ListQuery,
  SendBody,
  Recipients,
  TestBody,
  Stats,
  toColumns,
} from './campaign-schemas';

/** Routes of this module. */
export function campaignRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  /** The A/B fields of a create or update, when the body has any. */
  const abGiven = (
    variants: Static<typeof VariantsInput> | null | undefined,
    abTest: Static<typeof AbTestInput> | null | undefined,
  ): AbGiven | undefined =>
    variants === undefined && abTest === undefined
      ? undefined
      : {
          variants,
          abTest: abTest && { ...abTest, event: abTest.event?.trim() || null },
          minWaitSeconds: deps.config.campaignAbMinWaitSeconds,
        };
  return [
    route({
      method: 'get',
      path: '/campaigns',
      operationId: 'listCampaigns',
      tag: 'Campaigns',
      summary: 'List campaigns, newest first',
      description:
        "Keyset pages by `cursor`; Plunk's `page`/`pageSize` are read by offset within the first 10,000 rows.",
      auth: 'secret',
      query: ListQuery,
      response: Type.Object({
        items: Type.Array(Campaign),
        ...PageFields,
        campaigns: Type.Array(Campaign, { description: "same as items (Plunk's form)" }),
        ...PlunkPageFields,
      }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const paging = resolvePaging(query);
        const page = await listCampaigns(reads, auth.projectId, {
          limit: paging.limit,
          offset: paging.offset,
          status: query.status,
          search: query.search,
          beforeId: cursorId(query.cursor),
        });
        const body = keysetPage(page, presentCampaign, page.total);
        return { data: { ...body, campaigns: body.items, ...plunkPageFields(page.total, paging.page, paging.limit) } };
      },
    }),
    route({
      method: 'post',
      path: '/campaigns',
      operationId: 'createCampaign',
      tag: 'Campaigns',
      summary: 'Create a campaign (DRAFT)',
      description:
        '`segmentId` is required when audienceType is SEGMENT, `audienceFilter` (segment filter language) when it is ' +
        'FILTERED. `from` must be on a verified domain of the project. Campaigns reach subscribed contacts only, and ' +
        'carry an unsubscribe link (`{{unsubscribeUrl}}`) and List-Unsubscribe one-click headers (RFC 8058). ' +
        '`variants` (2–5) with `abTest` make it an A/B test: the test share gets the variants, the rest the winner ' +
        '(docs/guides/campaigns.md).',
      auth: 'secret',
      body: CreateCampaign,
      response: Campaign,
      status: 201,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        const { variants, abTest, ...ours } = fromPlunk(body);
        const content = await contentColumns(db, auth.projectId, ours);
        const input = { ...toColumns(ours), ...content, audienceType: ours.audienceType } as NewCampaign & {
          fromEmail: string;
        };
        return { data: presentCampaign(await createDraft(db, auth.projectId, input, abGiven(variants, abTest))) };
      },
    }),
    route({
      method: 'get',
      path: '/campaigns/:id',
      operationId: 'getCampaign',
      tag: 'Campaigns',
      summary: 'Get a campaign',
      auth: 'secret',
      params: IdParams,
      response: Campaign,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => ({
        data: presentCampaign(await requireCampaign(db, auth.projectId, params.id)),
      }),
    }),
    ...(['patch', 'put'] as const).map((method) =>
      route({
        method,
        path: '/campaigns/:id',
        operationId: method === 'patch' ? 'updateCampaign' : 'replaceCampaignPlunk',
        tag: 'Campaigns',
        summary:
          method === 'patch'
            ? 'Update a DRAFT or SCHEDULED campaign'
            : "Update a campaign (Plunk v2's method; same as PATCH)",
        description: 'Fields left out are kept. `audienceCondition` (Plunk) stands for `audienceFilter`.',
        auth: 'secret',
        params: IdParams,
        body: UpdateCampaign,
        response: Campaign,
        status: 200,
        errors: [400, 401, 403, 404, 409, 422, 429],
        handler: async ({ params, body: given, auth }) => {
          const { variants, abTest, ...body } = fromPlunk(given);
          const content = await contentColumns(
            db,
            auth.projectId,
            body,
            await requireCampaign(db, auth.projectId, params.id),
          );
          return {
            data: presentCampaign(
              await editCampaign(
                db,
                auth.projectId,
                params.id,
                { ...toColumns(body), ...content },
                abGiven(variants, abTest),
              ),
            ),
          };
        },
      }),
    ),
    route({
      method: 'delete',
      path: '/campaigns/:id',
      operationId: 'deleteCampaign',
      tag: 'Campaigns',
      summary: 'Delete a DRAFT campaign',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth }) => {
        await deleteDraft(db, auth.projectId, params.id);
        return { data: { id: params.id, deleted: true as const } };
      },
    }),
    route({
      method: 'post',
      path: '/campaigns/:id/send',
      operationId: 'sendCampaign',
      tag: 'Campaigns',
      summary: 'Send a campaign now, or schedule it',
      description:
        'From DRAFT or SCHEDULED: a future `scheduledAt` schedules (or reschedules) the campaign; otherwise it starts ' +
        'SENDING now. The audience and sender are checked again here (422). `scheduledFor` (Plunk) stands for `scheduledAt`. ' +
        'Sent with a test key (sk_test_…), the campaign is a test campaign (`test: true`): its emails go to the test sink, never to SES.',
      auth: 'secret',
      params: IdParams,
      body: SendBody,
      response: Campaign,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        await refreshContent(db, await sendableCampaign(db, auth.projectId, params.id));
        if (body.scheduledAt !== undefined && body.scheduledFor !== undefined) {
          throw validationError([
            {
              field: 'scheduledFor',
              message: 'give the time once: scheduledAt and scheduledFor are the same field',
              code: 'custom',
            },
          ]);
        }
        const when = body.scheduledAt ?? body.scheduledFor;
        const c = await sendOrSchedule(
          deps,
          log,
          auth.projectId,
          params.id,
          when ? new Date(when) : null,
          auth.mode === 'test',
        );
        return { data: presentCampaign(c) };
      },
    }),
    route({
      method: 'post',
      path: '/campaigns/:id/cancel',
      operationId: 'cancelCampaign',
      tag: 'Campaigns',
      summary: 'Cancel a campaign',
      description:
        'From DRAFT, SCHEDULED, SENDING or PAUSED. During SENDING or PAUSED, no further email reaches SES: emails in the send queue are ' +
        'cancelled here (`cancelledEmails`), and the worker cancels the rest of the audience right after.',
      auth: 'secret',
      params: IdParams,
      response: Type.Intersect([Campaign, Type.Object({ cancelledEmails: Type.Integer() })]),
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        const { campaign, cancelledEmails } = await cancelNow(deps, log, auth.projectId, params.id);
        return { data: { ...presentCampaign(campaign), cancelledEmails } };
      },
    }),
    route({
      method: 'post',
      path: '/campaigns/:id/test',
      operationId: 'testCampaign',
      tag: 'Campaigns',
      summary: 'Send a test of a campaign',
      description:
        'Sends the campaign as it would be sent, to the given addresses (rendered with their contact data when they ' +
        'are contacts), on the transactional lane. Does not change the campaign or its statistics. `email` (Plunk) ' +
        'stands for `to`.',
      auth: 'secret',
      params: IdParams,
      body: TestBody,
      response: Type.Object({ emails: Type.Array(Type.Object({ email: Type.String(), id: Type.String() })) }),
      status: 202,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        const c = await testableCampaign(db, auth.projectId, params.id);
        if (body.to !== undefined && body.email !== undefined)
          throw validationError([
            { field: 'email', message: 'give the addresses once: to and email are the same field', code: 'custom' },
          ]);
        const given = (body.to ?? body.email) as Static<typeof Recipients> | undefined;
        if (given === undefined) throw validationError([{ field: 'to', message: 'is required', code: 'invalid_type' }]);
        const to = [...new Set((Array.isArray(given) ? given : [given]).map(normalizeEmail))];
        return { data: { emails: await sendTestEmails(deps, log, c, to, auth.mode === 'test') } };
      },
    }),
    route({
      method: 'get',
      path: '/campaigns/:id/stats',
      operationId: 'getCampaignStats',
      tag: 'Campaigns',
      summary: 'Campaign statistics, progress and ETA',
      auth: 'secret',
      params: IdParams,
      response: Stats,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const c = await requireCampaign(db, auth.projectId, params.id);
        return { data: presentStats(c, await campaignStats(reads, c)) };
      },
    }),
  ];
}
