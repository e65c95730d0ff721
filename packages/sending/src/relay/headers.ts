/**
 * The header block of a message submitted to the SMTP relay (RFC 5322 §2.2, §3.6): split from its body, the
 * headers the platform owns taken out, the ones every message must carry added when missing. The body is never
 * touched: the message goes out as its client composed it.
 *
 * @module
 */

/** One header field as it came: its name, and its whole text (folded lines included, CRLF-terminated). */
export interface HeaderField {
  name: string;
  raw: string;
}

/** A message cut at the end of its header block. */
export interface SplitMessage {
  fields: HeaderField[];
  /** Everything after the blank line that ends the header block (empty for a message without a body). */
  body: Buffer;
}

/** Largest header block the relay reads (bytes): beyond it the message is refused, not truncated. */
export const MAX_HEADER_BYTES = 256 * 1024;

/**
 * Splits `raw` at the first empty line (CRLF CRLF, or bare LF LF from a lax client) and reads the header fields,
 * each with its continuation lines (RFC 5322 §2.2.3 folding).
 *
 * @returns `undefined` when the header block is over {@link MAX_HEADER_BYTES} or a line before the blank one is
 *   neither a field (`name:`) nor a continuation.
 */
export function splitMessage(raw: Buffer): SplitMessage | undefined {
  let end = -1;
  let sep = 0;
  const crlf = raw.indexOf('\r\n\r\n');
  const lf = raw.indexOf('\n\n');
  if (crlf >= 0 && (lf < 0 || crlf < lf)) [end, sep] = [crlf + 2, 2];
  else if (lf >= 0) [end, sep] = [lf + 1, 1];
  else [end, sep] = [raw.length, 0];
  if (end > MAX_HEADER_BYTES) return undefined;
  const block = raw.subarray(0, end).toString('latin1');
  const body = raw.subarray(Math.min(raw.length, end + sep));
  const fields: HeaderField[] = [];
  for (const line of block.split(/\r?\n/)) {
    if (line === '') continue;
    if (/^[ \t]/.test(line)) {
      const last = fields[fields.length - 1];
      if (!last) return undefined;
      last.raw += `${line}\r\n`;
      continue;
    }
    const colon = line.indexOf(':');
    const name = colon > 0 ? line.slice(0, colon).trim() : '';
    if (!/^[!-9;-~]+$/.test(name)) return undefined;
    fields.push({ name, raw: `${line}\r\n` });
  }
  return { fields, body };
}

/** The relay's platform-owned header names, lower case (see {@link platformOwnedRelayHeader}). */
const RELAY_PLATFORM_HEADERS: ReadonlySet<string> = new Set([
  'bcc',
  'return-path',
  'received',
  'sender',
  'feedback-id',
  'dkim-signature',
  'authentication-results',
]);

/**
 * Whether a header of a relayed message belongs to the platform, and is taken out before the message is stored:
 *
 * - `Bcc`: its recipients are delivered from the envelope and never disclosed (RFC 5322 §3.6.3);
 * - `X-SES-*`: Amazon SES acts on them (`X-SES-CONFIGURATION-SET`, `X-SES-MESSAGE-TAGS`, the `*-ARN` ones): a
 *   tenant could pick another configuration set, event destination or sending identity;
 * - `Return-Path`, `Received`: written by the transport on delivery (RFC 5321 §4.4), never by the submitter;
 * - `Sender`: an address the sender checks never looked at (RFC 5322 §3.6.2);
 * - `Feedback-ID`, `DKIM-Signature`, `Authentication-Results`, `ARC-*`: written by the platform, SES and the
 *   receivers; a tenant's copy would claim another tenant's complaint feedback or a signature it did not make.
 *
 * The HTTP path's rule for `/v1/send`'s `headers` (`isPlatformHeader` of `@mailroom/mail/headers`) refuses more,
 * because there the platform writes From, To, Subject and the MIME structure itself; here the client wrote them.
 *
 * @param name - a header field name, any case.
 */
export function platformOwnedRelayHeader(name: string): boolean {
  const n = name.toLowerCase();
  return RELAY_PLATFORM_HEADERS.has(n) || n.startsWith('x-ses-') || n.startsWith('arc-');
}

/** The header fields of `split` with that name (case-insensitive), unfolded, without the name. */
export function headerValues(split: SplitMessage, name: string): string[] {
  const n = name.toLowerCase();
  return split.fields
    .filter((f) => f.name.toLowerCase() === n)
    .map((f) =>
      f.raw
        .slice(f.raw.indexOf(':') + 1)
        .replace(/\r?\n(?=[ \t])/g, '')
        .trim(),
    );
}

/** What {@link prepareRelayMessage} made of a message. */
export interface PreparedMessage {
  /** The bytes to store and send. */
  raw: Buffer;
  /** Names of the header fields taken out ({@link platformOwnedRelayHeader}), as they were spelled. */
  removed: string[];
  /** The Message-ID header's value (with its angle brackets), the client's or the one added. */
  messageId: string;
  /** Whether the client's message carried its own Message-ID. */
  clientMessageId: boolean;
}

/**
 * Takes the platform's headers out of a split message and adds what the HTTP path's messages always carry when the
 * client left it out: `Message-ID` (`<id@sender domain>`, RFC 5322 §3.6.4), `Date` (§3.6.1) and `MIME-Version`
 * (RFC 2045 §4). Lines end in CRLF as SES expects; the body is kept byte for byte.
 *
 * @param fallbackMessageId - the Message-ID to add (without brackets) when the message has none.
 */
export function prepareRelayMessage(split: SplitMessage, fallbackMessageId: string, now = new Date()): PreparedMessage {
  const removed: string[] = [];
  const kept = split.fields.filter((f) => {
    if (!platformOwnedRelayHeader(f.name)) return true;
    removed.push(f.name);
    return false;
  });
  const has = (name: string) => kept.some((f) => f.name.toLowerCase() === name);
  const added: string[] = [];
  const given = headerValues({ fields: kept, body: split.body }, 'message-id')[0];
  const messageId = given && /^<[^<>\s]+>$/.test(given) ? given : `<${fallbackMessageId}>`;
  if (!given) added.push(`Message-ID: ${messageId}\r\n`);
  if (!has('date')) added.push(`Date: ${now.toUTCString().replace('GMT', '+0000')}\r\n`);
  if (!has('mime-version')) added.push('MIME-Version: 1.0\r\n');
  const head = Buffer.from([...kept.map((f) => f.raw), ...added].join('') + '\r\n', 'latin1');
  return { raw: Buffer.concat([head, split.body]), removed, messageId, clientMessageId: Boolean(given) };
}
