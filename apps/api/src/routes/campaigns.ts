/**
 * Campaigns: `GET/POST /campaigns`, `GET/PATCH/DELETE /campaigns/{id}`, `POST /campaigns/{id}/send|cancel|test`,
 * `GET /campaigns/{id}/stats` (spec "Campaign"; API.md "Campaign states").
 *
 * States: DRAFT → SCHEDULED → SENDING → SENT; CANCELLED from DRAFT, SCHEDULED or SENDING; FAILED when a
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
import {
  AppError,
  ErrorCode,
  MailboxString,
  newId,
  normalizeEmail,
  notFound,
  senderFields,
  parseSegmentFilter,
  scheduleCampaignJob,
  sendJobOptions,
  SendPriority,
  templateSyntaxErrors,
  validationError,
  type FieldError,
} from '@mailroom/core';
import {
  CAMPAIGN_STATUSES,
  campaignEmailCounts,
  cancelCampaign,
  createCampaign,
  deleteDraftCampaign,
  findContactByEmail,
  getCampaign,
  getSegment,
  insertQueuedEmails,
  listCampaigns,
  sendCampaign,
  updateCampaign,
  type CampaignRow,
  type DbOrTx,
  type NewCampaign,
  type Transition,
} from '@mailroom/db';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { senderError } from '../services/sender';
import { announcedChange } from '../services/webhooks';
import { FilterField } from './segments';
import {
  cursorId,
  Deleted,
  EmailAddress,
  IdParams,
  keysetPage,
  Nullable,
  PageFields,
  PageQuery,
  PlunkPageFields,
  PlunkPageQuery,
  plunkPageFields,
  resolvePaging,
  StringEnum,
  Timestamp,
} from './common';

const Status = StringEnum(CAMPAIGN_STATUSES, 'DRAFT, SCHEDULED, SENDING, SENT, CANCELLED or FAILED');
const AudienceType = StringEnum(['ALL', 'SEGMENT', 'FILTERED'] as const, 'ALL subscribed contacts, a SEGMENT, or a FILTERED audience');

const Campaign = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  subject: Type.String(),
  body: Type.String(),
  from: Type.String(),
  fromName: Nullable(Type.String()),
  replyTo: Nullable(Type.String()),
  audienceType: AudienceType,
  type: AudienceType,
  segmentId: Nullable(Type.String()),
  audienceFilter: Nullable(Type.Unknown()),
  status: Status,
  scheduledAt: Nullable(Timestamp),
  startedAt: Nullable(Timestamp),
  completedAt: Nullable(Timestamp),
  cancelledAt: Nullable(Timestamp),
  error: Nullable(Type.String({ description: 'why a FAILED campaign could not start' })),
  recipients: Type.Integer({ description: 'emails created so far (final once the audience is exhausted)' }),
  createdAt: Timestamp,
  updatedAt: Timestamp,
  audienceCondition: Nullable(Type.Unknown({ description: 'same as audienceFilter (Plunk\'s name)' })),
  scheduledFor: Nullable(Timestamp),
  totalRecipients: Type.Integer({ description: 'same as recipients (Plunk\'s name)' }),
  sentAt: Nullable(Timestamp),
}, { description: 'Plunk v2 clients also find their names: audienceCondition, scheduledFor, totalRecipients, sentAt (= startedAt).' });

const iso = (d: Date | null) => d?.toISOString() ?? null;

function presentCampaign(c: CampaignRow): Static<typeof Campaign> {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    subject: c.subject,
    body: c.body,
    from: c.fromEmail,
    fromName: c.fromName,
    replyTo: c.replyTo,
    audienceType: c.audienceType,
    // API.md: the create response's `type` equals `audienceType`.
    type: c.audienceType,
    segmentId: c.segmentId,
    audienceFilter: c.audienceFilter ?? null,
    status: c.status,
    scheduledAt: iso(c.scheduledAt),
    startedAt: iso(c.startedAt),
    completedAt: iso(c.completedAt),
    cancelledAt: iso(c.cancelledAt),
    error: c.error,
    recipients: c.recipients,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
    audienceCondition: c.audienceFilter ?? null,
    scheduledFor: iso(c.scheduledAt),
    totalRecipients: c.recipients,
    sentAt: iso(c.startedAt),
  };
}

const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Nullable(Type.String({ maxLength: 2000 })),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'subject template' }),
  body: Type.String({ minLength: 1, maxLength: 2_000_000, description: 'HTML body template; {{unsubscribeUrl}} is the recipient\'s unsubscribe link' }),
  from: MailboxString,
  fromName: Nullable(Type.String({ maxLength: 200 })),
  replyTo: Nullable(MailboxString),
  audienceType: AudienceType,
  segmentId: Nullable(Type.String({ format: 'uuid' })),
  audienceFilter: Nullable(FilterField),
};

/** Plunk v2's names and fields of a campaign body, accepted beside ours. */
const PlunkCampaignFields = {
  audienceCondition: Type.Optional(Nullable(Type.Unsafe<unknown>({ ...FilterField, description: "Plunk's name for audienceFilter; give only one of the two" }))),
  type: Type.Optional(
    StringEnum(['MARKETING', 'TRANSACTIONAL', 'ALL', 'SEGMENT', 'FILTERED'] as const, "Plunk's campaign type: MARKETING (campaigns here are marketing mail; TRANSACTIONAL is refused), or the campaign's audienceType as answers carry it in `type` (sent back unchanged)"),
  ),
};

/**
 * Maps Plunk's fields of a create or update body onto ours: `audienceCondition` → `audienceFilter`; `type`
 * MARKETING is dropped, and so is an audience value equal to `audienceType` (an answer's `type` sent back); on an
 * update without `audienceType`, an audience value in `type` stands for it.
 *
 * @throws {@link AppError} 422 naming the field: both names of one field given, `type` TRANSACTIONAL, or an audience
 *   `type` that contradicts `audienceType`.
 */
function fromPlunk<B extends { audienceFilter?: unknown; audienceType?: Static<typeof AudienceType>; audienceCondition?: unknown; type?: Static<typeof PlunkCampaignFields.type> }>(
  body: B,
): Omit<B, 'audienceCondition' | 'type'> {
  const { audienceCondition, type, ...ours } = body;
  const errors: FieldError[] = [];
  if (audienceCondition !== undefined) {
    if (ours.audienceFilter !== undefined) errors.push({ field: 'audienceCondition', message: 'give the filter once: audienceFilter and audienceCondition are the same field', code: 'custom' });
    else ours.audienceFilter = audienceCondition;
  }
  if (type === 'TRANSACTIONAL') errors.push({ field: 'type', message: 'campaigns are marketing mail (subscribed contacts, unsubscribe link); send transactional mail with POST /v1/send', code: 'invalid_enum_value' });
  else if (type !== undefined && type !== 'MARKETING') {
    if (ours.audienceType !== undefined && ours.audienceType !== type) errors.push({ field: 'type', message: `is ${type} but audienceType is ${ours.audienceType}`, code: 'custom' });
    else ours.audienceType = type;
  }
  if (errors.length > 0) throw validationError(errors);
  return ours;
}

const CreateCampaign = Type.Object(
  {
    name: fields.name,
    description: Type.Optional(fields.description),
    subject: fields.subject,
    body: fields.body,
    from: fields.from,
    fromName: Type.Optional(fields.fromName),
    replyTo: Type.Optional(fields.replyTo),
    audienceType: fields.audienceType,
    segmentId: Type.Optional(fields.segmentId),
    audienceFilter: Type.Optional(fields.audienceFilter),
    ...PlunkCampaignFields,
  },
  { additionalProperties: false },
);
const UpdateCampaign = Type.Object(
  { ...Type.Partial(Type.Object(fields)).properties, ...PlunkCampaignFields },
  { additionalProperties: false, minProperties: 1 },
);

const ListQuery = Type.Object(
  {
    ...PageQuery,
    ...PlunkPageQuery,
    status: Type.Optional(Status),
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'case-insensitive part of the name, subject or sender (as Plunk\'s list)' })),
  },
  { additionalProperties: false },
);

const ScheduleTime = Nullable(Type.String({ format: 'date-time', description: 'a future time schedules; absent or past sends now' }));
const SendBody = Type.Object(
  {
    scheduledAt: Type.Optional(ScheduleTime),
    scheduledFor: Type.Optional(Nullable(Type.String({ format: 'date-time', description: "Plunk's name for scheduledAt; give only one of the two" }))),
  },
  { additionalProperties: false },
);

const Recipients = Type.Union([EmailAddress, Type.Array(EmailAddress, { minItems: 1, maxItems: 10 })], { description: 'one address or up to 10' });
const TestBody = Type.Object(
  { to: Type.Optional(Recipients), email: Type.Optional(Type.Unsafe<unknown>({ ...Recipients, description: "Plunk's name for `to`; give only one of the two" })) },
  { additionalProperties: false },
);

const Stats = Type.Object({
  campaignId: Type.String(),
  status: Status,
  recipients: Type.Integer(),
  queued: Type.Integer({ description: 'not yet handed to SES (queued or sending)' }),
  sent: Type.Integer({ description: 'accepted by SES (including those later delivered, opened, bounced…)' }),
  delivered: Type.Integer(),
  opened: Type.Integer(),
  clicked: Type.Integer(),
  bounced: Type.Integer(),
  complained: Type.Integer(),
  failed: Type.Integer(),
  cancelled: Type.Integer(),
  suppressed: Type.Integer(),
  unsubscribed: Type.Integer(),
  rates: Type.Object(
    {
      delivery: Type.Number(),
      open: Type.Number(),
      click: Type.Number(),
      bounce: Type.Number(),
      complaint: Type.Number(),
      unsubscribe: Type.Number(),
    },
    { description: 'fractions (0–1) of `sent`' },
  ),
  progress: Type.Number({ description: 'fraction (0–1) of recipients whose email is final' }),
  audienceComplete: Type.Boolean({ description: 'false while recipients are still being added' }),
  sendRate: Type.Number({ description: 'emails/s of this campaign over the last minute' }),
  etaSeconds: Nullable(Type.Integer({ description: 'time to send the rest at the current rate; null when unknown' })),
  totalRecipients: Type.Integer({ description: "Plunk's name for recipients" }),
  sentCount: Type.Integer({ description: "Plunk's name for sent" }),
  deliveredCount: Type.Integer(),
  openedCount: Type.Integer(),
  clickedCount: Type.Integer(),
  bouncedCount: Type.Integer(),
  openRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded, as Plunk gives it; 0 before any is sent' }),
  clickRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
  bounceRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
  deliveryRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
});

/** Status groups of the stats: a later status implies the earlier ones (an opened email was delivered). */
const REACHED = {
  sent: ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'],
  final: ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'failed', 'cancelled', 'suppressed'],
} as const;

/** The 409 or 404 of a refused transition. */
function refused(t: Exclude<Transition, { ok: true }>, action: string): AppError {
  if (t.reason === 'missing') return notFound('Campaign');
  return new AppError(ErrorCode.INVALID_STATE, `Cannot ${action} a campaign that is ${t.status}`, {
    suggestion: 'See the campaign states: DRAFT → SCHEDULED → SENDING → SENT; CANCELLED from DRAFT, SCHEDULED or SENDING.',
  });
}

/** Checks the audience and content rules of a campaign (as it would be after a create or patch). */
async function campaignErrors(db: DbOrTx, projectId: string, c: NewCampaign & { fromEmail: string }): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  if (c.audienceType === 'SEGMENT') {
    if (!c.segmentId) errors.push({ field: 'segmentId', message: 'is required when audienceType is SEGMENT', code: 'invalid_type' });
    else if (!(await getSegment(db, projectId, c.segmentId))) errors.push({ field: 'segmentId', message: 'is not a segment of this project', code: 'custom' });
  } else if (c.segmentId) {
    errors.push({ field: 'segmentId', message: 'is only used when audienceType is SEGMENT', code: 'custom' });
  }
  if (c.audienceType === 'FILTERED') {
    if (c.audienceFilter === null || c.audienceFilter === undefined) {
      errors.push({ field: 'audienceFilter', message: 'is required when audienceType is FILTERED', code: 'invalid_type' });
    } else {
      try {
        parseSegmentFilter(c.audienceFilter, 'audienceFilter');
      } catch (err) {
        if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
        else throw err;
      }
    }
  } else if (c.audienceFilter !== null && c.audienceFilter !== undefined) {
    errors.push({ field: 'audienceFilter', message: 'is only used when audienceType is FILTERED', code: 'custom' });
  }
  errors.push(...templateSyntaxErrors({ subject: c.subject, body: c.body }, (k) => k));
  const sender = await senderError(db, projectId, c.fromEmail);
  if (sender) errors.push(sender);
  return errors;
}

/** Body fields → columns: a mailbox `from` ("Acme <hello@acme.com>") gives the address and, unless stated, `fromName`. */
function toColumns(body: Partial<Static<typeof UpdateCampaign>>): Partial<NewCampaign> {
  const { from, ...rest } = senderFields(body);
  return { ...rest, ...(from !== undefined ? { fromEmail: normalizeEmail(from) } : {}) };
}

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
        'SENDING now. The audience and sender are checked again here (422). `scheduledFor` (Plunk) stands for `scheduledAt`.',
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
          (tx) => sendCampaign(tx, auth.projectId, params.id, at && at.getTime() > Date.now() ? at : null),
          (r) => (r.ok && r.campaign.status === 'SENDING' ? [{ type: 'campaign.sending', data: { campaignId: r.campaign.id } }] : []),
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
        'From DRAFT, SCHEDULED or SENDING. During SENDING, no further email reaches SES: emails in the send queue are ' +
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
          (r) => (r.ok ? [{ type: 'campaign.cancelled', data: { campaignId: r.campaign.id } }] : []),
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
