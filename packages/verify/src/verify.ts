/**
 * Email verification (`POST /v1/verify`): is an address worth mailing?
 *
 * - Syntax: RFC 5322 addr-spec by `email-addresses` (quoted local parts; UTF-8 per RFC 6532), a domain that is a
 *   valid host name once converted to ASCII (IDNA/punycode, `url.domainToASCII`), length limits of RFC 5321
 *   (local part ≤ 64, address ≤ 254 octets).
 * - Lists, all maintained packages matched on the registrable domain (public suffix list, `tldts`), so
 *   `x.mailinator.com` counts: disposable (`disposable-email-domains-js`, the disposable-email-domains project's
 *   blocklist, curated against its allowlist), personal provider (`free-email-domains`), role accounts
 *   (`role-based-email-addresses`), and our list of relay/alias services.
 * - Typos: `@zootools/email-spell-checker` (popular domains and TLDs). A near miss of a popular or free provider is always
 *   a typo; another suggestion (a TLD fix) only when the domain as written cannot receive mail.
 * - DNS (`DomainDns`): MX; no MX falls back to A/AAAA (implicit MX, RFC 5321 §5.1); a null MX (RFC 7505) means
 *   the domain accepts no mail.
 *
 * `valid` is false for bad syntax, a domain that does not exist, or a domain that cannot receive mail (null MX, or
 * neither MX nor address records). Disposable, role, alias and typo addresses stay valid but are flagged. When
 * DNS does not answer in time the mail-exchange check is unknown: `valid` then reflects what could be checked,
 * and `reasons` says so.
 *
 * @module
 */
import { asciiHostname } from '@mailroom/platform/address';
import { parseOneAddress } from 'email-addresses';
import { getDomain } from 'tldts';
import { disposableEmailBlocklistSet } from 'disposable-email-domains-js';
import freeEmailDomains from 'free-email-domains';
import roleAddresses from 'role-based-email-addresses';
import { POPULAR_DOMAINS, run as suggestDomain } from '@zootools/email-spell-checker';

/** What `POST /v1/verify` answers (the spec's fields, plus `suggestion` and `isRoleAccount`: docs/api/overview.md). */
export interface VerificationResult {
  email: string;
  valid: boolean;
  isDisposable: boolean;
  isAlias: boolean;
  isTypo: boolean;
  isPlusAddressed: boolean;
  isPersonalEmail: boolean;
  isRoleAccount: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  /** The corrected address when the domain looks misspelled, else null. */
  suggestion: string | null;
  /** Plain-words explanation of every false or risky flag. */
  reasons: string[];
}

/** What DNS says about a domain (`error`: the lookup could not be completed). */
export interface DomainDns {
  domainExists: boolean;
  /** MX records other than a null MX. */
  mx: string[];
  /** RFC 7505: a single MX of "." */
  nullMx: boolean;
  /** No MX, but A/AAAA records (RFC 5321 implicit MX). */
  implicitMx: boolean;
  /** A/AAAA for the domain or `www.` the domain. */
  hasWebsite: boolean;
  error?: 'timeout' | 'failure';
}

/** Looks a domain up (ASCII form). */
export type DnsLookup = (asciiDomain: string) => Promise<DomainDns>;

/** Relay and alias services: addresses there forward to a hidden mailbox. */
export const ALIAS_DOMAINS: ReadonlySet<string> = new Set([
  'privaterelay.appleid.com', // Apple Hide My Email
  'mozmail.com', // Firefox Relay
  'simplelogin.com', // SimpleLogin
  'simplelogin.co',
  'simplelogin.fr',
  'slmail.me',
  'aleeas.com',
  'silomails.com',
  'addy.io', // addy.io (formerly AnonAddy)
  'anonaddy.com',
  'anonaddy.me',
  'duck.com', // DuckDuckGo Email Protection
  'passmail.net', // Proton Pass
  'passmail.com',
  'passinbox.com',
  '33mail.com',
]);

const disposable = disposableEmailBlocklistSet();
const personal = new Set<string>(freeEmailDomains);
const roles = new Set<string>(roleAddresses.map((r) => r.toLowerCase()));
const popularDomains = new Set<string>(POPULAR_DOMAINS);

/** The parts of a syntactically valid address. */
export interface ParsedAddress {
  local: string;
  /** Lower-cased domain as written (may be Unicode). */
  domain: string;
  /** The domain in ASCII (punycode), for DNS. */
  asciiDomain: string;
  /** The registrable domain (public suffix list), ASCII. */
  registrable: string;
}

/**
 * Parses an address. @returns the parts, or the reason it is not a valid address.
 */
export function parseAddress(email: string): { ok: true; address: ParsedAddress } | { ok: false; reason: string } {
  const input = email.trim();
  if (input.length === 0) return { ok: false, reason: 'the address is empty' };
  if (Buffer.byteLength(input) > 254) return { ok: false, reason: 'the address is longer than 254 octets (RFC 5321)' };
  const parsed = parseOneAddress({ input, rfc6532: true, rejectTLD: false });
  if (!parsed || parsed.type !== 'mailbox' || parsed.name !== null || parsed.parts.comments.length > 0) {
    return { ok: false, reason: 'the address is not valid email syntax (RFC 5322)' };
  }
  const local = parsed.local;
  if (Buffer.byteLength(local) > 64)
    return { ok: false, reason: 'the part before @ is longer than 64 octets (RFC 5321)' };
  const domain = parsed.domain.toLowerCase();
  if (domain.startsWith('[')) return { ok: false, reason: 'address literals ([1.2.3.4]) are not accepted' };
  const asciiDomain = asciiHostname(domain);
  if (!asciiDomain) return { ok: false, reason: `"${domain}" is not a valid domain name` };
  return { ok: true, address: { local, domain, asciiDomain, registrable: getDomain(asciiDomain) ?? asciiDomain } };
}

/** Whether a domain (or its registrable domain) is on a set. */
function listed(set: ReadonlySet<string>, a: ParsedAddress): boolean {
  return set.has(a.asciiDomain) || set.has(a.registrable);
}

/** The checks that need no network. */
export function offlineChecks(a: ParsedAddress) {
  const base = a.local.split('+')[0].toLowerCase();
  const suggestion = suggestDomain({ email: `x@${a.asciiDomain}` });
  return {
    isDisposable: listed(disposable, a),
    isAlias: listed(ALIAS_DOMAINS, a),
    isPersonalEmail: listed(personal, a) && !listed(disposable, a),
    isPlusAddressed: a.local.includes('+') && base.length > 0,
    isRoleAccount: roles.has(base),
    typoDomain: suggestion && suggestion.domain !== a.asciiDomain ? suggestion.domain : null,
    typoOfPopular:
      suggestion !== undefined && (popularDomains.has(suggestion.domain) || personal.has(suggestion.domain)),
  };
}

/**
 * Verifies one address.
 *
 * @param dns - DNS lookups (cached by the caller); called once, for the address's ASCII domain.
 */
export async function verifyEmail(email: string, dns: DnsLookup): Promise<VerificationResult> {
  const parsed = parseAddress(email);
  const result: VerificationResult = {
    email: email.trim(),
    valid: false,
    isDisposable: false,
    isAlias: false,
    isTypo: false,
    isPlusAddressed: false,
    isPersonalEmail: false,
    isRoleAccount: false,
    domainExists: false,
    hasWebsite: false,
    hasMxRecords: false,
    suggestion: null,
    reasons: [],
  };
  if (!parsed.ok) {
    result.reasons.push(parsed.reason);
    return result;
  }
  const a = parsed.address;
  const flags = offlineChecks(a);
  Object.assign(result, {
    isDisposable: flags.isDisposable,
    isAlias: flags.isAlias,
    isPersonalEmail: flags.isPersonalEmail,
    isPlusAddressed: flags.isPlusAddressed,
    isRoleAccount: flags.isRoleAccount,
  });
  const reasons = result.reasons;
  if (flags.isDisposable) reasons.push(`${a.registrable} is a disposable (temporary) email service`);
  if (flags.isAlias) reasons.push(`${a.registrable} is a relay service: the address forwards to a hidden mailbox`);
  if (flags.isRoleAccount)
    reasons.push(`"${a.local.split('+')[0]}" is a role account (a team or function, not a person)`);
  if (flags.isPlusAddressed) reasons.push('the address uses a subaddress (+tag)');

  const d = await dns(a.asciiDomain);
  // A near miss of a popular or free provider is a typo even if it resolves (squatters register them); any other
  // suggestion (a TLD fix) only when the domain as written cannot receive mail.
  const receives = !d.error && d.domainExists && !d.nullMx && (d.mx.length > 0 || d.implicitMx);
  if (flags.typoDomain && (flags.typoOfPopular || (!receives && !d.error))) {
    result.isTypo = true;
    result.suggestion = `${a.local}@${flags.typoDomain}`;
    reasons.unshift(`the domain looks like a typo of ${flags.typoDomain}`);
  }
  result.domainExists = d.domainExists;
  result.hasWebsite = d.hasWebsite;
  result.hasMxRecords = d.mx.length > 0;
  if (d.error) {
    reasons.push(
      d.error === 'timeout'
        ? `DNS did not answer in time for ${a.asciiDomain}: whether it can receive mail is unknown`
        : `DNS lookup failed for ${a.asciiDomain}: whether it can receive mail is unknown`,
    );
    result.valid = true;
    return result;
  }
  if (!d.domainExists) {
    reasons.push(`the domain ${a.asciiDomain} does not exist`);
    return result;
  }
  if (d.nullMx) {
    reasons.push(`${a.asciiDomain} publishes a null MX (RFC 7505): it accepts no mail`);
    return result;
  }
  if (d.mx.length === 0 && !d.implicitMx) {
    reasons.push(`${a.asciiDomain} has no MX and no address records: it cannot receive mail`);
    return result;
  }
  if (d.mx.length === 0)
    reasons.push(`${a.asciiDomain} has no MX records; mail goes to its A/AAAA address (RFC 5321 implicit MX)`);
  if (!d.hasWebsite) reasons.push(`${a.asciiDomain} has no website`);
  result.valid = true;
  return result;
}

/** A lookup that asks once per domain for its lifetime (one batch request). */
export function memoizedLookup(lookup: DnsLookup): DnsLookup {
  const seen = new Map<string, Promise<DomainDns>>();
  return (domain) => {
    let p = seen.get(domain);
    if (!p) {
      p = lookup(domain);
      seen.set(domain, p);
    }
    return p;
  };
}

/**
 * Verifies many addresses (`POST /v1/verify/batch`): addresses of one domain share one lookup.
 *
 * @returns the results in input order.
 */
export function verifyEmails(emails: readonly string[], dns: DnsLookup): Promise<VerificationResult[]> {
  const shared = memoizedLookup(dns);
  return Promise.all(emails.map((e) => verifyEmail(e, shared)));
}
