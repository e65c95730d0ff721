/**
 * Accepting transactional email (`POST /v1/send`): resolve template and sender, check everything that can be
 * checked, then write contacts, attachments, email rows and their `queued` timeline entries atomically (one
 * statement, `writeTransactional`, or with other requests' in a batch, `./write-batcher`; in a transaction with the attachments when there are any), and only then enqueue one `send` job per email (`jobId` = email id).
 *
 * The writes go through `db`, which may be the caller's transaction (an idempotent request's); enqueueing is
 * handed to `afterCommit` (alone, or with other requests' in one batch: `./enqueue-batcher`).
 *
 * If enqueueing fails after the commit (Redis down), the request still succeeds: the rows are the truth and the
 * worker's reconciler enqueues them. Nothing is written when any check fails.
 *
 * Each recipient is normalised once, here where it comes in (`NormalizedEmail`); the contact upsert, the
 * suppression lookup, the email row and, through it, the send job and the SES call take it as it is.
 *
 * @module
 */
import { AppError, ErrorCode, validationError, type FieldError } from '@mailroom/platform/errors';
import { attachmentContentType } from '@mailroom/mail/mail';
import { checkCustomHeaders } from '@mailroom/mail/headers';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import { isUuid, newId } from '@mailroom/platform/ids';
import {
  formatMailbox,
  normalizeEmail,
  normalizedKey,
  parseMailbox,
  type Mailbox,
  type NormalizedMailbox,
} from '@mailroom/platform/address';
import { type SendJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { announceWebhookDeliveries } from '@mailroom/queues/enqueue';
import { splitVariables, templateSyntaxErrors, type BodyFormat } from '@mailroom/mail/templates';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from '@mailroom/queues/config';
import { type KeyMode } from '@mailroom/platform/keys';
import { type Logger } from '@mailroom/platform/logger';
import { getTemplate } from '@mailroom/db/queries/templates';
import { insertAttachments } from '@mailroom/db/queries/emails';
import { writeAlone, type TransactionalWriter } from './write-batcher';
import { enqueueSends, type SendEnqueuer } from './enqueue-batcher';
import { type DbOrTx } from '@mailroom/db/client';
import { senderDomainCandidates, senderError, senderRefusal } from '@mailroom/mail/sender';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';

/** Attachment limits of the spec: at most 10 items and 10 MB (decoded) in total. */
export const ATTACHMENT_LIMITS = { count: 10, totalBytes: 10 * 1024 * 1024 } as const;

/** A recipient or sender as the API accepts it: an address or mailbox string (`Ann <ann@x.com>`), or `{ name, email }`. */
export type AddressInput = string | { name?: string; email: string };

/** The validated body of `POST /v1/send`. */
export interface SendRequest {
  to: AddressInput | AddressInput[];
  subject?: string;
  body?: string;
  template?: string;
  from?: AddressInput;
  name?: string;
  reply?: string;
  subscribed?: boolean;
  data?: Record<string, unknown>;
  headers?: Record<string, string>;
  attachments?: { filename: string; content: string; contentType?: string }[];
  type?: BodyFormat;
}

/**
 * The spec's Send result, plus each email's `status` (`queued`, or `suppressed`: stored, never sent) and the
 * list of `suppressed` addresses.
 */
export interface SendResult {
  emails: { contact: { id: string; email: string }; email: string; status: 'queued' | 'suppressed' }[];
  suppressed: string[];
  timestamp: string;
}

/** The one place a recipient or sender of a send request is normalised. */
function mailbox(input: AddressInput): NormalizedMailbox {
  if (typeof input === 'string') {
    // Validated by the `mailbox` format: a bare address or `Name <address>`.
    const parsed = parseMailbox(input);
    return parsed.ok ? parsed.mailbox : { email: normalizeEmail(input) };
  }
  const name = input.name?.trim();
  return { email: normalizeEmail(input.email), ...(name ? { name } : {}) };
}

// A plain character class (linear, no backtracking groups: megabytes of input must not blow the stack).
const BASE64_CHARS = /^[A-Za-z0-9+/]*={0,2}$/;

function decodeAttachments(items: NonNullable<SendRequest['attachments']>) {
  const errors: FieldError[] = [];
  let total = 0;
  const files = items.map((a, i) => {
    const compact = a.content.replace(/\s+/g, '');
    if (compact.length % 4 !== 0 || !BASE64_CHARS.test(compact)) {
      errors.push({ field: `attachments.${i}.content`, message: 'must be base64-encoded', code: 'invalid_string' });
    }
    const content = Buffer.from(compact, 'base64');
    total += content.length;
    return { filename: a.filename, contentType: attachmentContentType(a.filename, a.contentType), content };
  });
  if (total > ATTACHMENT_LIMITS.totalBytes) {
    errors.push({ field: 'attachments', message: `total size ${total} bytes exceeds ${ATTACHMENT_LIMITS.totalBytes} bytes (10 MB)`, code: 'too_big' });
  }
  return { files, errors };
}

/**
 * Accepts a send request for a project.
 *
 * @param mode - the key's mode: `test` stores the emails as test emails (`emails.test`), validated, stored and
 *   rendered exactly as live ones; the worker delivers them to the test sink instead of SES.
 * @throws {@link AppError} 404 (template not in this project), 422 (business rules: sender, content (syntax, size,
 *   nesting depth), headers (`headers.ts`), attachments); Postgres errors propagate (mapped to 503 when it is unreachable).
 */
export async function acceptSend(
  deps: {
    config: QueueConfig & Pick<PlatformConfig, 'queuePrefix'>;
    db: DbOrTx;
    sendQueue: Queue<SendJobPayload>;
    webhookQueue: Queue<WebhookJobPayload>;
    log: Logger;
    redis?: Redis;
    /** Writes the emails (default: alone; the API passes a `transactionalBatcher`). */
    writer?: TransactionalWriter;
    /** Enqueues the send jobs after the commit (default: alone; the API passes a `sendEnqueueBatcher`). */
    enqueuer?: SendEnqueuer;
  },
  projectId: string,
  req: SendRequest,
  afterCommit: (fn: () => Promise<void>) => void,
  mode: KeyMode = 'live',
): Promise<SendResult> {
  const { db } = deps;
  const test = mode === 'test';
  const errors: FieldError[] = [];

  let template: Awaited<ReturnType<typeof getTemplate>>;
  if (req.template !== undefined) {
    template = isUuid(req.template) ? await getTemplate(db, projectId, req.template) : undefined;
    if (!template) throw new AppError(ErrorCode.NOT_FOUND, 'Template not found');
  }

  const subject = req.subject ?? template?.subject;
  const body = req.body ?? template?.body;
  if (subject === undefined) errors.push({ field: 'subject', message: 'is required when no template is given', code: 'invalid_type' });
  if (body === undefined) errors.push({ field: 'body', message: 'is required when no template is given', code: 'invalid_type' });

  const fromInput: Mailbox | undefined = req.from !== undefined ? mailbox(req.from) : template?.from ? { email: template.from } : undefined;
  const fromName = req.name?.trim() || fromInput?.name || (req.from === undefined ? template?.fromName : undefined) || undefined;
  const replyTo = (req.reply !== undefined ? formatMailbox(mailbox(req.reply)) : undefined) ?? template?.replyTo ?? undefined;
  if (!fromInput) {
    errors.push({ field: 'from', message: 'is required unless the template has a from address', code: 'invalid_type' });
  }

  const contentField = (key: 'subject' | 'body') => (req[key] === undefined ? 'template' : key);
  errors.push(...templateSyntaxErrors({ subject, body }, (key) => contentField(key as 'subject' | 'body')));
  errors.push(...contentLimitErrors({ subject, body }, req.type ?? 'html', { subject: contentField('subject'), body: contentField('body') }));
  // A MARKETING template's mail carries the platform's unsubscribe pair and bulk headers (headers.ts).
  const marketing = template?.type === 'MARKETING';
  if (req.headers) errors.push(...checkCustomHeaders(req.headers, { marketing }));
  const decoded = req.attachments ? decodeAttachments(req.attachments) : { files: [], errors: [] };
  errors.push(...decoded.errors);

  // Without other errors the sender is checked by the write itself (one round trip fewer); with them, here, so that
  // the 422 lists every problem.
  const checkSenderInWrite = fromInput !== undefined && errors.length === 0;
  if (fromInput && !checkSenderInWrite && !errors.some((e) => e.field === 'from')) {
    const problem = await senderError(db, projectId, fromInput.email);
    if (problem) errors.push(problem);
  }
  if (errors.length > 0) throw validationError(errors);

  const recipients = new Map<string, NormalizedMailbox>();
  for (const r of (Array.isArray(req.to) ? req.to : [req.to]).map(mailbox)) {
    const key = normalizedKey(r.email);
    if (!recipients.has(key)) recipients.set(key, r);
  }
  const { render, persist } = splitVariables(req.data);
  const format: BodyFormat = req.type ?? 'html';

  const write = async (tx: DbOrTx) => {
    const attachmentIds = await insertAttachments(tx, projectId, decoded.files);
    const list = [...recipients.values()].map((r) => ({ id: newId(), email: r.email, emailKey: normalizedKey(r.email), name: r.name ?? null }));
    const w = await (deps.writer ?? writeAlone)(tx, {
      projectId,
      contacts: list.map((r) => ({ email: r.email, subscribed: req.subscribed, defaultSubscribed: false, data: persist })),
      recipients: list,
      content: {
        templateId: template?.id ?? null,
        // A MARKETING template's mail carries the unsubscribe link and List-Unsubscribe (RFC 8058).
        marketing,
        fromEmail: fromInput!.email,
        fromName: fromName ?? null,
        replyTo: replyTo ?? null,
        subject: subject!,
        body: body!,
        bodyFormat: format,
        variables: render,
        headers: req.headers ?? {},
        attachmentIds,
        test,
      },
      webhookTimestamp: new Date().toISOString(),
      senderDomains: checkSenderInWrite ? senderDomainCandidates(fromInput.email) : undefined,
    });
    if (w.senderRefused) throw validationError([senderRefusal(fromInput!.email)]);
    const rows = list.map((r) => ({ id: r.id, toEmail: r.email, suppressed: w.suppressed.has(r.emailKey), contact: w.contacts.get(r.emailKey)! }));
    return { rows, deliveries: w.deliveries };
  };
  // Without attachments the write is one statement, atomic on its own: no transaction of ours around it.
  const written = decoded.files.length === 0 ? await write(db) : await db.transaction(write);
  const queued = written.rows.filter((row) => !row.suppressed);

  afterCommit(async () => {
    await announceWebhookDeliveries(deps.webhookQueue, deps.config, written.deliveries, deps.log);
    if (queued.length === 0) return;
    // Never throws: on failure (Redis down) it logs, and the reconciler enqueues the committed rows later.
    const request = { projectId, emailIds: queued.map((row) => row.id), log: deps.log };
    await (deps.enqueuer ? deps.enqueuer(request) : enqueueSends(deps, [request]));
  });

  return {
    emails: written.rows.map((row) => ({ contact: { id: row.contact.id, email: row.contact.email }, email: row.id, status: row.suppressed ? 'suppressed' : 'queued' })),
    suppressed: written.rows.filter((row) => row.suppressed).map((row) => row.toEmail),
    timestamp: new Date().toISOString(),
  };
}

