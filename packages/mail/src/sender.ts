/**
 * The sender rule of the spec: a `from` address must be on a verified sending domain of the project (a verified
 * domain also covers its subdomains). Shared by `/v1/send`, templates' use and campaigns.
 *
 * @module
 */
import { domainCovers, emailDomain } from '@mailroom/platform/address';
import { AppError, ErrorCode, type FieldError } from '@mailroom/platform/errors';
import { verifiedDomains } from '@mailroom/projects/queries/projects';
import { type DbOrTx } from '@mailroom/db/client';

/**
 * Checks a sender address.
 *
 * @param field - the request field to name in the error (`from`).
 * @returns the field error, or `undefined` when the address may be used.
 */
export async function senderError(
  db: DbOrTx,
  projectId: string,
  fromEmail: string,
  field = 'from',
): Promise<FieldError | undefined> {
  const domain = emailDomain(fromEmail);
  const verified = await verifiedDomains(db, projectId);
  if (verified.some((v) => domainCovers(v, domain))) return undefined;
  return senderRefusal(fromEmail, field);
}

/** The field error {@link senderError} gives for an address on no verified domain of the project. */
export function senderRefusal(fromEmail: string, field = 'from'): FieldError {
  return {
    field,
    message: `the domain ${emailDomain(fromEmail)} is not a verified sending domain of this project`,
    code: 'custom',
  };
}

/**
 * The (lower-case) verified domains that would cover the sender's domain: the domain itself and each of its
 * parents (`a.b.example.com` → `a.b.example.com`, `b.example.com`, `example.com`, `com`). A verified domain `v`
 * covers the sender exactly when `lower(v)` is one of them (the rule of `domainCovers`), so a statement can check
 * the sender itself (`lower(domain) = any(candidates)`) instead of a separate lookup.
 */
export function senderDomainCandidates(fromEmail: string): string[] {
  const d = emailDomain(fromEmail).toLowerCase();
  const out = [d];
  for (let i = d.indexOf('.'); i >= 0; i = d.indexOf('.', i + 1)) out.push(d.slice(i + 1));
  return out;
}

/**
 * The rule of a key restricted to sending domains (`api_keys.allowed_domains`): its mail's sender must be on one
 * of them (each covers its subdomains, as a verified domain does). Checked besides the verified-domain rule, never
 * instead of it.
 *
 * @param allowedDomains - the key's domains; null or undefined: the key is not restricted.
 * @returns 403 `KEY_DOMAIN_FORBIDDEN` naming the sender's domain, or `undefined` when the key may send from it.
 */
export function keyDomainRefusal(
  fromEmail: string,
  allowedDomains: readonly string[] | null | undefined,
): AppError | undefined {
  if (!allowedDomains) return undefined;
  const domain = emailDomain(fromEmail);
  if (allowedDomains.some((v) => domainCovers(v, domain))) return undefined;
  return new AppError(
    ErrorCode.KEY_DOMAIN_FORBIDDEN,
    `This key may not send from the domain ${domain}: it is restricted to ${allowedDomains.join(', ')}`,
    {
      suggestion: "Send from one of the key's domains, or use a key allowed to send from this one.",
    },
  );
}
