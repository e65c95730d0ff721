/**
 * The From and Subject of a message submitted to the SMTP relay, read from its header block (`./headers`) as a
 * mail reader shows them, without parsing the message: the fields unfolded (RFC 5322 §2.2.3), 8-bit bytes read
 * as UTF-8 (RFC 6532), RFC 2047 encoded words decoded (`libmime`), the From field's mailboxes parsed by
 * nodemailer's `addressparser`: the same libraries and rules mailparser applies to these two fields, for a
 * fraction of its cost (it parses the whole message as a stream).
 *
 * @module
 */
import libmime from 'libmime';
import addressparser from 'nodemailer/lib/addressparser';
import type { HeaderField, SplitMessage } from './headers';

// An RFC 2047 encoded word.
const ENCODED_WORD = /=\?[^?]+\?[BbQq]\?[^?]*\?=/;

/** A field's value: unfolded, trimmed, its bytes (read as latin1 by `splitMessage`) taken as UTF-8. */
function fieldValue(field: HeaderField): string {
  const value = field.raw
    .slice(field.raw.indexOf(':') + 1)
    .replace(/(?:\r?\n|\r)[ \t]*/g, ' ')
    .trim();
  return Buffer.from(value, 'latin1').toString('utf8');
}

function decodeWords(text: string): string {
  try {
    return libmime.decodeWords(text);
  } catch {
    return text;
  }
}

/** The first field of that name (lower case) whose value is not empty, as {@link fieldValue}. */
function firstValue(split: SplitMessage, name: string): string | undefined {
  for (const f of split.fields) {
    if (f.name.toLowerCase() !== name) continue;
    const value = fieldValue(f);
    if (value) return value;
  }
  return undefined;
}

/**
 * The one mailbox of the message's one From field (RFC 5322 §3.6.2), its display name decoded; an encoded word in
 * the address itself (which RFC 2047 §5 forbids) counts only if it decodes to a plain `local@domain`.
 *
 * @returns `undefined` when the message has no From field or several, or the field names no address, several,
 *   or a group.
 */
export function relayFrom(split: SplitMessage): { address: string; name: string } | undefined {
  // One From field with one mailbox, nothing else: the sender checks look at this one address, so a second one
  // (another tenant's) must not ride along unchecked.
  const fields = split.fields.filter((f) => f.name.toLowerCase() === 'from');
  if (fields.length !== 1) return undefined;
  const entries = addressparser(fieldValue(fields[0]));
  if (entries.length !== 1) return undefined;
  for (const entry of entries) {
    if (!('address' in entry) || !entry.address) continue;
    let address = entry.address;
    if (ENCODED_WORD.test(address)) {
      const decoded = decodeWords(address);
      address = /^[^\s@]+@[^\s@]+$/.test(decoded) && !/=\?/.test(decoded) ? decoded : '';
      if (!address) continue;
    }
    const name = (entry.name || '').trim();
    return { address, name: name ? decodeWords(name) : '' };
  }
  return undefined;
}

/** The message's Subject (RFC 5322 §3.6.5), decoded; empty when it has none. */
export function relaySubject(split: SplitMessage): string {
  const value = firstValue(split, 'subject');
  return value ? decodeWords(value) : '';
}
