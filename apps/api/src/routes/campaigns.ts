/**
 * Campaigns: `GET/POST /campaigns`, `GET/PATCH/DELETE /campaigns/{id}`, `POST /campaigns/{id}/send|cancel|test`,
 * `GET /campaigns/{id}/stats` (spec "Campaign"; API.md "Campaign states").
 *
 * States: DRAFT → SCHEDULED → SENDING → SENT; PAUSED from SENDING (a guardrail or the SES quota) and back by
 * resume (campaign-guardrails.ts); CANCELLED from DRAFT, SCHEDULED, SENDING or PAUSED; FAILED when a
 * scheduled campaign cannot start (its segment was deleted). Every other move is 409 `INVALID_STATE`. SENT means
 * every recipient's email reached a final state. The worker's `campaign` job does the fan-out; this module only
 * moves state and (re)schedules that job.
 *
 * Plunk v2 compatibility (API.md), where the specification is silent: `PUT /campaigns/{id}` is the PATCH;
 * `audienceCondition` stands for `audienceFilter`, `scheduledFor` for `scheduledAt`, the test's `email` for `to`, and
 * Plunk's `type` (`MARKETING`; campaigns here are marketing mail) is accepted. Answers carry Plunk's names beside
 * ours (`audienceCondition`, `scheduledFor`, `totalRecipients`, `sentAt`; the list's `campaigns`, `page`,
 * `pageSize`, `totalPages`; the stats' counts and percentages).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { newId } from '@mailroom/platform/ids';
import { normalizeEmail } from '@mailroom/platform/address';
import { notFound, validationError } from '@mailroom/platform/errors';
import { scheduleCampaignJob, sendJobOptions, SendPriority } from '@mailroom/queues/queues';
import {
  campaignEmailCounts,
  cancelCampaign,
  createCampaign,
  deleteDraftCampaign,
  getCampaign,
  listCampaigns,
  sendCampaign,
  updateCampaign,
  type CampaignRow,
  type NewCampaign,
} from '@mailroom/db/queries/campaigns';
import { findContactByEmail } from '@mailroom/db/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/emails';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { senderError } from '@mailroom/mail/sender';
import { announcedChange } from '@mailroom/webhooks/announce';
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
import {
  Campaign,
  presentCampaign,
  fromPlunk,
  CreateCampaign,
  UpdateCampaign,
  ListQuery,
  SendBody,
  Recipients,
  TestBody,
  Stats,
  REACHED,
  refused,
  campaignErrors,
  toColumns,
} from './campaign-shapes';

/** The data of a `campaign.*` webhook: the campaign id, and `test: true` for a test campaign (as its emails' webhooks). */
const campaignEventData = (c: { id: string; test: boolean }) => ({ campaignId: c.id, ...(c.test ? { test: true } : {}) });

/** Routes of this module. */
export function campaignRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const schedule = async (c: CampaignRow, log: { warn: (o: object, m: string) => void }) => {
    try {
      await scheduleCampaignJob(deps.campaignQueue, c, c.status === 'SCHEDULED' && c.scheduledAt ? c.scheduledAt : new Date());
    } catch (err) {
      // The transition is committed; the reconciler gives a SENDING or due campaign its job once Redis is back.
      log.warn({ err, campaignId: c.id }, 'campaign job not scheduled; the reconciler will');
    }
  };
  return [
    route({
      method: 'get',
      path: '/campaigns',
      operationId: 'listCampaigns',
      tag: 'Campaigns',
      summary: 'List campaigns, newest first',
      description: 'Keyset pages by `cursor`; Plunk\'s `page`/`pageSize` are read by offset within the first 10,000 rows.',
      auth: 'secret',
      query: ListQuery,
      response: Type.Object({
        items: Type.Array(Campaign),
        ...PageFields,
        campaigns: Type.Array(Campaign, { description: 'same as items (Plunk\'s form)' }),
        ...PlunkPageFields,
      }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const paging = resolvePaging(query);
        const page = await listCampaigns(db, auth.projectId, {
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
        'carry an unsubscribe link (`{{unsubscribeUrl}}`) and List-Unsubscribe one-click headers (RFC 8058).',
      auth: 'secret',
      body: CreateCampaign,
      response: Campaign,
      status: 201,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        const ours = fromPlunk(body);
        const input = { ...toColumns(ours), audienceType: ours.audienceType } as NewCampaign & { fromEmail: string };
        const errors = await campaignErrors(db, auth.projectId, input);
        if (errors.length > 0) throw validationError(errors);
        return { data: presentCampaign(await createCampaign(db, auth.projectId, input)) };
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
      handler: async ({ params, auth }) => {
        const c = await getCampaign(db, auth.projectId, params.id);
        if (!c) throw notFound('Campaign');
        return { data: presentCampaign(c) };
      },
    }),
    ...(['patch', 'put'] as const).map((method) =>
      route({
        method,
        path: '/campaigns/:id',
        operationId: method === 'patch' ? 'updateCampaign' : 'replaceCampaignPlunk',
        tag: 'Campaigns',
        summary: method === 'patch' ? 'Update a DRAFT or SCHEDULED campaign' : 'Update a campaign (Plunk v2\'s method; same as PATCH)',
        description: 'Fields left out are kept. `audienceCondition` (Plunk) stands for `audienceFilter`.',
        auth: 'secret',
        params: IdParams,
        body: UpdateCampaign,
        response: Campaign,
        status: 200,
        errors: [400, 401, 403, 404, 409, 422, 429],
        handler: async ({ params, body: given, auth }) => {
          const body = fromPlunk(given);
          const current = await getCampaign(db, auth.projectId, params.id);
        if (!current) throw notFound('Campaign');
          if (current.status !== 'DRAFT' && current.status !== 'SCHEDULED') throw refused({ ok: false, reason: 'state', status: current.status }, 'update');
          const patch = toColumns(body);
          const merged = { ...current, ...patch };
          // Switching the audience type drops the other type's settings unless they are restated.
          if (body.audienceType && body.audienceType !== 'SEGMENT' && body.segmentId === undefined) merged.segmentId = patch.segmentId = null;
          if (body.audienceType && body.audienceType !== 'FILTERED' && body.audienceFilter === undefined) merged.audienceFilter = patch.audienceFilter = null;
          const errors = await campaignErrors(db, auth.projectId, merged);
          if (errors.length > 0) throw validationError(errors);
          const t = await updateCampaign(db, auth.projectId, params.id, patch);
          if (!t.ok) throw refused(t, 'update');
          return { data: presentCampaign(t.campaign) };
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
        const t = await deleteDraftCampaign(db, auth.projectId, params.id);
        if (!t.ok) throw refused(t, 'delete');
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
        const current = await getCampaign(db, auth.projectId, params.id);
        if (!current) throw notFound('Campaign');
        if (current.status !== 'DRAFT' && current.status !== 'SCHEDULED') throw refused({ ok: false, reason: 'state', status: current.status }, 'send');
        const errors = await campaignErrors(db, auth.projectId, current);
        if (errors.length > 0) throw validationError(errors);
        if (body.scheduledAt !== undefined && body.scheduledFor !== undefined) {
          throw validationError([{ field: 'scheduledFor', message: 'give the time once: scheduledAt and scheduledFor are the same field', code: 'custom' }]);
        }
        const when = body.scheduledAt ?? body.scheduledFor;
        const at = when ? new Date(when) : null;
        const t = await announcedChange(
          deps,
          log,
          auth.projectId,
          (tx) => sendCampaign(tx, auth.projectId, params.id, at && at.getTime() > Date.now() ? at : null, auth.mode === 'test'),
          (r) => (r.ok && r.campaign.status === 'SENDING' ? [{ type: 'campaign.sending', data: campaignEventData(r.campaign) }] : []),
        );
        if (!t.ok) throw refused(t, 'send');
        await schedule(t.campaign, log);
        return { data: presentCampaign(t.campaign) };
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
        const t = await announcedChange(
          deps,
          log,
          auth.projectId,
          (tx) => cancelCampaign(tx, auth.projectId, params.id),
          (r) => (r.ok ? [{ type: 'campaign.cancelled', data: campaignEventData(r.campaign) }] : []),
        );
        if (!t.ok) throw refused(t, 'cancel');
        // Wake the campaign's job now: it sweeps the emails the queue never received, then ends.
        if (t.campaign.recipients > 0) await schedule(t.campaign, log);
        else await deps.campaignQueue.remove(params.id).catch(() => undefined);
        return { data: { ...presentCampaign(t.campaign), cancelledEmails: t.cancelledEmails ?? 0 } };
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
        const c = await getCampaign(db, auth.projectId, params.id);
        if (!c) throw notFound('Campaign');
        const sender = await senderError(db, auth.projectId, c.fromEmail);
        if (sender) throw validationError([sender]);
        if (body.to !== undefined && body.email !== undefined) throw validationError([{ field: 'email', message: 'give the addresses once: to and email are the same field', code: 'custom' }]);
        const given = (body.to ?? body.email) as Static<typeof Recipients> | undefined;
        if (given === undefined) throw validationError([{ field: 'to', message: 'is required', code: 'invalid_type' }]);
        const to = [...new Set((Array.isArray(given) ? given : [given]).map(normalizeEmail))];
        const rows = await Promise.all(
          to.map(async (email) => {
            const contact = await findContactByEmail(db, auth.projectId, email);
            return {
              id: newId(),
              projectId: auth.projectId,
              contactId: contact?.id ?? null,
              source: 'transactional' as const,
              marketing: true,
              toEmail: email,
              fromEmail: c.fromEmail,
              fromName: c.fromName,
              replyTo: c.replyTo,
              subject: c.subject,
              body: c.body,
              bodyFormat: 'html' as const,
              test: auth.mode === 'test',
            };
          }),
        );
        await db.transaction((tx) => insertQueuedEmails(tx, rows));
        await deps.sendQueue
          .addBulk(rows.map((r) => ({ name: 'send', data: { emailId: r.id, projectId: auth.projectId }, opts: sendJobOptions(deps.config, r.id, SendPriority.transactional) })))
          .catch((err) => log.warn({ err }, 'enqueue failed; the reconciler will enqueue these emails'));
        return { data: { emails: rows.map((r) => ({ email: r.toEmail, id: r.id })) } };
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
        const c = await getCampaign(db, auth.projectId, params.id);
        if (!c) throw notFound('Campaign');
        const RATE_WINDOW_MS = 60_000;
        const { byStatus, recentlySent, delivered, opened, clicked } = await campaignEmailCounts(db, c.id, RATE_WINDOW_MS);
        const sum = (statuses: readonly string[]) => statuses.reduce((n, s) => n + (byStatus[s] ?? 0), 0);
        const sent = sum(REACHED.sent);
        const rate = (n: number) => (sent > 0 ? Math.round((n / sent) * 10_000) / 10_000 : 0);
        // Plunk's percentages: unrounded, of the emails sent.
        const percent = (n: number) => (sent > 0 ? (n / sent) * 100 : 0);
        const bounced = byStatus.bounced ?? 0;
        const queued = sum(['queued', 'sending']);
        const final = sum(REACHED.final);
        const sendRate = Math.round((recentlySent / (RATE_WINDOW_MS / 1000)) * 100) / 100;
        return {
          data: {
            campaignId: c.id,
            status: c.status,
            recipients: c.recipients,
            queued,
            sent,
            delivered,
            opened,
            clicked,
            bounced: byStatus.bounced ?? 0,
            complained: byStatus.complained ?? 0,
            failed: byStatus.failed ?? 0,
            cancelled: byStatus.cancelled ?? 0,
            suppressed: byStatus.suppressed ?? 0,
            unsubscribed: c.unsubscribed,
            rates: {
              delivery: rate(delivered),
              open: rate(opened),
              click: rate(clicked),
              bounce: rate(byStatus.bounced ?? 0),
              complaint: rate(byStatus.complained ?? 0),
              unsubscribe: rate(c.unsubscribed),
            },
            progress: c.recipients > 0 ? Math.round((final / c.recipients) * 10_000) / 10_000 : c.status === 'SENT' ? 1 : 0,
            audienceComplete: c.fanoutDone,
            sendRate,
            etaSeconds: c.status !== 'SENDING' ? null : queued === 0 && c.fanoutDone ? 0 : sendRate > 0 && c.fanoutDone ? Math.ceil(queued / sendRate) : null,
            totalRecipients: c.recipients,
            sentCount: sent,
            deliveredCount: delivered,
            openedCount: opened,
            clickedCount: clicked,
            bouncedCount: bounced,
            openRate: percent(opened),
            clickRate: percent(clicked),
            bounceRate: percent(bounced),
            deliveryRate: percent(delivered),
          },
        };
      },
    }),
  ];
}
