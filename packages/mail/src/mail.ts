/**
 * MIME composition with nodemailer's MailComposer: RFC 5322 messages with a text and an HTML part
 * (multipart/alternative, RFC 2046), attachments (multipart/mixed), inline parts referenced by `cid:` from the HTML
 * (multipart/related, RFC 2387; Content-ID per RFC 2392), custom headers, and non-ASCII header text
 * encoded per RFC 2047. Header values can never break out of their line: custom headers are checked by
 * `headers.ts` (names per RFC 5322 §3.6.8, no CR/LF in values) and the composer folds and encodes every value.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import { detectMimeType } from 'nodemailer/lib/mime-funcs';
import type { HeaderList } from './headers';
import { serializeTree } from './mime-build';
import type { Mailbox } from '@mailroom/platform/address';

/** The content type of an attachment: the one given, else derived from the file name's extension. */
export function attachmentContentType(filename: string, given?: string): string {
  return given ?? detectMimeType(filename) ?? 'application/octet-stream';
}

/** One attachment of an outgoing message. */
export interface MimeAttachment {
  filename: string;
  content: Buffer;
  contentType: string;
  /**
   * Content-ID without angle brackets (RFC 2392): the part is referenced from the HTML as `cid:<contentId>`, and the
   * HTML with such parts becomes multipart/related (RFC 2387).
   */
  contentId?: string | null;
  /** Content-Disposition (RFC 2183); default `inline` with a `contentId`, else `attachment`. */
  disposition?: 'inline' | 'attachment' | null;
}

/** Everything needed to compose one message. */
export interface MimeMessage {
  from: Mailbox;
  to: Mailbox;
  replyTo?: string | null;
  subject: string;
  html: string;
  text: string;
  /** Custom headers in order, already decided by `headers.ts` (`messageHeaders`); an object is taken in key order. */
  headers?: HeaderList | Record<string, string>;
  attachments?: MimeAttachment[];
  /** Message-ID without angle brackets, e.g. `0190…@example.com`; a retry reuses it, so receivers can dedupe. */
  messageId: string;
  /** Date header; defaults to now. */
  date?: Date;
  /**
   * Values that differ from message to message by design (a marketing email's unsubscribe token), left out of the
   * boundary hash ({@link mimeBaseBoundary}), so two builds that differ only there share their boundaries.
   */
  perMessage?: readonly string[];
}

function headerEntries(headers: MimeMessage['headers']): HeaderList {
  if (!headers) return [];
  return Array.isArray(headers) ? (headers as HeaderList) : Object.entries(headers);
}

/**
 * The shared part of the message's multipart boundaries (nodemailer's `baseBoundary`; each part's boundary is
 * `--_NmP-<base>-Part_<n>`): the first 96 bits of a SHA-256 of the content (sender, recipient, reply-to, subject,
 * HTML, text, custom headers, attachments), without the Message-ID, the Date and the `perMessage` values.
 *
 * Deterministic, so one request built twice (a test key's send and a live one, a retry) gives the same bytes apart
 * from Message-ID and Date; nodemailer's default is 8 random bytes per message. RFC 2046 §5.1.1 asks only that a
 * boundary not occur in the encapsulated parts: a part would have to contain the hash of its own content
 * (`perMessage` values aside), which no content can be made to do (2^96 tries per attempt).
 */
export function mimeBaseBoundary(message: MimeMessage): string {
  const perMessage = (message.perMessage ?? []).filter((x) => x);
  const strip = (v: string): string => perMessage.reduce((s, x) => (s.includes(x) ? s.split(x).join('') : s), v);
  const hash = createHash('sha256');
  const field = (v: string | Buffer) => {
    // Length-prefixed (UTF-8 bytes): no two different field lists hash the same bytes. A string is hashed as its
    // UTF-8 bytes without being copied into a Buffer first.
    if (typeof v === 'string') {
      const s = strip(v);
      hash.update(`${Buffer.byteLength(s)}:`).update(s);
    } else hash.update(`${v.length}:`).update(v);
  };
  for (const v of [
    message.from.name ?? '',
    message.from.email,
    message.to.name ?? '',
    message.to.email,
    message.replyTo ?? '',
    message.subject,
    message.html,
    message.text,
  ])
    field(v);
  const headers = headerEntries(message.headers);
  field(String(headers.length));
  for (const [name, value] of headers) [name, value].forEach((v) => field(v));
  const attachments = message.attachments ?? [];
  field(String(attachments.length));
  for (const a of attachments) {
    [a.filename, a.contentType, a.content].forEach((v) => field(v));
    // Only when set, so a plain attachment's boundaries are what they were before inline parts existed.
    if (a.contentId || a.disposition) field(`inline:${a.contentId ?? ''}:${a.disposition ?? ''}`);
  }
  return hash.digest('hex').slice(0, 24);
}

type ComposerOptions = ConstructorParameters<typeof MailComposer>[0] & { baseBoundary: string };

/** MailComposer's options for `message` (one definition for the synchronous build and the streamed reference). */
function composerOptions(message: MimeMessage): ComposerOptions {
  // `baseBoundary` is read by MailComposer (it passes it to every multipart node) but not in its typings.
  return {
    from: message.from.name ? { name: message.from.name, address: message.from.email } : message.from.email,
    to: message.to.name ? { name: message.to.name, address: message.to.email } : message.to.email,
    replyTo: message.replyTo ?? undefined,
    subject: message.subject,
    html: message.html,
    text: message.text,
    messageId: `<${message.messageId}>`,
    date: message.date ?? new Date(),
    headers: headerEntries(message.headers).map(([key, value]) => ({ key, value })),
    attachments: (message.attachments ?? []).map((a) => ({
      filename: a.filename,
      content: a.content,
      contentType: a.contentType,
      ...(a.contentId ? { cid: a.contentId } : {}),
      contentDisposition: a.disposition ?? (a.contentId ? ('inline' as const) : ('attachment' as const)),
    })),
    disableFileAccess: true,
    disableUrlAccess: true,
    baseBoundary: mimeBaseBoundary(message),
  };
}

/**
 * Builds the raw RFC 5322 message. Its boundaries follow from its content ({@link mimeBaseBoundary}): the same
 * content gives the same bytes apart from Message-ID and Date.
 *
 * nodemailer's MailComposer compiles the MIME tree; the tree is written synchronously (`./mime-build`: no stream
 * per part, and the text and HTML parts a campaign's emails share are encoded once), to the very bytes nodemailer's
 * own streamed build gives ({@link buildMimeStreamed}, kept as the reference the tests compare against).
 *
 * @returns the message bytes (CRLF line endings), ready for SES `SendEmail` `Content.Raw.Data`.
 * @throws the composer's error when the message cannot be built.
 */
export async function buildMime(message: MimeMessage): Promise<Buffer> {
  const options = composerOptions(message);
  const bytes = serializeTree(
    new MailComposer(options).compile(),
    (message.perMessage ?? []).filter((x) => x),
  );
  // A tree only nodemailer's stream can write (none of the trees built here): a fresh one, streamed.
  return bytes ?? new MailComposer(options).compile().build();
}

/**
 * The reference build: the same message as {@link buildMime}, through nodemailer's streamed `build()` (the way
 * every message was built before the synchronous writer). For the equivalence tests and the compose benchmark.
 *
 * @returns the message bytes (CRLF line endings).
 */
export async function buildMimeStreamed(message: MimeMessage): Promise<Buffer> {
  return new MailComposer(composerOptions(message)).compile().build();
}
