/**
 * MIME composition with nodemailer's MailComposer: RFC 5322 messages with a text and an HTML part
 * (multipart/alternative, RFC 2046), attachments (multipart/mixed), custom headers, and non-ASCII header text
 * encoded per RFC 2047. Header values can never break out of their line: custom headers are checked here
 * (names per RFC 5322 §3.6.8, no CR/LF in values) and the composer folds and encodes every value.
 *
 * @module
 */
import MailComposer from 'nodemailer/lib/mail-composer';
import { detectMimeType } from 'nodemailer/lib/mime-funcs';
import type { FieldError } from '@mailroom/platform/errors';
import type { Mailbox } from '@mailroom/platform/address';

/** Headers the platform sets itself; a request may not override them. Compared lower-case. */
export const RESERVED_HEADERS = new Set([
  'from',
  'to',
  'cc',
  'bcc',
  'subject',
  'date',
  'message-id',
  'mime-version',
  'content-type',
  'content-transfer-encoding',
  'content-disposition',
  'content-id',
  'reply-to',
  'sender',
  'return-path',
  'received',
  'dkim-signature',
]);

/** RFC 5322 field-name: printable US-ASCII except colon. */
const HEADER_NAME = /^[!-9;-~]+$/;

/** Max custom headers per email, and max bytes of one value. */
export const HEADER_LIMITS = { count: 50, valueBytes: 2_000 } as const;

/**
 * Checks custom headers of a send request.
 *
 * @returns field errors (`headers.<name>`), empty when all are acceptable.
 */
export function checkCustomHeaders(headers: Record<string, unknown>): FieldError[] {
  const errors: FieldError[] = [];
  const entries = Object.entries(headers);
  if (entries.length > HEADER_LIMITS.count) {
    errors.push({ field: 'headers', message: `at most ${HEADER_LIMITS.count} headers`, code: 'too_big' });
  }
  for (const [name, value] of entries) {
    const field = `headers.${name}`;
    if (!HEADER_NAME.test(name) || name.length > 100) {
      errors.push({ field, message: 'is not a valid header name (printable ASCII, no colon or space)', code: 'invalid_string' });
    } else if (RESERVED_HEADERS.has(name.toLowerCase())) {
      errors.push({ field, message: 'is set by the platform and cannot be overridden', code: 'custom' });
    } else if (typeof value !== 'string') {
      errors.push({ field, message: 'must be a string', code: 'invalid_type' });
    } else if (/[\r\n\0]/.test(value)) {
      errors.push({ field, message: 'must not contain line breaks or NUL', code: 'invalid_string' });
    } else if (Buffer.byteLength(value) > HEADER_LIMITS.valueBytes) {
      errors.push({ field, message: `must be at most ${HEADER_LIMITS.valueBytes} bytes`, code: 'too_big' });
    }
  }
  return errors;
}

/** The content type of an attachment: the one given, else derived from the file name's extension. */
export function attachmentContentType(filename: string, given?: string): string {
  return given ?? detectMimeType(filename) ?? 'application/octet-stream';
}

/** One attachment of an outgoing message. */
export interface MimeAttachment {
  filename: string;
  content: Buffer;
  contentType: string;
}

/** Everything needed to compose one message. */
export interface MimeMessage {
  from: Mailbox;
  to: Mailbox;
  replyTo?: string | null;
  subject: string;
  html: string;
  text: string;
  /** Custom headers, already checked by {@link checkCustomHeaders}. */
  headers?: Record<string, string>;
  attachments?: MimeAttachment[];
  /** Message-ID without angle brackets, e.g. `0190…@example.com`; a retry reuses it, so receivers can dedupe. */
  messageId: string;
  /** Date header; defaults to now. */
  date?: Date;
}

/**
 * Builds the raw RFC 5322 message.
 *
 * @returns the message bytes (CRLF line endings), ready for SES `SendEmail` `Content.Raw.Data`.
 */
export async function buildMime(message: MimeMessage): Promise<Buffer> {
  const composer = new MailComposer({
    from: message.from.name ? { name: message.from.name, address: message.from.email } : message.from.email,
    to: message.to.name ? { name: message.to.name, address: message.to.email } : message.to.email,
    replyTo: message.replyTo ?? undefined,
    subject: message.subject,
    html: message.html,
    text: message.text,
    messageId: `<${message.messageId}>`,
    date: message.date ?? new Date(),
    headers: message.headers,
    attachments: (message.attachments ?? []).map((a) => ({
      filename: a.filename,
      content: a.content,
      contentType: a.contentType,
    })),
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  return composer.compile().build();
}
