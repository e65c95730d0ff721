/**
 * `GET /emails/{id}`: an email's status and timeline.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { notFound } from '@mailroom/platform/errors';
import { getEmailWithTimeline } from '@mailroom/db/queries/emails';
import { EMAIL_STATUSES } from '@mailroom/db/schema/emails';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, StringEnum, Timestamp } from './common';

const Email = Type.Object({
  id: Type.String(),
  status: StringEnum(EMAIL_STATUSES),
  source: Type.String({ description: 'transactional, workflow or campaign' }),
  to: Type.Object({ email: Type.String(), name: Nullable(Type.String()) }),
  from: Type.Object({ email: Type.String(), name: Nullable(Type.String()) }),
  replyTo: Nullable(Type.String()),
  subject: Type.String({ description: 'the rendered subject once sent, else the subject template' }),
  contactId: Nullable(Type.String()),
  templateId: Nullable(Type.String()),
  campaignId: Nullable(Type.String()),
  messageId: Nullable(Type.String({ description: 'SES message id (`test-<email id>` for a test email)' })),
  test: Type.Boolean({ description: 'made with a test key: delivered to the test sink, never to SES (its MIME at GET /emails/{id}/raw)' }),
  error: Nullable(Type.String()),
  attempts: Type.Integer(),
  createdAt: Timestamp,
  sentAt: Nullable(Timestamp),
  deliveredAt: Nullable(Timestamp),
  openedAt: Nullable(Timestamp),
  clickedAt: Nullable(Timestamp),
  opens: Type.Integer({ description: 'SES Open events (each load of the tracking pixel)' }),
  clicks: Type.Integer({ description: 'SES Click events' }),
  contentExpired: Type.Boolean({
    description: 'the content (body, variables, headers, attachments) is no longer kept (RETENTION_EMAIL_CONTENT_DAYS, or the contact was erased); the metadata stays',
  }),
  contentExpiredAt: Nullable(Timestamp),
  erased: Type.Boolean({ description: "the recipient's personal data was erased (DELETE /contacts/{id}): address, name and subject are gone" }),
  timeline: Type.Array(
    Type.Object({
      type: Type.String({
        description: 'queued, deferred, sent, failed, retried (a campaign\'s retry-failed re-queued it), cancelled, suppressed, then SES events: delivered, delivery_delayed, opened, clicked, bounced, complained, unsubscribed',
      }),
      at: Timestamp,
      data: Nullable(Type.Record(Type.String(), Type.Unknown())),
    }),
  ),
});

/** Routes of this module. */
export function emailRoutes(deps: AppDeps) {
  return [
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
        const found = await getEmailWithTimeline(deps.database.db, auth.projectId, params.id);
        if (!found) throw notFound('Email');
        const { email: e, timeline } = found;
        return {
          data: {
            id: e.id,
            status: e.status,
            source: e.source,
            to: { email: e.toEmail, name: e.toName },
            from: { email: e.fromEmail, name: e.fromName },
            replyTo: e.replyTo,
            subject: e.renderedSubject ?? e.subject,
            contactId: e.contactId,
            templateId: e.templateId,
            campaignId: e.campaignId,
            messageId: e.messageId,
            test: e.test,
            error: e.error,
            attempts: e.attempts,
            createdAt: e.createdAt.toISOString(),
            sentAt: e.sentAt?.toISOString() ?? null,
            deliveredAt: e.deliveredAt?.toISOString() ?? null,
            openedAt: e.openedAt?.toISOString() ?? null,
            clickedAt: e.clickedAt?.toISOString() ?? null,
            opens: e.openCount,
            clicks: e.clickCount,
            contentExpired: e.contentExpiredAt !== null,
            contentExpiredAt: e.contentExpiredAt?.toISOString() ?? null,
            erased: e.erasedAt !== null,
            timeline: timeline.map((t) => ({ type: t.type, at: t.createdAt.toISOString(), data: t.data ?? null })),
          },
        };
      },
    }),
  ];
}
