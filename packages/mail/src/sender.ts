/**
 * The sender rule of the spec: a `from` address must be on a verified sending domain of the project (a verified
 * domain also covers its subdomains). Shared by `/v1/send`, templates' use and campaigns.
 *
 * @module
 */
import { domainCovers, emailDomain } from '@mailroom/platform/address';
import { type FieldError } from '@mailroom/platform/errors';
import { verifiedDomains } from '@mailroom/db/queries/projects';
import { type DbOrTx } from '@mailroom/db/client';

/**
 * Checks a sender address.
 *
 * @param field - the request field to name in the error (`from`).
 * @returns the field error, or `undefined` when the address may be used.
 */
export async function senderError(db: DbOrTx, projectId: string, fromEmail: string, field = 'from'): Promise<FieldError | undefined> {
  const domain = emailDomain(fromEmail);
  const verified = await verifiedDomains(db, projectId);
  if (verified.some((v) => domainCovers(v, domain))) return undefined;
  return { field, message: `the domain ${domain} is not a verified sending domain of this project`, code: 'custom' };
}
