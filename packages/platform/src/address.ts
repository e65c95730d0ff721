/**
 * Email address handling shared by every route that takes an address.
 *
 * Identity is case-insensitive (docs/api/overview.md): a contact is keyed by the lower-cased address, while the stored
 * display form keeps the local part as given (trimmed) with the domain lower-cased.
 *
 * Internationalised addresses: a domain written in Unicode (`user@bücher.de`, IDNA 2008 / UTS #46) is accepted and
 * stored, compared and sent in its ASCII form (`user@xn--bcher-kva.de`, punycode). A local part (before the `@`)
 * must be ASCII: Amazon SES does not support SMTPUTF8 (RFC 6531), so an address such as `jürgen@example.de` could
 * never be sent to or from; it is refused with a message that says so (see {@link NON_ASCII_LOCAL_PART}).
 *
 * Mailbox strings (RFC 5322 §3.4 `name-addr`): `Acme <hello@acme.com>`, `"Acme, Inc." <hello@acme.com>` or a bare
 * address, parsed by `email-addresses` ({@link parseMailbox}).
 *
 * @module
 */
import { domainToASCII } from 'node:url';
import { fullFormats } from 'ajv-formats/dist/formats';
import { parseOneAddress } from 'email-addresses';

/** `{ email, name? }`: one mailbox. */
export interface Mailbox {
  email: string;
  name?: string;
}

declare const normalized: unique symbol;

/**
 * An address that has been through {@link normalizeEmail} (trimmed, domain lower-cased, IDN in punycode). Only
 * `normalizeEmail` makes one, so code that takes a `NormalizedEmail` need not (and should not) normalise again;
 * normalising it again returns the same string. It is a plain string at run time.
 */
export type NormalizedEmail = string & { readonly [normalized]: true };

/** A {@link Mailbox} whose address is normalised ({@link parseMailbox}'s result). */
export interface NormalizedMailbox extends Mailbox {
  email: NormalizedEmail;
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * A domain in its ASCII form: lower-cased, and a Unicode domain converted to punycode (UTS #46 via
 * `url.domainToASCII`, as `/v1/verify` and `POST /domains` do): `Bücher.DE` → `xn--bcher-kva.de`.
 *
 * @returns the ASCII domain, or `undefined` when a Unicode domain cannot be converted (not a valid IDN).
 */
export function asciiDomain(domain: string): string | undefined {
  const lower = domain.toLowerCase();
  if (!NON_ASCII.test(lower)) return lower;
  const ascii = domainToASCII(lower);
  return ascii === '' ? undefined : ascii;
}

/**
 * Trims, lower-cases the domain part and writes an internationalised domain in punycode:
 * `" Ann@Example.COM "` → `"Ann@example.com"`, `"ann@bücher.de"` → `"ann@xn--bcher-kva.de"`. A domain that is not a
 * valid IDN is only lower-cased (validation has refused such an address before it is stored).
 */
export function normalizeEmail(email: string): NormalizedEmail {
  const trimmed = email.trim();
  const at = trimmed.lastIndexOf('@');
  if (at < 0) return trimmed as NormalizedEmail;
  const domain = trimmed.slice(at + 1);
  return (trimmed.slice(0, at) + '@' + (asciiDomain(domain) ?? domain.toLowerCase())) as NormalizedEmail;
}

/** The identity key of an address: the whole normalised address lower-cased. */
export function emailKey(email: string): string {
  return normalizeEmail(email).toLowerCase();
}

/** The identity key of an address already normalised: {@link emailKey} without normalising a second time. */
export function normalizedKey(email: NormalizedEmail): string {
  return email.toLowerCase();
}

/** The lower-cased ASCII (punycode) domain of an address (`""` when there is none). */
export function emailDomain(email: string): string {
  const at = email.lastIndexOf('@');
  if (at < 0) return '';
  const domain = email.slice(at + 1).trim();
  return asciiDomain(domain) ?? domain.toLowerCase();
}

/**
 * True when `domain` equals `verified` or is a subdomain of it (SES lets a verified domain identity send from
 * its subdomains).
 */
export function domainCovers(verified: string, domain: string): boolean {
  const v = verified.toLowerCase();
  const d = domain.toLowerCase();
  return d === v || d.endsWith('.' + v);
}

/** RFC 5321 §4.5.3.1 size limits of a mailbox, in octets. */
export const ADDRESS_LIMITS = { address: 254, localPart: 64, domain: 253, label: 63 } as const;

/**
 * Checks an address against the size limits of RFC 5321 §4.5.3.1 (as corrected by erratum 1690: a path is at
 * most 256 octets including its angle brackets, so an address is at most 254): the whole address at most 254
 * octets, the local part at most 64, the domain at most 253 with labels of at most 63. Octets are counted in
 * UTF-8, so a non-ASCII address (RFC 6531) is measured as it travels.
 *
 * @param address - an address as given (not trimmed here; callers validate syntax separately).
 * @returns what is too long, in words, or `undefined` when every part fits.
 */
export function addressLengthProblem(address: string): string | undefined {
  const octets = (s: string) => Buffer.byteLength(s, 'utf8');
  if (octets(address) > ADDRESS_LIMITS.address)
    return `must be at most ${ADDRESS_LIMITS.address} characters (RFC 5321)`;
  const at = address.lastIndexOf('@');
  if (at < 0) return undefined;
  if (octets(address.slice(0, at)) > ADDRESS_LIMITS.localPart) {
    return `local part must be at most ${ADDRESS_LIMITS.localPart} characters (RFC 5321)`;
  }
  const domain = address.slice(at + 1);
  if (octets(domain) > ADDRESS_LIMITS.domain)
    return `domain must be at most ${ADDRESS_LIMITS.domain} characters (RFC 5321)`;
  if (domain.split('.').some((label) => octets(label) > ADDRESS_LIMITS.label)) {
    return `domain labels must be at most ${ADDRESS_LIMITS.label} characters (RFC 1035)`;
  }
  return undefined;
}

/** What is said, wherever an address is taken, about a local part that is not ASCII. */
export const NON_ASCII_LOCAL_PART =
  'must have only ASCII characters before the @: Amazon SES does not support SMTPUTF8 (RFC 6531), so such an address ' +
  'can never be sent to or from (internationalised domains after the @ are accepted and sent in punycode)';

const emailSyntax = fullFormats.email as RegExp;

/**
 * Why `address` cannot be used as an email address, or `undefined` when it can. Checked on its ASCII form (the
 * domain in punycode, as it travels): a non-ASCII local part ({@link NON_ASCII_LOCAL_PART}), a domain that is not
 * a valid IDN, the syntax of ajv-formats' `email` format, then RFC 5321's size limits ({@link addressLengthProblem}).
 */
export function addressProblem(address: string): string | undefined {
  const at = address.lastIndexOf('@');
  if (at > 0 && NON_ASCII.test(address.slice(0, at))) return NON_ASCII_LOCAL_PART;
  const domain = at < 0 ? undefined : asciiDomain(address.slice(at + 1));
  if (at < 0 || domain === undefined) return 'must be a valid email';
  const ascii = address.slice(0, at) + '@' + domain;
  // Lengths first: the syntax regex has no length bound of its own, and a long address should say it is long.
  return addressLengthProblem(ascii) ?? (emailSyntax.test(ascii) ? undefined : 'must be a valid email');
}

/** Whether `address` is a usable email address (see {@link addressProblem}). */
export function isEmailAddress(address: string): boolean {
  return addressProblem(address) === undefined;
}

/** Longest mailbox string parsed (characters): a display name of 200 plus a 254-octet address, with room to spare. */
export const MAILBOX_MAX_LENGTH = 500;

/** What a mailbox string that cannot be read is told. */
export const MAILBOX_FORMS = 'must be an email address or a mailbox such as "Acme <hello@acme.com>" (RFC 5322)';

/**
 * Parses a mailbox string (RFC 5322 §3.4): a bare address (`hello@acme.com`), or a display name with the address
 * in angle brackets (`Acme <hello@acme.com>`, `"Acme, Inc." <hello@acme.com>`, `<hello@acme.com>`); display names
 * may be UTF-8 (RFC 6532); comments are ignored. Groups and lists are not mailboxes.
 *
 * @returns the normalised address ({@link normalizeEmail}: domain lower-cased, IDN in punycode) with the trimmed
 *   display name when there is one, or the reason it is refused (in words, for a field error).
 */
export function parseMailbox(input: string): { ok: true; mailbox: NormalizedMailbox } | { ok: false; reason: string } {
  const text = input.trim();
  if (text.length > MAILBOX_MAX_LENGTH)
    return { ok: false, reason: `must be at most ${MAILBOX_MAX_LENGTH} characters` };
  if (!text.includes('<')) {
    const problem = addressProblem(text);
    return problem
      ? { ok: false, reason: problem === 'must be a valid email' ? MAILBOX_FORMS : problem }
      : { ok: true, mailbox: { email: normalizeEmail(text) } };
  }
  const parsed = parseOneAddress({ input: text, rfc6532: true, rejectTLD: false });
  if (!parsed || parsed.type !== 'mailbox') {
    return { ok: false, reason: MAILBOX_FORMS };
  }
  const problem = addressProblem(parsed.address);
  if (problem) return { ok: false, reason: problem === 'must be a valid email' ? MAILBOX_FORMS : problem };
  const name = parsed.name?.trim();
  return { ok: true, mailbox: { email: normalizeEmail(parsed.address), ...(name ? { name } : {}) } };
}

// RFC 5322 atext plus space: a display name of only these needs no quotes.
const PLAIN_PHRASE = /^[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~ ]+$/;

/**
 * Writes a mailbox as a header-ready string: the bare address without a name, else `Name <address>` with the name
 * quoted (RFC 5322 quoted-string) when it holds anything beyond atext and spaces. Non-ASCII names are left for
 * the MIME builder to encode (RFC 2047).
 */
export function formatMailbox(m: Mailbox): string {
  if (!m.name) return m.email;
  const name = PLAIN_PHRASE.test(m.name) ? m.name : `"${m.name.replace(/(["\\])/g, '\\$1')}"`;
  return `${name} <${m.email}>`;
}

/**
 * Reads a sender given as a mailbox string together with an optional explicit name field (templates' and
 * campaigns' `fromName`, `/v1/send`'s `name`): the explicit field wins over the display name, even when it is
 * `null` (which clears the name).
 *
 * @returns the normalised address and the name to store (`undefined`: neither was given).
 * @throws never: call it on a value the `mailbox` format has accepted; an unreadable value comes back as given.
 */
export function senderFromMailbox(
  from: string,
  explicitName?: string | null,
): { email: string; name: string | null | undefined } {
  const parsed = parseMailbox(from);
  const mailbox = parsed.ok ? parsed.mailbox : { email: normalizeEmail(from) };
  return { email: mailbox.email, name: explicitName !== undefined ? explicitName : mailbox.name };
}

/**
 * Applies the mailbox forms of a sender's fields (templates, campaigns): a `from` written as
 * `"Acme <hello@acme.com>"` becomes `from: "hello@acme.com"` and, unless `fromName` is given (a `null` clears it),
 * `fromName: "Acme"`; a `replyTo` mailbox keeps its name in RFC 5322 form (`Name <addr>`). Fields not given stay
 * absent; plain addresses pass through normalised.
 */
export function senderFields<T extends { from?: string | null; fromName?: string | null; replyTo?: string | null }>(
  input: T,
): T {
  const out = { ...input };
  if (typeof input.from === 'string') {
    const sender = senderFromMailbox(input.from, input.fromName);
    out.from = sender.email;
    if (sender.name !== undefined) out.fromName = sender.name;
  }
  if (typeof input.replyTo === 'string') {
    const parsed = parseMailbox(input.replyTo);
    if (parsed.ok) out.replyTo = formatMailbox(parsed.mailbox);
  }
  return out;
}

const HOSTNAME = /^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(\.(?!-)[a-z0-9-]{1,63}(?<!-))*\.[a-z][a-z0-9-]{0,62}$/;

/**
 * A domain name in ASCII (IDNA), lower-cased, without a trailing dot, when it is a valid host name with a
 * top-level domain; else null.
 */
export function asciiHostname(domain: string): string | null {
  const ascii = domainToASCII(domain.trim().toLowerCase().replace(/\.$/, ''));
  return ascii && HOSTNAME.test(ascii) ? ascii : null;
}
