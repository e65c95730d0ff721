/**
 * The domain refresher: every `DOMAIN_REFRESH_MS`, re-checks pending sending domains (least recently checked first,
 * 50 per pass) with the identity provider (SES `GetEmailIdentity`, or the DNS records themselves locally), and
 * records when each became verified or failed (`refreshPendingDomains` of `@mailroom/mail/domains`).
 *
 * Runs as the `domains` maintenance task (see `maintenance.ts`).
 *
 * @module
 */
import type { Config } from '@mailroom/config/config';
import type { DomainIdentityProvider } from '@mailroom/mail/identities';
import type { Logger } from '@mailroom/platform/logger';
import { refreshPendingDomains } from '@mailroom/mail/domains';
import { type Database } from '@mailroom/db/client';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

const PER_PASS = 50;

/** Dependencies of the refresher. */
export interface DomainRefresherDeps {
  config: Config;
  database: Database;
  identities: DomainIdentityProvider;
  logger: Logger;
}

/** One pass. @returns how many domains were checked. */
export async function refreshDomainsOnce(deps: DomainRefresherDeps): Promise<number> {
  return refreshPendingDomains({ db: deps.database.db, identities: deps.identities, logger: deps.logger }, deps.config.domainRefreshMs, PER_PASS);
}

/** The refresher as a maintenance task: every `DOMAIN_REFRESH_MS`, one pass per interval across all processes. */
export function domainsTask(deps: DomainRefresherDeps): MaintenanceTask {
  return oncePerInterval('domains', deps.config.domainRefreshMs, async () => ({ checked: await refreshDomainsOnce(deps) }), 1000);
}
