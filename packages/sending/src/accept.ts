/**
 * Accepting transactional email (`POST /v1/send`): resolve template and sender, check everything that can be
 * checked, then write contacts, attachments, email rows and their `queued` timeline entries atomically (one
 * statement, `writeTransactional`, or with other requests' in a batch, `./write-batcher`, storing small attachments itself; in a transaction with large attachments), and only then enqueue one `send` job per email (`jobId` = email id).
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
import { emailTagErrors, storedTags, type EmailTag } from '@mailroom/platform/email-tags';
import { attachmentType, attachmentTypeErrors, contentIdErrors } from '@mailroom/mail/attachment-types';
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
import { splitVariables, templateSyntaxErrors, type BodyFormat } from '@mailroom/mail/templates';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from '@mailroom/queues/config';
import { type KeyMode } from '@mailroom/projects/keys';
import { type Logger } from '@mailroom/platform/logger';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { insertAttachments } from './queries/emails';
import { writeAlone, type TransactionalWriter } from './write-batcher';
import { type SendEnqueuer } from './enqueue-batcher';
import { type DbOrTx } from '@mailroom/db/client';
import type { TransactionalContent, TransactionalWrite } from './queries/transactional';
import type { TransactionalRequest } from './queries/transactional-batch';
import { keyDomainRefusal, senderDomainCandidates, senderError, senderRefusal } from '@mailroom/mail/sender';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { scheduledTime } from './schedule';
import { enqueueAccepted, sendResult, type SendResult, type WrittenEmails } from './accept-enqueue';

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
  attachments?: AttachmentInput[];
  type?: BodyFormat;
  /** Open and click tracking of this send; unset: the template's, else the project's `trackingMode`. */
  tracking?: boolean;
  /** When to send (ISO 8601 date-time, at most 30 days ahead; not in the future: now). See `./schedule`. */
  scheduledAt?: string;
  /** `{ name, value }` tags (`@mailroom/platform/email-tags`). */
  tags?: EmailTag[];
}

/** One attachment of a send request: base64 content; a `contentId` makes it an inline part (`cid:` in the HTML). */
export interface AttachmentInput {
  filename: string;
  content: string;
  contentType?: string;
  /** Content-ID (RFC 2392) without angle brackets, unique within the email. */
  contentId?: string;
  /** Default: `inline` with a `contentId`, else `attachment`. */
  disposition?: 'inline' | 'attachment';
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
  const errors: FieldError[] = attachmentTypeErrors(items);
  let total = 0;
  const files = items.map((a, i) => {
    const compact = a.content.replace(/\s+/g, '');
    if (compact.length % 4 !== 0 || !BASE64_CHARS.test(compact)) {
      errors.push({ field: `attachments.${i}.content`, message: 'must be base64-encoded', code: 'invalid_string' });
    }
    const content = Buffer.from(compact, 'base64');
    total += content.length;
    return {
      filename: a.filename,
      contentType: attachmentType(a.filename, a.contentType),
      content,
      contentId: a.contentId ?? null,
      disposition: a.disposition ?? null,
    };
  });
  errors.push(...contentIdErrors(items));
  if (total > ATTACHMENT_LIMITS.totalBytes) {
    errors.push({
      field: 'attachments',
      message: `total size ${total} bytes exceeds ${ATTACHMENT_LIMITS.totalBytes} bytes (10 MB)`,
      code: 'too_big',
    });
  }
  return { files, errors };
}

/** Where {@link prepareSend} and {@link acceptSend} read and write, and what enqueues after the commit. */
export interface AcceptDeps {
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
}

/**
 * Accepts a send request for a project: {@link prepareSend}, {@link writeAccepted}, then {@link enqueueAccepted}.
 *
 * @param mode - the key's mode: `test` stores the emails as test emails (`emails.test`), validated, stored and
 *   rendered exactly as live ones; the worker delivers them to the test sink instead of SES.
 * @param allowedDomains - the sending domains of a key restricted to some (null: not restricted).
 * @throws {@link AppError} as {@link prepareSend}, and 422 on `from` when the write's sender check refused it;
 *   Postgres errors propagate (mapped to 503 when it is unreachable).
 */
export async function acceptSend(
  deps: AcceptDeps,
  projectId: string,
  req: SendRequest,
  afterCommit: (fn: () => Promise<void>) => void,
  mode: KeyMode = 'live',
  allowedDomains: readonly string[] | null = null,
): Promise<SendResult> {
  const input = await prepareSend(deps.db, projectId, req, mode, allowedDomains);
  const written = await writeAccepted(deps, projectId, input);
  enqueueAccepted(deps, projectId, written, afterCommit, input.content.fromEmail);
  return sendResult(written);
}

/**
 * Checks a send request (schema-valid already) and resolves what it writes: the template, the sender, the
 * content, headers, attachments and tags, and the distinct recipients. Reads only (the template; the sender's
 * domain when another check failed already, so that the 422 lists every problem; otherwise the write checks it).
 *
 * @throws {@link AppError} 403 `KEY_DOMAIN_FORBIDDEN` (sender outside the key's domains), 404 (template not in this
 *   project), 422 (business rules: sender, content (syntax, size, nesting depth), headers (`headers.ts`),
 *   attachments, tags (a name twice, a reserved name)).
 */
export async function prepareSend(
  db: DbOrTx,
  projectId: string,
  req: SendRequest,
  mode: KeyMode = 'live',
  allowedDomains: readonly string[] | null = null,
): Promise<AcceptedEmails> {
  const test = mode === 'test';
  const errors: FieldError[] = [];

  let template: Awaited<ReturnType<typeof getTemplate>>;
  if (req.template !== undefined) {
    template = isUuid(req.template) ? await getTemplate(db, projectId, req.template) : undefined;
    if (!template) throw new AppError(ErrorCode.NOT_FOUND, 'Template not found');
  }

  const subject = req.subject ?? template?.subject;
  const body = req.body ?? template?.body;
  if (subject === undefined)
    errors.push({ field: 'subject', message: 'is required when no template is given', code: 'invalid_type' });
  if (body === undefined)
    errors.push({ field: 'body', message: 'is required when no template is given', code: 'invalid_type' });

  const fromInput: Mailbox | undefined =
    req.from !== undefined ? mailbox(req.from) : template?.from ? { email: template.from } : undefined;
  const fromName =
    req.name?.trim() || fromInput?.name || (req.from === undefined ? template?.fromName : undefined) || undefined;
  const replyTo =
    (req.reply !== undefined ? formatMailbox(mailbox(req.reply)) : undefined) ?? template?.replyTo ?? undefined;
  if (!fromInput) {
    errors.push({ field: 'from', message: 'is required unless the template has a from address', code: 'invalid_type' });
  } else {
    const refused = keyDomainRefusal(fromInput.email, allowedDomains);
    if (refused) throw refused;
  }

  const contentField = (key: 'subject' | 'body') => (req[key] === undefined ? 'template' : key);
  errors.push(...templateSyntaxErrors({ subject, body }, (key) => contentField(key as 'subject' | 'body')));
  errors.push(
    ...contentLimitErrors({ subject, body }, req.type ?? 'html', {
      subject: contentField('subject'),
      body: contentField('body'),
    }),
  );
  // A MARKETING template's mail carries the platform's unsubscribe pair and bulk headers (headers.ts).
  const marketing = template?.type === 'MARKETING';
  if (req.headers) errors.push(...checkCustomHeaders(req.headers, { marketing }));
  errors.push(...emailTagErrors(req.tags));
  const decoded = req.attachments ? decodeAttachments(req.attachments) : { files: [], errors: [] };
  errors.push(...decoded.errors);
  const schedule = scheduledTime(req.scheduledAt);
  errors.push(...schedule.errors);

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

  return {
    recipients: [...recipients.values()],
    subscribed: req.subscribed,
    data: persist,
    content: {
      templateId: template?.id ?? null,
      templateVersion: template?.version ?? null,
      // A MARKETING template's mail carries the unsubscribe link and List-Unsubscribe (RFC 8058).
      marketing,
      // The send's tracking, else its template's; null: the project's mode decides (in the write).
      tracking: req.tracking ?? template?.tracking ?? null,
      fromEmail: fromInput!.email,
      fromName: fromName ?? null,
      replyTo: replyTo ?? null,
      subject: subject!,
      body: body!,
      bodyFormat: format,
      variables: render,
      headers: req.headers ?? {},
      test,
      scheduledAt: schedule.at,
      tags: storedTags(req.tags),
    },
    files: decoded.files,
    senderDomains: checkSenderInWrite ? senderDomainCandidates(fromInput.email) : undefined,
  };
}

/** What one accepted request writes: its recipients (distinct), their contact upsert, the content all share. */
export interface AcceptedEmails {
  /** Distinct recipients (by normalised key), one email each. */
  recipients: NormalizedMailbox[];
  /** `subscribed` as the request stated it (undefined: unchanged for existing contacts, false for new ones). */
  subscribed?: boolean;
  /** Contact data to merge (`persist` of `splitVariables`). */
  data?: Record<string, unknown>;
  content: Omit<TransactionalContent, 'attachmentIds'>;
  /** Stored once, referenced by every email (a relayed message's bytes are one `message/rfc822` file). */
  files: {
    filename: string;
    contentType: string;
    content: Buffer;
    contentId?: string | null;
    disposition?: 'inline' | 'attachment' | null;
  }[];
  /** When given, the write checks the sender itself (see `writeTransactional`). */
  senderDomains?: string[];
  /**
   * An idempotency key the write claims itself (`idempotency` of `TransactionalRequest`), in the same statement,
   * storing as its answer `statusCode` and {@link StoredEmails} (the ids of the emails written).
   */
  idempotency?: { key: string; fingerprint: string; statusCode: number };
}

/** The answer stored with an idempotency key claimed by {@link writeAccepted}: the emails it wrote. */
export interface StoredEmails {
  emailIds: string[];
}

/** Rolls back a transaction whose idempotency key turned out held (its large files inserted first). */
class KeyHeld extends Error {}

/**
 * Files up to this many bytes in all (a relayed message, small attachments) are stored by the write statement
 * itself, which then stays one statement that concurrent requests share (`./write-batcher`); larger ones are
 * inserted first, in a transaction with the write (bytea arrays travel as hex text: twice their size).
 */
export const INLINE_FILE_BYTES = 256 * 1024;

/**
 * Writes an accepted request's contacts, files and emails atomically (the one write of `/v1/send` and the SMTP
 * relay): one statement, alone or batched through `deps.writer`, storing the files itself when they are at most
 * {@link INLINE_FILE_BYTES}; larger files are inserted in a transaction with the write. `inTransaction`: `db` is
 * the caller's transaction (the files inserted first, then the write, alone, in it).
 *
 * @throws {@link AppError} 422 on `from` when the write's sender check refused it; the database's error.
 */
export async function writeAccepted(
  deps: { db: DbOrTx; writer?: TransactionalWriter },
  projectId: string,
  input: AcceptedEmails,
  inTransaction = false,
): Promise<WrittenEmails> {
  // In the caller's transaction the write is not shared anyway: the files go in first, and the write is the lean
  // one-request statement (the batch statement for one request measured slower there).
  const inline = !inTransaction && input.files.reduce((n, f) => n + f.content.length, 0) <= INLINE_FILE_BYTES;
  const write = async (tx: DbOrTx): Promise<WrittenEmails> => {
    const attachmentIds = inline ? undefined : await insertAttachments(tx, projectId, input.files);
    const { request, list } = transactionalRequest(projectId, input, attachmentIds);
    const w = await (deps.writer ?? writeAlone)(tx, request);
    if (w.keyHeld) {
      // Our own transaction holds large files inserted first: rolled back. (A caller's transaction is the caller's.)
      if (!inline && !inTransaction) throw new KeyHeld();
      return { rows: [], deliveries: [], keyHeld: true, scheduledAt: null };
    }
    if (w.senderRefused) throw validationError([senderRefusal(input.content.fromEmail)]);
    return writtenEmails(list, w, input.content.scheduledAt ?? null);
  };
  // Files stored by the statement (or none): the write is one statement, atomic on its own.
  if (inline || inTransaction) return write(deps.db);
  return deps.db.transaction(write).catch((err: unknown) => {
    if (err instanceof KeyHeld) return { rows: [], deliveries: [], keyHeld: true as const, scheduledAt: null };
    throw err;
  });
}

/** A recipient of {@link transactionalRequest}, with its email's id and contact key. */
type RecipientRow = { id: string; email: NormalizedMailbox['email']; emailKey: string; name: string | null };

/**
 * The data layer's request for one accepted request: a new email id per recipient, and the files stored by the
 * statement itself (`attachmentIds` undefined) or already inserted (their ids).
 */
export function transactionalRequest(
  projectId: string,
  input: AcceptedEmails,
  attachmentIds?: string[],
): { request: TransactionalRequest; list: RecipientRow[] } {
  const files = attachmentIds ? [] : input.files.map((f) => ({ ...f, id: newId() }));
  const list = input.recipients.map((r) => ({
    id: newId(),
    email: r.email,
    emailKey: normalizedKey(r.email),
    name: r.name ?? null,
  }));
  const request: TransactionalRequest = {
    projectId,
    contacts: list.map((r) => ({
      email: r.email,
      subscribed: input.subscribed,
      defaultSubscribed: false,
      data: input.data,
    })),
    recipients: list,
    content: { ...input.content, attachmentIds: attachmentIds ?? files.map((f) => f.id) },
    webhookTimestamp: new Date().toISOString(),
    senderDomains: input.senderDomains,
    ...(files.length > 0 ? { files } : {}),
    ...(input.idempotency
      ? { idempotency: { ...input.idempotency, response: { emailIds: list.map((r) => r.id) } satisfies StoredEmails } }
      : {}),
  };
  return { request, list };
}

/** What the data layer's write of {@link transactionalRequest}'s request wrote, per recipient. */
export function writtenEmails(
  list: RecipientRow[],
  w: TransactionalWrite,
  scheduledAt: Date | null = null,
): WrittenEmails {
  const rows = list.map((r) => ({
    id: r.id,
    toEmail: r.email,
    suppressed: w.suppressed.get(r.emailKey),
    contact: w.contacts.get(r.emailKey)!,
  }));
  return { rows, deliveries: w.deliveries, scheduledAt };
}
