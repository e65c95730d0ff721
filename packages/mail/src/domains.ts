/**
 * Sending domains of a project: registering the identity (Easy DKIM and a custom MAIL FROM domain) with the
 * records to publish, checking it (now, or by the refresher for pending domains), and removing it, which is
 * refused while a SCHEDULED, SENDING or PAUSED campaign sends from it.
 *
 * Identity provider failures (see {@link identityFailure}): a request SES rejects is the caller's 422 on `domain`;
 * a provider that does not answer (throttled, down, our credentials refused) is 503, and nothing was written.
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import { asciiHostname } from '@mailroom/platform/address';
import type { MailConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';
import {
  campaignUsingDomain,
  deleteDomain,
  domainTaken,
  duePendingDomains,
  getDomain,
  insertDomain,
  recordDomainCheck,
  type DomainRow,
} from './queries/domains';
import { type DbOrTx } from '@mailroom/db/client';
import { domainRecords, identityFailure, type DomainIdentityProvider } from './identities';

/** What managing domains needs. */
export interface DomainDeps {
  db: DbOrTx;
  config: Pick<MailConfig, 'mailFromSubdomain' | 'sesRegion'>;
  identities: DomainIdentityProvider;
}

/**
 * Calls the identity provider.
 *
 * @throws {@link AppError} 422 on `domain` (the provider rejected the request), 503 (it did not answer).
 */
async function callProvider<T>(call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    const f = identityFailure(err);
    if (f.kind === 'rejected')
      throw validationError([
        { field: 'domain', message: `refused by the identity provider: ${f.message}`, code: 'custom' },
      ]);
    throw new AppError(ErrorCode.SERVICE_UNAVAILABLE, `The identity provider did not answer: ${f.message}`, {
      suggestion: 'Retry later.',
    });
  }
}

/**
 * Registers a domain for the project: the identity with MAIL FROM `MAIL_FROM_SUBDOMAIN.<domain>`, and the records to
 * publish. An internationalised name is stored in ASCII (punycode).
 *
 * @returns the new domain, `pending`.
 * @throws {@link AppError} 422 (not a domain name; rejected by the provider), 409 (added already, by any project),
 *   503 (provider unavailable).
 */
export async function addDomain(deps: DomainDeps, projectId: string, name: string, log: Logger): Promise<DomainRow> {
  const { db, config } = deps;
  const domain = asciiHostname(name);
  if (!domain)
    throw validationError([
      { field: 'domain', message: 'must be a domain name such as example.com', code: 'invalid_string' },
    ]);
  if (await domainTaken(db, domain))
    throw new AppError(ErrorCode.CONFLICT, `The domain ${domain} has already been added`);
  const mailFromDomain = `${config.mailFromSubdomain}.${domain}`;
  const { dkimTokens } = await callProvider(() => deps.identities.create(domain, mailFromDomain));
  const records = domainRecords(domain, mailFromDomain, dkimTokens, config.sesRegion);
  const inserted = await insertDomain(db, projectId, { domain, mailFromDomain, dkimTokens, records });
  if (!inserted.ok) {
    // Another request added it meanwhile: the identity is theirs to keep.
    log.warn({ domain }, 'domain added concurrently');
    throw new AppError(ErrorCode.CONFLICT, `The domain ${domain} has already been added`);
  }
  return inserted.domain;
}

/**
 * Checks the project's domain now with the identity provider and records the answer.
 *
 * @returns the domain as recorded.
 * @throws {@link AppError} 404 (no such domain), 422 or 503 (provider).
 */
export async function checkDomain(deps: DomainDeps, projectId: string, id: string): Promise<DomainRow> {
  const d = await getDomain(deps.db, projectId, id);
  if (!d) throw notFound('Domain');
  const check = await callProvider(() => deps.identities.check(d.domain, d.records));
  return (await recordDomainCheck(deps.db, d.id, check)) ?? d;
}

/**
 * Removes the project's domain and its identity.
 *
 * @returns the removed domain.
 * @throws {@link AppError} 404 (no such domain), 409 (a SCHEDULED, SENDING or PAUSED campaign sends from it or a
 *   subdomain), 422 or 503 (provider).
 */
export async function removeDomain(deps: DomainDeps, projectId: string, id: string): Promise<DomainRow> {
  const d = await getDomain(deps.db, projectId, id);
  if (!d) throw notFound('Domain');
  const campaign = await campaignUsingDomain(deps.db, projectId, d.domain);
  if (campaign)
    throw new AppError(
      ErrorCode.CONFLICT,
      `Campaign ${campaign.id} is ${campaign.status} from ${d.domain}; cancel it or wait until it is sent`,
    );
  await callProvider(() => deps.identities.delete(d.domain));
  if (!(await deleteDomain(deps.db, projectId, d.id))) throw notFound('Domain');
  return d;
}

/**
 * One pass of the refresher: re-checks pending domains not checked for `refreshMs` (least recently checked first,
 * at most `perPass`) and records when each became verified or failed. A domain whose check fails is logged and
 * retried next pass.
 *
 * @returns how many domains were checked.
 */
export async function refreshPendingDomains(
  deps: { db: DbOrTx; identities: DomainIdentityProvider; logger: Logger },
  refreshMs: number,
  perPass: number,
): Promise<number> {
  const due = await duePendingDomains(deps.db, refreshMs, perPass);
  for (const d of due) {
    try {
      const check = await deps.identities.check(d.domain, d.records);
      await recordDomainCheck(deps.db, d.id, check);
      if (check.status !== 'pending')
        deps.logger.info(
          { domainId: d.id, domain: d.domain, projectId: d.projectId, status: check.status, reason: check.reason },
          'sending domain checked',
        );
    } catch (err) {
      deps.logger.warn({ err, domainId: d.id, domain: d.domain }, 'sending domain check failed; retried next pass');
    }
  }
  return due.length;
}
