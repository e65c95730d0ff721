/**
 * The domain refresher: every `DOMAIN_REFRESH_MS`, re-checks pending sending domains (least recently checked first,
 * 50 per pass) with the identity provider (SES `GetEmailIdentity`, or the DNS records themselves locally), and
 * records when each became verified or failed (`refreshPendingDomains` of `@mailroom/mail/domains`); then the custom
 * tracking domains of verified domains not ready yet (`refreshTrackingDomains` of `@mailroom/mail/domain-tracking`).
 *
 * Runs as the `domains` maintenance task (see `maintenance.ts`).
 *
 * @module
 */
import type { Config } from '@mailroom/config/config';
import type { DomainIdentityProvider } from '@mailroom/mail/identities';
import type { Logger } from '@mailroom/platform/logger';
import { refreshPendingDomains } from '@mailroom/mail/domains';
import { refreshTrackingDomains } from '@mailroom/mail/domain-tracking';
import { createTrackingSetProvider } from '@mailroom/mail/tracking';
import { connectionClientConfig } from '@mailroom/mail/connections';
import { createResolver } from '@mailroom/verify/dns';
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

/** One pass: pending domains, then tracking domains not ready. @returns how many were checked. */
export async function refreshDomainsOnce(deps: DomainRefresherDeps): Promise<number> {
  const { config } = deps;
  const identities = await refreshPendingDomains(
    { db: deps.database.db, identities: deps.identities, logger: deps.logger },
    config.domainRefreshMs,
    PER_PASS,
  );
  const tracking = await refreshTrackingDomains(
    {
      db: deps.database.db,
      connections: config.sesConnections,
      resolver: createResolver(config),
      sets: (c) => createTrackingSetProvider(config, connectionClientConfig(c)),
      logger: deps.logger,
    },
    config.domainRefreshMs,
    PER_PASS,
  );
  return identities + tracking;
}

/** The refresher as a maintenance task: every `DOMAIN_REFRESH_MS`, one pass per interval across all processes. */
export function domainsTask(deps: DomainRefresherDeps): MaintenanceTask {
  return oncePerInterval(
    'domains',
    deps.config.domainRefreshMs,
    async () => ({ checked: await refreshDomainsOnce(deps) }),
    1000,
  );
}
