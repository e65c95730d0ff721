/**
 * Received email (Amazon SES receiving, see docs/guides/inbound.md): `GET /inbound` (keyset, newest first),
 * `GET /inbound/{id}`, and, mounted by hand because they answer bytes rather than JSON, `GET /inbound/{id}/raw`
 * (`message/rfc822`) and `GET /inbound/{id}/attachments/{n}` (the attachment's own type). `PUT /domains/{id}/inbound`
 * turns receiving on or off for a domain of the project (its DNS records then include the MX record to publish).
 * Every read is scoped by the key's project: another project's id is 404.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import type { Request, RequestHandler, Response, Router } from 'express';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { paramValidator } from '@mailroom/platform/validation';
import {
  getInboundEmail,
  getInboundRaw,
  listInboundEmails,
  type InboundEmailSummary,
} from '@mailroom/feedback/queries/inbound';
import { setDomainInbound } from '@mailroom/mail/queries/domains';
import { inboundAttachment } from '@mailroom/feedback/inbound/parse';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { cursorId, IdParams, keysetPage, Nullable, PageFields, PageQuery, StringEnum, Timestamp } from './common';
import { presentDomain, DomainSchema } from './domains';
import { logged } from '@mailroom/platform/logger';

const Verdict = Nullable(
  Type.String({ description: 'PASS, FAIL, GRAY or PROCESSING_FAILED, as SES judged; null when SES gave none' }),
);

const InboundEmail = Type.Object({
  id: Type.String(),
  status: StringEnum(
    ['received', 'failed'] as const,
    '`failed`: an error record (the message could not be fetched or parsed; see `error`)',
  ),
  error: Nullable(Type.String()),
  sesMessageId: Type.String({ description: "SES's id of the received message" }),
  messageId: Nullable(Type.String({ description: 'the Message-ID header' })),
  from: Nullable(Type.String()),
  fromName: Nullable(Type.String()),
  to: Type.Array(Type.String()),
  cc: Type.Array(Type.String()),
  recipients: Type.Array(Type.String(), { description: "the envelope recipients on this project's domains" }),
  subject: Nullable(Type.String()),
  text: Nullable(Type.String()),
  html: Nullable(Type.String()),
  headers: Type.Array(Type.Object({ name: Type.String(), value: Type.String() })),
  attachments: Type.Array(
    Type.Object({
      filename: Nullable(Type.String()),
      contentType: Type.String(),
      size: Type.Integer({ description: 'bytes' }),
      contentId: Nullable(Type.String()),
    }),
    { description: 'attachment n is served at GET /inbound/{id}/attachments/{n} (0-based)' },
  ),
  size: Nullable(Type.Integer({ description: 'bytes of the raw message' })),
  verdicts: Type.Object({ spam: Verdict, virus: Verdict, spf: Verdict, dkim: Verdict, dmarc: Verdict }),
  contactId: Nullable(Type.String({ description: "the sender's contact, when the sender is one" })),
  inReplyToEmailId: Nullable(
    Type.String({ description: 'the email of ours this one answers (In-Reply-To/References)' }),
  ),
  receivedAt: Timestamp,
  createdAt: Timestamp,
});

function present(r: InboundEmailSummary): Static<typeof InboundEmail> {
  return {
    id: r.id,
    status: r.status,
    error: r.error,
    sesMessageId: r.sesMessageId,
    messageId: r.messageId,
    from: r.fromEmail,
    fromName: r.fromName,
    to: r.to,
    cc: r.cc,
    recipients: r.recipients,
    subject: r.subject,
    text: r.text,
    html: r.html,
    headers: r.headers,
    attachments: r.attachments,
    size: r.size,
    verdicts: r.verdicts,
    contactId: r.contactId,
    inReplyToEmailId: r.inReplyToEmailId,
    receivedAt: r.receivedAt.toISOString(),
    createdAt: r.createdAt.toISOString(),
  };
}

/** Routes of this module (the JSON ones). */
export function inboundRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'get',
      path: '/inbound',
      operationId: 'listInbound',
      tag: 'Inbound',
      summary: 'List received email, newest first',
      description:
        "Messages SES received for the project's inbound-enabled domains, error records (`status: failed`) included.",
      auth: 'secret',
      query: Type.Object({ ...PageQuery }, { additionalProperties: false }),
      response: Type.Object({ items: Type.Array(InboundEmail), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listInboundEmails(db, auth.projectId, {
          limit: query.limit,
          beforeId: cursorId(query.cursor),
        });
        return { data: keysetPage(page, present, page.total) };
      },
    }),
    route({
      method: 'get',
      path: '/inbound/:id',
      operationId: 'getInbound',
      tag: 'Inbound',
      summary: 'A received email: parsed fields, attachment list, SES verdicts, links',
      auth: 'secret',
      params: IdParams,
      response: InboundEmail,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const row = await getInboundEmail(db, auth.projectId, params.id);
        if (!row) throw notFound('Received email');
        return { data: present(row) };
      },
    }),
    route({
      method: 'put',
      path: '/domains/:id/inbound',
      operationId: 'setDomainInbound',
      tag: 'Inbound',
      summary: 'Receive email for a domain (or stop)',
      description:
        "With `enabled: true`, the domain's records include the MX record to publish (`INBOUND_MX_HOST`, Amazon SES receiving of the " +
        'region, priority 10), and messages SES receives for it are stored for this project. SES needs a receipt rule for the domain ' +
        'with an SNS action (content inline, up to 150 KB) or an S3 action, publishing to a topic of SNS_TOPIC_ARNS.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object({ enabled: Type.Boolean() }, { additionalProperties: false }),
      response: DomainSchema,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, auth }) => {
        const row = await setDomainInbound(db, auth.projectId, params.id, body.enabled);
        if (!row) throw notFound('Domain');
        return { data: presentDomain(row, deps.config.inboundMxHost) };
      },
    }),
  ];
}

const AttachmentParams = Type.Object(
  { id: IdParams.properties.id, n: Type.Integer({ minimum: 0, maximum: 999 }) },
  { additionalProperties: false },
);

/**
 * Mounts `GET /inbound/{id}/raw` and `GET /inbound/{id}/attachments/{n}` behind `auth` (the secret-key chain).
 *
 * @throws {@link AppError} 400 (id not a UUID, n not 0–999), 404 (no such message in the project, no such
 *   attachment, or the raw message was not kept: an error record without content, or expired by retention).
 */
export function mountInboundRaw(router: Router, deps: AppDeps, auth: RequestHandler[]): void {
  const validateId = paramValidator(IdParams);
  const validateAttachment = paramValidator(AttachmentParams);
  const rawOf = async (res: Response, id: string) => {
    const raw = await getInboundRaw(deps.database.db, res.locals.auth!.projectId, id);
    if (raw === undefined) throw notFound('Received email');
    if (raw === null)
      throw new AppError(
        ErrorCode.NOT_FOUND,
        'The raw message of this received email is not kept (an error record without content, or expired by retention)',
      );
    return raw;
  };
  router.get('/inbound/:id/raw', ...auth, async (req: Request, res: Response) => {
    const { id } = validateId({ ...req.params });
    const raw = await rawOf(res, id);
    res
      .status(200)
      .set({ 'Cache-Control': 'private, no-store', 'Content-Disposition': `inline; filename="${id}.eml"` })
      .type('message/rfc822')
      .send(raw);
  });
  router.get('/inbound/:id/attachments/:n', ...auth, async (req: Request, res: Response) => {
    const { id, n } = validateAttachment({ ...req.params });
    const a = await logged(
      inboundAttachment(await rawOf(res, id), n),
      res.locals.log,
      'inbound attachment parse',
      'debug',
    );
    if (!a) throw notFound('Attachment');
    const name = (a.filename ?? `attachment-${n}`).replace(/[^\w.-]+/g, '_');
    res
      .status(200)
      .set({
        'Cache-Control': 'private, no-store',
        'Content-Disposition': `attachment; filename="${name}"`,
        'X-Content-Type-Options': 'nosniff',
      })
      .type(a.contentType)
      .send(a.content);
  });
}

const errorResponse = (description: string) => ({
  description,
  content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
});
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } };

/** OpenAPI paths of the byte-answering routes (not declared with `route()`). */
export const inboundRawOpenApiPaths = {
  '/inbound/{id}/raw': {
    get: {
      operationId: 'getInboundRaw',
      tags: ['Inbound'],
      summary: 'The received message as it arrived (message/rfc822)',
      security: [{ apiKey: [] }],
      parameters: [idParam],
      responses: {
        200: {
          description: 'The RFC 5322 message',
          content: { 'message/rfc822': { schema: { type: 'string', format: 'binary' } } },
        },
        400: errorResponse('id is not a UUID'),
        401: errorResponse('Missing or invalid key'),
        403: errorResponse('Public key, send-only key, or disabled project'),
        404: errorResponse("Unknown id, another project's message, or no raw message kept"),
      },
    },
  },
  '/inbound/{id}/attachments/{n}': {
    get: {
      operationId: 'getInboundAttachment',
      tags: ['Inbound'],
      summary: 'Attachment n (0-based, as listed) of a received message',
      security: [{ apiKey: [] }],
      parameters: [
        idParam,
        { name: 'n', in: 'path', required: true, schema: { type: 'integer', minimum: 0, maximum: 999 } },
      ],
      responses: {
        200: {
          description: "The attachment's bytes, with its content type",
          content: { 'application/octet-stream': { schema: { type: 'string', format: 'binary' } } },
        },
        400: errorResponse('id is not a UUID, or n is not 0–999'),
        401: errorResponse('Missing or invalid key'),
        403: errorResponse('Public key, send-only key, or disabled project'),
        404: errorResponse("Unknown id, another project's message, no such attachment, or no raw message kept"),
      },
    },
  },
};
