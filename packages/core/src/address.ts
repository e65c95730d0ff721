/**
 * Email address handling shared by every route that takes an address.
 *
 * Identity is case-insensitive (API.md): a contact is keyed by the lower-cased address, while the stored display
 * form keeps the local part as given (trimmed) with the domain lower-cased.
 *
 * @module
 */

/** `{ email, name? }`: one mailbox. */
export interface Mailbox {
  email: string;
  name?: string;
}

/** Trims and lower-cases the domain part: `" Ann@Example.COM "` → `"Ann@example.com"`. */
export function normalizeEmail(email: string): string {
  const trimmed = email.trim();
  const at = trimmed.lastIndexOf('@');
  if (at < 0) return trimmed;
  return trimmed.slice(0, at) + '@' + trimmed.slice(at + 1).toLowerCase();
}

/** The identity key of an address: the whole normalised address lower-cased. */
export function emailKey(email: string): string {
  return normalizeEmail(email).toLowerCase();
}

/** The lower-cased domain of an address (`""` when there is none). */
export function emailDomain(email: string): string {
  const at = email.lastIndexOf('@');
  return at < 0 ? '' : email.slice(at + 1).trim().toLowerCase();
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
  if (octets(address) > ADDRESS_LIMITS.address) return `must be at most ${ADDRESS_LIMITS.address} characters (RFC 5321)`;
  const at = address.lastIndexOf('@');
  if (at < 0) return undefined;
  if (octets(address.slice(0, at)) > ADDRESS_LIMITS.localPart) {
    return `local part must be at most ${ADDRESS_LIMITS.localPart} characters (RFC 5321)`;
  }
  const domain = address.slice(at + 1);
  if (octets(domain) > ADDRESS_LIMITS.domain) return `domain must be at most ${ADDRESS_LIMITS.domain} characters (RFC 5321)`;
  if (domain.split('.').some((label) => octets(label) > ADDRESS_LIMITS.label)) {
    return `domain labels must be at most ${ADDRESS_LIMITS.label} characters (RFC 1035)`;
  }
  return undefined;
}
