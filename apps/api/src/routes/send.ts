/**
 * `POST /v1/send`: transactional email (spec "POST /v1/send"; docs/api/overview.md).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { MAILBOX_MAX_LENGTH } from '@mailroom/platform/address';
import { EmailTagsSchema } from '@mailroom/platform/email-tags';
import { addressString, MailboxString } from '@mailroom/platform/validation';
import { acceptSend, ATTACHMENT_LIMITS } from '@mailroom/sending/accept';
import { transactionalBatcher } from '@mailroom/sending/write-batcher';
import { sendEnqueueBatcher } from '@mailroom/sending/enqueue-batcher';
import { laneConnectionResolver } from '@mailroom/sending/lane-connection';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { EmailAddress, StringEnum, Timestamp } from './common';
import { SUPPRESSION_CAUSES } from '@mailroom/db/queries/suppression-rule';

const Mailbox = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 200 })), email: EmailAddress },
  { additionalProperties: false, description: '{ name, email }' },
);
const Address = Type.Union([MailboxString, Mailbox], {
  description: 'an email address, a mailbox string such as "Ann <ann@example.com>", or { name, email }',
});

const Attachment = Type.Object(
  {
    filename: Type.String({ minLength: 1, maxLength: 255 }),
    content: Type.String({ minLength: 1, description: 'base64-encoded bytes' }),
    contentType: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 255,
        pattern: '^[\\w.+-]+/[\\w.+-]+$',
        description:
          'media type; default from the file name. Not multipart/* or message/* (422): send those as application/octet-stream',
      }),
    ),
    contentId: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 255,
        // RFC 2392 content-id (an addr-spec): atext, dots and @; no angle brackets, whitespace or quotes.
        pattern: "^[A-Za-z0-9!#$%&'*+/=?^_`{|}~.@-]+$",
        examples: ['logo@acme'],
        description:
          'Content-ID of an inline part (RFC 2392), without angle brackets: the HTML shows it as `<img src="cid:logo">`; the message ' +
          "is then multipart/related. Letters, digits, `.`, `@` and `!#$%&'*+/=?^_`{|}~-`; unique within the email (422 naming the field)",
      }),
    ),
    disposition: Type.Optional(
      StringEnum(
        ['inline', 'attachment'] as const,
        'Content-Disposition; default `inline` with a `contentId`, else `attachment`',
      ),
    ),
  },
  { additionalProperties: false },
);

/** Body of `POST /v1/send`. */
export const SendBody = Type.Object(
  {
    to: Type.Union([Address, Type.Array(Address, { minItems: 1, maxItems: 100 })], {
      description:
        'an email address, a mailbox string ("Ann <ann@example.com>"), { name, email }, or an array of up to 100 of them',
    }),
    subject: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 998,
        description: 'subject template; at most 998 characters (RFC 5322 line length)',
      }),
    ),
    body: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 2_000_000,
        description:
          'HTML (or Markdown with type=markdown); {{var}} values stay text in both (never links, images or markup), and a script or data URL ' +
          'from a variable becomes #. At most 200 levels of nested elements (Markdown: block quotes, lists, emphasis), and per Markdown ' +
          'paragraph at most 200 links and 2,000 emphasis markers (422 naming the field)',
      }),
    ),
    template: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'template id' })),
    from: Type.Optional(Address),
    name: Type.Optional(
      Type.String({ maxLength: 200, description: 'sender display name; wins over a display name given in `from`' }),
    ),
    reply: Type.Optional(
      addressString('mailbox', {
        maxLength: MAILBOX_MAX_LENGTH,
        description:
          'reply-to: an email address or a mailbox string such as "Support <help@example.com>" (the name is kept)',
      }),
    ),
    subscribed: Type.Optional(
      Type.Boolean({
        description: 'marketing subscription; default false for new contacts, unchanged for existing ones',
      }),
    ),
    data: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description:
          'template variables; `{ value, persistent: false }` values are used for rendering only and not stored on the contact. ' +
          "`plunk_id`, `plunk_email` and `unsubscribeUrl` are set by the platform (the contact's id and address, its unsubscribe link): " +
          'values given for them are ignored when rendering. ' +
          'At most 32 levels of nesting in the whole body; no U+0000 in any string or key (422 naming the field)',
      }),
    ),
    headers: Type.Optional(
      Type.Record(Type.String(), Type.String(), {
        description:
          'custom email headers (at most 50; names compared case-insensitively, each once). Refused with 422 naming the header: ' +
          "the platform's and MIME's own (From, To, Cc, Bcc, Reply-To, Sender, Subject, Date, Message-ID, MIME-Version, Content-*, " +
          'Return-Path, Received, DKIM-Signature, Feedback-ID, Authentication-Results, ARC-*, X-SES-*), and List-Unsubscribe / ' +
          "List-Unsubscribe-Post on marketing mail (it carries the platform's one-click pair). Transactional mail may carry its own pair " +
          '(List-Unsubscribe-Post only beside List-Unsubscribe); without one, the platform adds its pair when the body links to ' +
          '{{unsubscribeUrl}}. Marketing mail carries Precedence: bulk, Auto-Submitted: auto-generated and X-Auto-Response-Suppress: All; ' +
          'a value given here for one of them replaces the default',
      }),
    ),
    attachments: Type.Optional(
      Type.Array(Attachment, { maxItems: ATTACHMENT_LIMITS.count, description: 'at most 10, 10 MB decoded in total' }),
    ),
    type: Type.Optional(StringEnum(['html', 'markdown'] as const, 'body format')),
    tracking: Type.Optional(
      Type.Boolean({
        description:
          "open and click tracking of this send (picks the SES configuration set with or without tracking); unset: the template's `tracking`, else the project's `trackingMode`",
      }),
    ),
    scheduledAt: Type.Optional(
      Type.String({
        format: 'date-time',
        examples: ['2026-12-01T09:00:00Z'],
        description:
          'send at this time (ISO 8601 date-time with a time zone), at most 30 days ahead (422 beyond); a time not in the future sends at once. ' +
          'The emails are `scheduled` until then: cancel one with POST /emails/{id}/cancel, move it with PATCH /emails/{id}',
      }),
    ),
    tags: Type.Optional(EmailTagsSchema),
  },
  { additionalProperties: false },
);

/** What `POST /v1/send` answers (and each accepted message of the batch). */
export const SendResult = Type.Object({
  emails: Type.Array(
    Type.Object({
      contact: Type.Object({ id: Type.String(), email: Type.String() }),
      email: Type.String({ description: 'email id; read its status at GET /emails/{id}' }),
      status: Type.Union([Type.Literal('queued'), Type.Literal('scheduled'), Type.Literal('suppressed')], {
        description:
          '`scheduled`: sent at `scheduledAt`; `suppressed`: the email is stored with this status and never sent; `reason` says why',
      }),
      scheduledAt: Type.Optional(Timestamp),
      reason: Type.Optional(
        StringEnum(
          SUPPRESSION_CAUSES,
          'why a suppressed email is not sent: `suppression_list` (the address is on it), `unsubscribed` (marketing email to a contact who is not subscribed), `topic_unsubscribed` (marketing email of a topic the contact is not subscribed to)',
        ),
      ),
    }),
  ),
  suppressed: Type.Array(Type.String(), { description: 'recipients whose email is suppressed (not sent)' }),
  timestamp: Timestamp,
});

/** Routes of this module. */
export function sendRoutes(deps: AppDeps) {
  // Concurrent sends without attachments or an Idempotency-Key go to Postgres in batches (API_WRITE_BATCH_SIZE, API_WRITE_BATCH_IN_FLIGHT),
  // those reaching the write in one turn of the event loop in one batch (docs/decisions/0174-api-write-batches-fixed-text-per-turn.md).
  const writer = transactionalBatcher(deps.database.db, {
    maxBatch: deps.config.writeBatchSize,
    maxInFlight: deps.config.writeBatchInFlight,
    sameTurn: true,
  });
  // Their send jobs, after the commit, in batches too: one lane count and one add per batch (same settings).
  const enqueuer = sendEnqueueBatcher(
    {
      config: deps.config,
      sendQueue: deps.queues.send,
      redis: deps.redis,
      connectionOf: laneConnectionResolver(deps.database.db, deps.config.sesConnections),
      clock: deps.clock,
    },
    { maxBatch: deps.config.writeBatchSize, maxInFlight: deps.config.writeBatchInFlight },
  );
  return [
    route({
      method: 'post',
      path: '/v1/send',
      operationId: 'sendEmail',
      tag: 'Sending',
      summary: 'Send transactional email',
      description:
        'Queues one email per distinct recipient and creates or updates their contacts. ' +
        'Responds 202 once every email is stored; delivery happens in the worker. ' +
        'The sender domain must be a verified domain of the project. ' +
        'A recipient on the suppression list, or (with a MARKETING template) a contact who is not subscribed once this ' +
        'request is applied, gets an email with status `suppressed` and its `reason` that is never sent, and an ' +
        '`email.suppressed` webhook; the response lists those recipients in `suppressed`. ' +
        'With a test key (sk_test_…) the emails are test emails: checked, stored and rendered exactly as live, then delivered ' +
        'to the test sink instead of SES (read them at GET /emails/{id}/raw). ' +
        'A send-only key (scope `sending`) may call this route; one restricted to sending domains gets 403 `KEY_DOMAIN_FORBIDDEN` ' +
        'for a `from` on another domain.',
      auth: 'secret',
      sendingKeys: true,
      body: SendBody,
      example: {
        to: 'ada@example.org',
        from: 'Acme <hello@example.com>',
        subject: 'Hello {{name ?? "there"}}',
        body: '<p>Hi {{name}}!</p>',
        data: { name: 'Ada' },
        tags: [{ name: 'category', value: 'welcome' }],
      },
      bodyLimit: '20mb',
      response: SendResult,
      status: 202,
      errors: [400, 401, 403, 404, 409, 413, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, log, db, afterCommit }) => ({
        data: await acceptSend(
          {
            config: deps.config,
            sendQueue: deps.queues.send,
            webhookQueue: deps.queues.webhook,
            db,
            log,
            redis: deps.redis,
            enqueuer,
            writer,
          },
          auth.projectId,
          body,
          afterCommit,
          auth.mode,
          auth.allowedDomains,
        ),
      }),
    }),
  ];
}
