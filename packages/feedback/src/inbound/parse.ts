/**
 * A received message parsed for storage (mailparser), defensively: the message comes from anyone on the Internet.
 * Hostile structure (a header block over 256 KB, multipart nested past {@link INBOUND_LIMITS}) is refused before
 * the parser runs, the parser gets a deadline, and every string is made storable (no U+0000, no lone surrogate:
 * Postgres refuses both), so a hostile message becomes an error record, never an error that SNS would retry forever.
 *
 * @module
 */
import { simpleParser, type AddressObject, type ParsedMail } from 'mailparser';
import type { InboundAttachmentInfo } from '@mailroom/db/schema/inbound';
import { errorMessage } from '@mailroom/platform/errors';

/** Bounds of what is parsed. */
export const INBOUND_LIMITS = {
  /** Bytes before the blank line that ends the header block. */
  headerBytes: 256 * 1024,
  /** `multipart/*` containers in the whole message (nesting is at most this deep). */
  multiparts: 32,
  /** How long the parser may take (ms). */
  parseMs: 10_000,
  /** Characters kept of the text and of the HTML body each. */
  bodyChars: 2_000_000,
} as const;

/** Thrown for a message that is refused or cannot be parsed; its message is stored on the error record. */
export class InboundParseError extends Error {
  override name = 'InboundParseError';
}

/** What is stored of a parsed message. */
export interface ParsedInbound {
  messageId: string | null;
  fromEmail: string | null;
  fromName: string | null;
  to: string[];
  cc: string[];
  subject: string | null;
  text: string | null;
  html: string | null;
  headers: { name: string; value: string }[];
  attachments: InboundAttachmentInfo[];
  /** Message-IDs this one answers, without brackets: In-Reply-To first, then References from the last. */
  references: string[];
}

/** A string Postgres stores as text and in jsonb: no U+0000, no lone surrogate. */
export function storable(s: string): string {
  return s
    .replace(/\u0000/g, '')
    .replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

const addresses = (a: AddressObject | AddressObject[] | undefined): string[] =>
  (Array.isArray(a) ? a : a ? [a] : [])
    .flatMap((o) =>
      o.value.flatMap((v) =>
        v.address
          ? [storable(v.address.toLowerCase())]
          : (v.group ?? []).flatMap((g) => (g.address ? [storable(g.address.toLowerCase())] : [])),
      ),
    )
    .slice(0, 1000);

const ids = (v: string | string[] | undefined): string[] =>
  (Array.isArray(v) ? v : v ? v.split(/\s+/) : [])
    .map((x) => x.trim().replace(/^<|>$/g, ''))
    .filter((x) => x.includes('@'));

/**
 * Parses a received message.
 *
 * @throws {@link InboundParseError} for a header block over 256 KB, more than 32 multipart containers, a parser
 *   error, or a parse that outlasts its deadline.
 */
export async function parseInbound(raw: Buffer): Promise<ParsedInbound> {
  const end = raw.indexOf('\r\n\r\n') >= 0 ? raw.indexOf('\r\n\r\n') : raw.indexOf('\n\n');
  if ((end < 0 ? raw.length : end) > INBOUND_LIMITS.headerBytes)
    throw new InboundParseError(`header block over ${INBOUND_LIMITS.headerBytes} bytes`);
  const multiparts = raw.toString('latin1').match(/content-type:\s*multipart\//gi)?.length ?? 0;
  if (multiparts > INBOUND_LIMITS.multiparts)
    throw new InboundParseError(`more than ${INBOUND_LIMITS.multiparts} multipart containers`);
  let timer: NodeJS.Timeout | undefined;
  let mail: ParsedMail;
  try {
    mail = await Promise.race([
      simpleParser(raw, { skipImageLinks: true, skipTextLinks: true, skipTextToHtml: true }),
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(new InboundParseError(`parsing took over ${INBOUND_LIMITS.parseMs} ms`)),
          INBOUND_LIMITS.parseMs,
        );
      }),
    ]);
  } catch (err) {
    throw err instanceof InboundParseError ? err : new InboundParseError(`unparsable message: ${errorMessage(err)}`);
  } finally {
    clearTimeout(timer);
  }
  const from = mail.from?.value.find((v) => v.address);
  const inReplyTo = ids(mail.inReplyTo);
  const references = ids(mail.references).reverse();
  return {
    messageId: mail.messageId ? storable(mail.messageId).slice(0, 998) : null,
    fromEmail: from?.address ? storable(from.address.toLowerCase()) : null,
    fromName: from?.name ? storable(from.name).slice(0, 998) : null,
    to: addresses(mail.to),
    cc: addresses(mail.cc),
    subject: mail.subject !== undefined ? storable(mail.subject).slice(0, 998) : null,
    text: mail.text !== undefined ? storable(mail.text).slice(0, INBOUND_LIMITS.bodyChars) : null,
    html: typeof mail.html === 'string' ? storable(mail.html).slice(0, INBOUND_LIMITS.bodyChars) : null,
    headers: mail.headerLines.slice(0, 1000).map((h) => {
      const colon = h.line.indexOf(':');
      return {
        name: storable(h.line.slice(0, Math.max(colon, 0))),
        value: storable(
          h.line
            .slice(colon + 1)
            .replace(/\r?\n(?=[ \t])/g, '')
            .trim(),
        ),
      };
    }),
    attachments: mail.attachments.slice(0, 1000).map((a) => ({
      filename: a.filename ? storable(a.filename).slice(0, 255) : null,
      contentType: storable(a.contentType || 'application/octet-stream'),
      size: a.size,
      contentId: a.contentId ? storable(a.contentId) : null,
    })),
    references: [...new Set([...inReplyTo, ...references])],
  };
}

/**
 * Attachment `n` (0-based, in the order {@link parseInbound} lists them) of a stored message, or `undefined`.
 *
 * @throws {@link InboundParseError} when the message does not parse again (it did when it was stored).
 */
export async function inboundAttachment(
  raw: Buffer,
  n: number,
): Promise<{ filename: string | null; contentType: string; content: Buffer } | undefined> {
  let mail: ParsedMail;
  try {
    mail = await simpleParser(raw, {
      skipImageLinks: true,
      skipTextLinks: true,
      skipTextToHtml: true,
      skipHtmlToText: true,
    });
  } catch (err) {
    throw new InboundParseError(`unparsable message: ${errorMessage(err)}`);
  }
  const a = mail.attachments[n];
  return a
    ? { filename: a.filename ?? null, contentType: a.contentType || 'application/octet-stream', content: a.content }
    : undefined;
}
