/**
 * The domain refresher: every `DOMAIN_REFRESH_MS`, re-checks pending sending domains (least recently checked first,
 * 50 per pass) with the identity provider (SES `GetEmailIdentity`, or the DNS records themselves locally), and
 * records when each became verified or failed.
 *
 * Runs on a timer in every worker process; a Redis lock lets one process do each pass.
 *
 * @module
 */
import type { Redis } from 'ioredis';
import type { Config, DomainIdentityProvider, Logger } from '@mailroom/core';
import { duePendingDomains, recordDomainCheck, type Database } from '@mailroom/db';
import { startLockedTimer } from './timer';

const PER_PASS = 50;

/** Dependencies of the refresher. */
export interface DomainRefresherDeps {
  config: Config;
  database: Database;
  identities: DomainIdentityProvider;
  redis: Redis;
  logger: Logger;
}

/** One pass. @returns how many domains were checked. */
export async function refreshDomainsOnce(deps: DomainRefresherDeps): Promise<number> {
  const due = await duePendingDomains(deps.database.db, deps.config.domainRefreshMs, PER_PASS);
  for (const d of due) {
    try {
      const check = await deps.identities.check(d.domain, d.records);
      await recordDomainCheck(deps.database.db, d.id, check);
      if (check.status !== 'pending') deps.logger.info({ domainId: d.id, domain: d.domain, projectId: d.projectId, status: check.status, reason: check.reason }, 'sending domain checked');
    } catch (err) {
      deps.logger.warn({ err, domainId: d.id, domain: d.domain }, 'sending domain check failed; retried next pass');
    }
  }
  return due.length;
}

/** Starts the refresher. @returns `stop()`, which waits for a running pass. */
export function startDomainRefresher(deps: DomainRefresherDeps): { stop: () => Promise<void> } {
  return startLockedTimer(
    {
      redis: deps.redis,
      lockKey: `${deps.config.queuePrefix}:domain-refresher:lock`,
      intervalMs: deps.config.domainRefreshMs,
      lockMs: Math.max(1000, deps.config.domainRefreshMs - 50),
      release: false,
      logger: deps.logger,
      name: 'domain refresher',
    },
    () => refreshDomainsOnce(deps),
  );
}
