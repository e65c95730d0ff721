/**
 * Custom tracking domains of sending domains: setting one (its CNAME joins the domain's records), and checking it
 * (now, or by the worker's refresher) until its CNAME resolves and the configuration sets that redirect through it
 * exist on the domain's delivery connection (`./tracking`).
 *
 * @module
 */
import type { Resolver } from 'node:dns/promises';
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import { logged, type FailureLevel, type Logger } from '@mailroom/platform/logger';
import type { DomainRecord } from '@mailroom/db/schema/domain-record';
import { boundConnection } from '@mailroom/projects/queries/delivery-connections';
import {
  dueTrackingDomains,
  getDomain,
  recordTrackingCheck,
  setDomainTracking,
  type DomainRow,
} from './queries/domains';
import type { DbOrTx } from '@mailroom/db/client';
import { configurationSetFor, connectionNamed, type SesConnection } from './connections';
import { identityFailure } from './identities';
import {
  parseTrackingDomain,
  trackingConfigurationSetName,
  trackingDomainRecord,
  type TrackingSetProvider,
} from './tracking';

/** What managing tracking domains needs. */
export interface TrackingDeps {
  db: DbOrTx;
  /** The delivery connections (`SES_CONNECTIONS`, `default` first). */
  connections: readonly SesConnection[];
  /** Resolves the tracking CNAME (`DNS_SERVERS`). */
  resolver: Pick<Resolver, 'resolveCname'>;
  /** The configuration-set provider of a connection. */
  sets: (connection: SesConnection) => TrackingSetProvider;
}

async function connectionOf(deps: TrackingDeps, d: DomainRow): Promise<SesConnection> {
  return connectionNamed(deps.connections, d.sesConnection ?? (await boundConnection(deps.db, d.projectId, d.domain)));
}

/**
 * Sets (a subdomain of the domain) or clears (null) the custom tracking domain of the project's domain `id`. The
 * CNAME to publish (`r.<region>.awstrack.me`, the region of the domain's delivery connection) replaces any earlier
 * one in its records; mail keeps SES's shared tracking domain until the new one is ready. The configuration sets made
 * for the previous one are removed.
 *
 * @throws {@link AppError} 404 (no such domain), 422 on `trackingDomain` (not a subdomain of the domain).
 */
export async function setTrackingDomain(
  deps: TrackingDeps & { logger: Pick<Logger, FailureLevel> },
  projectId: string,
  id: string,
  input: string | null,
): Promise<DomainRow> {
  const d = await getDomain(deps.db, projectId, id);
  if (!d) throw notFound('Domain');
  let trackingDomain: string | null = null;
  if (input !== null) {
    const parsed = parseTrackingDomain(d.domain, input);
    if (!parsed.ok)
      throw validationError([{ field: 'trackingDomain', message: parsed.message, code: 'invalid_string' }]);
    trackingDomain = parsed.trackingDomain;
  }
  const kept = d.records.filter((r) => r.purpose !== 'tracking');
  const records: DomainRecord[] = trackingDomain
    ? [...kept, trackingDomainRecord(trackingDomain, (await connectionOf(deps, d)).region)]
    : kept;
  const row = await setDomainTracking(deps.db, projectId, id, trackingDomain, records);
  if (!row) throw notFound('Domain');
  // The sets made for the previous tracking domain are no longer used: removed (best effort; a failure leaves an
  // unused set in SES, nothing else).
  if (d.trackingDomain && d.trackingReadyAt && d.trackingConnection && d.trackingDomain !== trackingDomain) {
    const old = connectionNamed(deps.connections, d.trackingConnection);
    const provider = deps.sets(old);
    for (const base of trackedSets(old))
      await logged(
        provider.remove(trackingConfigurationSetName(base, d.trackingDomain)),
        deps.logger,
        'unused tracking configuration set removal',
      );
  }
  return row;
}

/** The distinct tracked configuration sets of a connection (transactional and marketing). */
function trackedSets(connection: SesConnection): string[] {
  return [
    ...new Set(
      [
        configurationSetFor(connection, 'transactional', true),
        configurationSetFor(connection, 'marketing', true),
      ].filter((n): n is string => n !== undefined),
    ),
  ];
}

/**
 * Checks domain `d`'s tracking domain: whether its CNAME resolves as published and, once it does and the domain is
 * verified, makes the configuration sets (one per tracked set of the domain's connection: transactional and
 * marketing) and marks it ready. A domain without one, or ready already, is returned as it is.
 *
 * @returns the domain as recorded.
 * @throws the set provider's error (the CNAME's state is recorded first).
 */
export async function checkTrackingDomain(deps: TrackingDeps, d: DomainRow): Promise<DomainRow> {
  const trackingDomain = d.trackingDomain;
  if (!trackingDomain || d.trackingReadyAt) return d;
  const record = d.records.find((r) => r.purpose === 'tracking');
  if (!record) return d;
  const norm = (s: string) => s.toLowerCase().replace(/\.$/, '');
  const found = await deps.resolver.resolveCname(record.name).then(
    (values) => values.some((v) => norm(v) === norm(record.value)),
    () => false,
  );
  const records = d.records.map((r) =>
    r.purpose === 'tracking' ? { ...r, status: found ? ('found' as const) : ('pending' as const) } : r,
  );
  if (!found || d.status !== 'verified')
    return (await recordTrackingCheck(deps.db, d.id, trackingDomain, records, null)) ?? d;
  const connection = await connectionOf(deps, d);
  const provider = deps.sets(connection);
  try {
    for (const base of trackedSets(connection))
      await provider.ensure(trackingConfigurationSetName(base, trackingDomain), base, trackingDomain);
  } catch (err) {
    await recordTrackingCheck(deps.db, d.id, trackingDomain, records, null);
    throw err;
  }
  return (await recordTrackingCheck(deps.db, d.id, trackingDomain, records, { connection: connection.name })) ?? d;
}

/**
 * {@link checkTrackingDomain} for a request: the provider's failure as the API's error.
 * @throws {@link AppError} 422 on `trackingDomain` (SES refused the set), 503 (SES did not answer).
 */
export async function checkTrackingDomainNow(deps: TrackingDeps, d: DomainRow): Promise<DomainRow> {
  try {
    return await checkTrackingDomain(deps, d);
  } catch (err) {
    const f = identityFailure(err);
    if (f.kind === 'rejected')
      throw validationError([{ field: 'trackingDomain', message: `refused by SES: ${f.message}`, code: 'custom' }]);
    throw new AppError(ErrorCode.SERVICE_UNAVAILABLE, `SES did not answer: ${f.message}`, {
      suggestion: 'Retry later.',
    });
  }
}

/**
 * One pass of the refresher over tracking domains not ready (of verified domains, not checked for `refreshMs`,
 * least recently checked first, at most `perPass`). A failed check is logged and retried next pass.
 *
 * @returns how many were checked.
 */
export async function refreshTrackingDomains(
  deps: TrackingDeps & { logger: Logger },
  refreshMs: number,
  perPass: number,
): Promise<number> {
  const due = await dueTrackingDomains(deps.db, refreshMs, perPass);
  for (const d of due) {
    try {
      const checked = await checkTrackingDomain(deps, d);
      if (checked.trackingReadyAt)
        deps.logger.info(
          {
            domainId: d.id,
            domain: d.domain,
            trackingDomain: d.trackingDomain,
            connection: checked.trackingConnection,
          },
          'tracking domain ready',
        );
    } catch (err) {
      deps.logger.warn(
        { err, domainId: d.id, trackingDomain: d.trackingDomain },
        'tracking domain check failed; retried next pass',
      );
    }
  }
  return due.length;
}
