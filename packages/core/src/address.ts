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
