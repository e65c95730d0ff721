/**
 * `GET /emails`: a project's emails, newest first, with their status; `GET /emails/{id}`: one email's status and
 * timeline.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { decodeCursor } from '@mailroom/platform/ids';
import { findContactByEmail } from '@mailroom/contacts/queries/contacts';
import { getEmailWithTimeline, type EmailRow } from '@mailroom/sending/queries/emails';
import { listEmails } from '@mailroom/sending/queries/email-list';
import { EMAIL_STATUSES } from '@mailroom/db/schema/emails';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { EmailTagSchema } from '@mailroom/platform/email-tags';
import { IdParams, keysetPage, Nullable, PageFields, PageQuery, StringEnum, Timestamp } from './common';

const EmailSummary = Type.Object({
  id: Type.String(),
  status: StringEnum(EMAIL_STATUSES),
  source: Type.String({ description: 'transactional, workflow or campaign' }),
  to: Type.Object({ email: Type.String(), name: Nullable(Type.String()) }),
  from: Type.Object({ email: Type.String(), name: Nullable(Type.String()) }),
  replyTo: Nullable(Type.String()),
  subject: Type.String({ description: 'the rendered subject once sent, else the subject template' }),
  contactId: Nullable(Type.String()),
  templateId: Nullable(Type.String()),
  templateVersion: Nullable(
    Type.Integer({
      description: 'the version of the template the content was rendered from (GET /templates/{id}/versions/{n})',
    }),
  ),
  campaignId: Nullable(Type.String()),
  variant: Nullable(
    Type.Integer({ description: "the A/B test variant (0-based) of a campaign's email; null without a test" }),
  ),
  messageId: Nullable(Type.String({ description: 'SES message id (`test-<email id>` for a test email)' })),
  tags: Type.Array(EmailTagSchema, {
    description: "the sender's { name, value } tags (a campaign's emails carry the campaign's); empty when none",
  }),
  test: Type.Boolean({
    description: 'made with a test key: delivered to the test sink, never to SES (its MIME at GET /emails/{id}/raw)',
  }),
  error: Nullable(Type.String()),
  attempts: Type.Integer(),
  createdAt: Timestamp,
  scheduledAt: Nullable(
    Type.String({
      format: 'date-time',
      description:
        'when a scheduled email is (or was) due (`scheduledAt` of POST /v1/send or PATCH /emails/{id}); null: sent at once',
    }),
  ),
  sentAt: Nullable(Timestamp),
  deliveredAt: Nullable(Timestamp),
  openedAt: Nullable(Timestamp),
  clickedAt: Nullable(Timestamp),
  opens: Type.Integer({ description: 'SES Open events (each load of the tracking pixel)' }),
  clicks: Type.Integer({ description: 'SES Click events' }),
  contentExpired: Type.Boolean({
    description:
      'the content (body, variables, headers, attachments) is no longer kept (RETENTION_EMAIL_CONTENT_DAYS, or the contact was erased); the metadata stays',
  }),
  contentExpiredAt: Nullable(Timestamp),
  erased: Type.Boolean({
    description: "the recipient's personal data was erased (DELETE /contacts/{id}): address, name and subject are gone",
  }),
});

/** An email with its timeline (`GET /emails/{id}`, and the answers of its cancel and reschedule). */
export const Email = Type.Object({
  ...EmailSummary.properties,
  timeline: Type.Array(
    Type.Object({
      type: Type.String({
        description:
          "scheduled (with `scheduledAt`), rescheduled (`scheduledAt`, `previous`), queued, deferred, sent, failed, retried (a campaign's retry-failed re-queued it), cancelled, suppressed, then SES events: delivered, delivery_delayed, opened, clicked, bounced, complained, unsubscribed",
      }),
      at: Timestamp,
      data: Nullable(Type.Record(Type.String(), Type.Unknown())),
    }),
  ),
});

const EmailQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(StringEnum(EMAIL_STATUSES, 'only emails in this status')),
    contactId: Type.Optional(Type.String({ format: 'uuid', description: 'only this contact’s emails' })),
    email: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 320,
        description: 'only the emails of the contact with this address (case-insensitive)',
      }),
    ),
    campaignId: Type.Optional(Type.String({ format: 'uuid', description: 'only this campaign’s emails' })),
    since: Type.Optional(
      Type.String({ format: 'date-time', description: 'emails created at or after this time (ISO 8601)' }),
    ),
    until: Type.Optional(
      Type.String({ format: 'date-time', description: 'emails created at or before this time (ISO 8601)' }),
    ),
  },
  { additionalProperties: false },
);

const EmailList = Type.Object({
  items: Type.Array(EmailSummary),
  ...PageFields,
  totalExact: Type.Boolean({ description: 'false when `total` is a lower bound (more than 10,000 matching emails)' }),
});

/** An email row as the API shows it, without its timeline. */
function presentEmail(e: EmailRow) {
  return {
    id: e.id,
    status: e.status,
    source: e.source,
    to: { email: e.toEmail, name: e.toName },
    from: { email: e.fromEmail, name: e.fromName },
    replyTo: e.replyTo,
    subject: e.renderedSubject ?? e.subject,
    contactId: e.contactId,
    templateId: e.templateId,
    templateVersion: e.templateVersion ?? null,
    campaignId: e.campaignId,
    variant: e.variant ?? null,
    messageId: e.messageId,
    tags: e.tags ?? [],
    test: e.test,
    error: e.error,
    attempts: e.attempts,
    createdAt: e.createdAt.toISOString(),
    scheduledAt: e.scheduledAt?.toISOString() ?? null,
    sentAt: e.sentAt?.toISOString() ?? null,
    deliveredAt: e.deliveredAt?.toISOString() ?? null,
    openedAt: e.openedAt?.toISOString() ?? null,
    clickedAt: e.clickedAt?.toISOString() ?? null,
    opens: e.openCount,
    clicks: e.clickCount,
    contentExpired: e.contentExpiredAt !== null,
    contentExpiredAt: e.contentExpiredAt?.toISOString() ?? null,
    erased: e.erasedAt !== null,
  };
}

/** An email of the project with its timeline as the API shows it, or undefined. */
export async function presentEmailWithTimeline(
  db: Parameters<typeof getEmailWithTimeline>[0],
  projectId: string,
  id: string,
) {
  const found = await getEmailWithTimeline(db, projectId, id);
  if (!found) return undefined;
  const { email: e, timeline } = found;
  return {
    ...presentEmail(e),
    timeline: timeline.map((t) => ({ type: t.type, at: t.createdAt.toISOString(), data: t.data ?? null })),
  };
}

/** Routes of this module. */
export function emailRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'get',
      path: '/emails',
      operationId: 'listEmails',
      tag: 'Sending',
      summary: 'List emails, newest first, with their status',
      description:
        'Every email of the project (transactional, workflow and campaign), newest first, without the timeline (GET /emails/{id} has it). ' +
        'Keyset pagination; filters combine. `since` and `until` are inclusive, at millisecond precision.',
      auth: 'secret',
      query: EmailQuery,
      response: EmailList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const since = query.since ? new Date(query.since) : undefined;
        const until = query.until ? new Date(query.until) : undefined;
        if (since && until && since > until) {
          throw new AppError(ErrorCode.INVALID_PARAMETERS, 'until: must not be before since', {
            errors: [{ field: 'until', message: 'must not be before since', code: 'custom' }],
          });
        }
        const beforeId = query.cursor ? decodeCursor(query.cursor) : undefined;
        let contactId = query.contactId;
        if (query.email !== undefined) {
          const contact = await findContactByEmail(db, auth.projectId, query.email);
          if (!contact || (contactId && contactId !== contact.id))
            return { data: { items: [], nextCursor: null, hasMore: false, total: 0, totalExact: true } };
          contactId = contact.id;
        }
        const page = await listEmails(db, auth.projectId, {
          limit: query.limit,
          beforeId,
          status: query.status,
          contactId,
          campaignId: query.campaignId,
          since,
          until,
        });
        return { data: { ...keysetPage(page, presentEmail, page.total), totalExact: page.totalExact } };
      },
    }),
    route({
      method: 'get',
      path: '/emails/:id',
      operationId: 'getEmail',
      tag: 'Sending',
      summary: 'Get an email with its timeline',
      auth: 'secret',
      params: IdParams,
      response: Email,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const found = await presentEmailWithTimeline(db, auth.projectId, params.id);
        if (!found) throw notFound('Email');
        return { data: found };
      },
    }),
  ];
}
