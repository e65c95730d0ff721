/**
 * The shapes of the campaign routes (`campaigns.ts`): TypeBox schemas of campaigns, their bodies and stats (ours
 * with Plunk v2's names beside them), the presenter, and Plunk's body forms mapped onto ours. The rules a
 * campaign must pass live in `@mailroom/campaigns/rules`.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { MailboxString } from '@mailroom/platform/validation';
import { EmailTagSchema, EmailTagsSchema, storedTags } from '@mailroom/platform/email-tags';
import { normalizeEmail, senderFields } from '@mailroom/platform/address';
import { CAMPAIGN_PAUSE_REASONS, CAMPAIGN_STATUSES } from '@mailroom/db/schema/campaigns';
import { type CampaignRow, type NewCampaign } from '@mailroom/campaigns/queries/campaigns';
import type { CampaignStats } from '@mailroom/campaigns/stats';
import { FilterField } from './filter-fields';
import { filterField } from '@mailroom/audiences/filter-schema';
import { CampaignTemplateFields } from './campaign-template';
import { EmailAddress, Nullable, PageQuery, PlunkPageQuery, StringEnum, Timestamp } from './common';
import { AbFields, CampaignAbFields, presentAb } from './campaign-ab-schemas';

export const Status = StringEnum(CAMPAIGN_STATUSES, 'DRAFT, SCHEDULED, SENDING, PAUSED, SENT, CANCELLED or FAILED');
export const PauseReason = StringEnum(
  CAMPAIGN_PAUSE_REASONS,
  "bounce_rate, complaint_rate (a guardrail) or quota (the SES account's 24-hour quota)",
);
export const AudienceType = StringEnum(
  ['ALL', 'SEGMENT', 'FILTERED'] as const,
  'ALL subscribed contacts, a SEGMENT, or a FILTERED audience',
);

export const Campaign = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    description: Nullable(Type.String()),
    subject: Type.String(),
    body: Type.String(),
    from: Type.String(),
    fromName: Nullable(Type.String()),
    replyTo: Nullable(Type.String()),
    tracking: Nullable(
      Type.Boolean({
        description: "open and click tracking of the campaign's mail; null: the project's `trackingMode` decides",
      }),
    ),
    templateId: Nullable(Type.String({ description: 'the template the subject and body come from, or null' })),
    templateVersion: Nullable(
      Type.Integer({
        description:
          'the pinned version of templateId; null follows the latest published one until the campaign is sent',
      }),
    ),
    contentVersion: Nullable(
      Type.Integer({
        description: 'the template version subject and body hold now (each email records it as templateVersion)',
      }),
    ),
    audienceType: AudienceType,
    type: AudienceType,
    segmentId: Nullable(Type.String()),
    audienceFilter: Nullable(Type.Unknown()),
    topicId: Nullable(
      Type.String({ description: 'the topic the campaign is about: only contacts subscribed to it receive it' }),
    ),
    status: Status,
    scheduledAt: Nullable(Timestamp),
    startedAt: Nullable(Timestamp),
    completedAt: Nullable(Timestamp),
    cancelledAt: Nullable(Timestamp),
    error: Nullable(Type.String({ description: 'why a FAILED campaign could not start' })),
    recipients: Type.Integer({ description: 'emails created so far (final once the audience is exhausted)' }),
    pausedReason: Nullable(PauseReason),
    pausedAt: Nullable(Timestamp),
    pauseDetails: Nullable(
      Type.Record(Type.String(), Type.Unknown(), {
        description: 'the figures that made it pause: rates, sample, thresholds or quota',
      }),
    ),
    tags: Type.Array(EmailTagSchema, { description: 'the tags every email of the campaign carries (empty when none)' }),
    test: Type.Boolean({ description: 'sent with a test key: its emails go to the sink, never to SES' }),
    ...CampaignAbFields,
    createdAt: Timestamp,
    updatedAt: Timestamp,
    audienceCondition: Nullable(Type.Unknown({ description: "same as audienceFilter (Plunk's name)" })),
    scheduledFor: Nullable(Timestamp),
    totalRecipients: Type.Integer({ description: "same as recipients (Plunk's name)" }),
    sentAt: Nullable(Timestamp),
  },
  {
    description:
      'Plunk v2 clients also find their names: audienceCondition, scheduledFor, totalRecipients, sentAt (= startedAt).',
  },
);

export const iso = (d: Date | null) => d?.toISOString() ?? null;

export function presentCampaign(c: CampaignRow): Static<typeof Campaign> {
  return {
    id: c.id,
    name: c.name,
    description: c.description,
    subject: c.subject,
    body: c.body,
    from: c.fromEmail,
    fromName: c.fromName,
    replyTo: c.replyTo,
    tracking: c.tracking,
    templateId: c.templateId,
    templateVersion: c.templateVersion,
    contentVersion: c.contentVersion,
    audienceType: c.audienceType,
    // docs/api/overview.md: the create response's `type` equals `audienceType`.
    type: c.audienceType,
    segmentId: c.segmentId,
    audienceFilter: c.audienceFilter ?? null,
    topicId: c.topicId,
    status: c.status,
    scheduledAt: iso(c.scheduledAt),
    startedAt: iso(c.startedAt),
    completedAt: iso(c.completedAt),
    cancelledAt: iso(c.cancelledAt),
    error: c.error,
    recipients: c.recipients,
    pausedReason: c.pausedReason,
    pausedAt: iso(c.pausedAt),
    pauseDetails: c.pauseDetails,
    tags: c.tags ?? [],
    test: c.test,
    ...presentAb(c),
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
    audienceCondition: c.audienceFilter ?? null,
    scheduledFor: iso(c.scheduledAt),
    totalRecipients: c.recipients,
    sentAt: iso(c.startedAt),
  };
}

export const fields = {
  name: Type.String({ minLength: 1, maxLength: 200 }),
  description: Nullable(Type.String({ maxLength: 2000 })),
  subject: Type.String({ minLength: 1, maxLength: 998, description: 'subject template' }),
  body: Type.String({
    minLength: 1,
    maxLength: 2_000_000,
    description:
      "HTML body template; {{unsubscribeUrl}} is the recipient's unsubscribe link; at most 200 levels of nested elements (422 naming the field)",
  }),
  from: MailboxString,
  fromName: Nullable(Type.String({ maxLength: 200 })),
  replyTo: Nullable(MailboxString),
  tracking: Nullable(
    Type.Boolean({
      description: "open and click tracking of the campaign's mail; null: the project's `trackingMode` decides",
    }),
  ),
  audienceType: AudienceType,
  segmentId: Nullable(Type.String({ format: 'uuid' })),
  audienceFilter: Nullable(FilterField),
  topicId: Nullable(
    Type.String({
      format: 'uuid',
      description:
        'a topic of this project (POST /topics): the campaign reaches only contacts subscribed to it (explicitly, or by its opt_out default) ' +
        'and globally subscribed; its one-click unsubscribe leaves that topic only. null: every subscribed contact of the audience',
    }),
  ),
  tags: Nullable(EmailTagsSchema),
};

/** Plunk v2's names and fields of a campaign body, accepted beside ours. */
export const PlunkCampaignFields = {
  audienceCondition: Type.Optional(Nullable(filterField("Plunk's name for audienceFilter; give only one of the two"))),
  type: Type.Optional(
    StringEnum(
      ['MARKETING', 'TRANSACTIONAL', 'ALL', 'SEGMENT', 'FILTERED'] as const,
      "Plunk's campaign type: MARKETING (campaigns here are marketing mail; TRANSACTIONAL is refused), or the campaign's audienceType as answers carry it in `type` (sent back unchanged)",
    ),
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
export function fromPlunk<
  B extends {
    audienceFilter?: unknown;
    audienceType?: Static<typeof AudienceType>;
    audienceCondition?: unknown;
    type?: Static<typeof PlunkCampaignFields.type>;
  },
>(body: B): Omit<B, 'audienceCondition' | 'type'> {
  const { audienceCondition, type, ...ours } = body;
  const errors: FieldError[] = [];
  if (audienceCondition !== undefined) {
    if (ours.audienceFilter !== undefined)
      errors.push({
        field: 'audienceCondition',
        message: 'give the filter once: audienceFilter and audienceCondition are the same field',
        code: 'custom',
      });
    else ours.audienceFilter = audienceCondition;
  }
  if (type === 'TRANSACTIONAL')
    errors.push({
      field: 'type',
      message:
        'campaigns are marketing mail (subscribed contacts, unsubscribe link); send transactional mail with POST /v1/send',
      code: 'invalid_enum_value',
    });
  else if (type !== undefined && type !== 'MARKETING') {
    if (ours.audienceType !== undefined && ours.audienceType !== type)
      errors.push({ field: 'type', message: `is ${type} but audienceType is ${ours.audienceType}`, code: 'custom' });
    else ours.audienceType = type;
  }
  if (errors.length > 0) throw validationError(errors);
  return ours;
}

export const CreateCampaign = Type.Object(
  {
    name: fields.name,
    description: Type.Optional(fields.description),
    subject: Type.Optional(fields.subject),
    body: Type.Optional(fields.body),
    ...CampaignTemplateFields,
    from: fields.from,
    fromName: Type.Optional(fields.fromName),
    replyTo: Type.Optional(fields.replyTo),
    tracking: Type.Optional(fields.tracking),
    audienceType: fields.audienceType,
    segmentId: Type.Optional(fields.segmentId),
    audienceFilter: Type.Optional(fields.audienceFilter),
    ...AbFields,
    topicId: Type.Optional(fields.topicId),
    tags: Type.Optional(fields.tags),
    ...PlunkCampaignFields,
  },
  { additionalProperties: false },
);
export const UpdateCampaign = Type.Object(
  { ...Type.Partial(Type.Object(fields)).properties, ...AbFields, ...CampaignTemplateFields, ...PlunkCampaignFields },
  { additionalProperties: false, minProperties: 1 },
);

export const ListQuery = Type.Object(
  {
    ...PageQuery,
    ...PlunkPageQuery,
    status: Type.Optional(Status),
    search: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 200,
        description: "case-insensitive part of the name, subject or sender (as Plunk's list)",
      }),
    ),
  },
  { additionalProperties: false },
);

export const ScheduleTime = Nullable(
  Type.String({ format: 'date-time', description: 'a future time schedules; absent or past sends now' }),
);
export const SendBody = Type.Object(
  {
    scheduledAt: Type.Optional(ScheduleTime),
    scheduledFor: Type.Optional(
      Nullable(
        Type.String({ format: 'date-time', description: "Plunk's name for scheduledAt; give only one of the two" }),
      ),
    ),
  },
  { additionalProperties: false },
);

export const Recipients = Type.Union([EmailAddress, Type.Array(EmailAddress, { minItems: 1, maxItems: 10 })], {
  description: 'one address or up to 10',
});
export const TestBody = Type.Object(
  {
    to: Type.Optional(Recipients),
    email: Type.Optional(
      Type.Unsafe<unknown>({ ...Recipients, description: "Plunk's name for `to`; give only one of the two" }),
    ),
  },
  { additionalProperties: false },
);

export const Stats = Type.Object({
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
  skipped: Type.Object(
    {
      snoozed: Type.Integer({
        description:
          'contacts of the audience left out because they had paused marketing email (snoozedUntil ahead at fan-out)',
      }),
    },
    { description: 'contacts of the audience that got no email, by reason (not counted in recipients)' },
  ),
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
  openRate: Type.Number({
    description: 'percent (0–100) of sentCount, unrounded, as Plunk gives it; 0 before any is sent',
  }),
  clickRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
  bounceRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
  deliveryRate: Type.Number({ description: 'percent (0–100) of sentCount, unrounded' }),
});

/** Body fields → columns: a mailbox `from` ("Acme <hello@acme.com>") gives the address and, unless stated, `fromName`. */
export function toColumns(
  body: Omit<Partial<Static<typeof UpdateCampaign>>, 'variants' | 'abTest'>,
): Partial<NewCampaign> {
  const { from, tags, ...rest } = senderFields(body);
  return {
    ...rest,
    ...(from !== undefined ? { fromEmail: normalizeEmail(from) } : {}),
    ...(tags !== undefined ? { tags: storedTags(tags) } : {}),
  };
}

/** A campaign's statistics as the stats route answers them, with Plunk's names beside ours. */
export function presentStats(c: CampaignRow, s: CampaignStats): Static<typeof Stats> {
  return {
    campaignId: c.id,
    status: c.status,
    recipients: s.recipients,
    queued: s.queued,
    sent: s.sent,
    delivered: s.delivered,
    opened: s.opened,
    clicked: s.clicked,
    bounced: s.bounced,
    complained: s.complained,
    failed: s.failed,
    cancelled: s.cancelled,
    suppressed: s.suppressed,
    unsubscribed: s.unsubscribed,
    skipped: s.skipped,
    rates: s.rates,
    progress: s.progress,
    audienceComplete: s.audienceComplete,
    sendRate: s.sendRate,
    etaSeconds: s.etaSeconds,
    totalRecipients: s.recipients,
    sentCount: s.sent,
    deliveredCount: s.delivered,
    openedCount: s.opened,
    clickedCount: s.clicked,
    bouncedCount: s.bounced,
    openRate: s.percent.open,
    clickRate: s.percent.click,
    bounceRate: s.percent.bounce,
    deliveryRate: s.percent.delivery,
  };
}
