/**
 * Sending domains as the API and the worker's refresher use them. Every query is scoped by project, except the
 * refresher's scan of pending domains (it then updates each by id).
 *
 * @module
 */
import { and, asc, eq, inArray, isNull, lt, or, sql } from 'drizzle-orm';
import type { DomainRecord } from '@mailroom/db/schema/domain-record';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { likePattern } from '@mailroom/db/queries/like';
import { campaigns, domains, type DomainStatus } from '@mailroom/db/schema';

export type DomainRow = typeof domains.$inferSelect;

/**
 * Inserts a pending domain with its records. @returns the row, or `taken` when any project (this one included)
 * has it already.
 */
export async function insertDomain(
  db: DbOrTx,
  projectId: string,
  d: { domain: string; mailFromDomain: string; dkimTokens: string[]; records: DomainRecord[] },
): Promise<{ ok: true; domain: DomainRow } | { ok: false }> {
  const [row] = await db
    .insert(domains)
    .values({
      projectId,
      domain: d.domain,
      mailFromDomain: d.mailFromDomain,
      dkimTokens: d.dkimTokens,
      records: d.records,
      status: 'pending',
    })
    .onConflictDoNothing({ target: domains.domain })
    .returning();
  return row ? { ok: true, domain: row } : { ok: false };
}

/** Whether any project has registered `domain`. */
export async function domainTaken(db: DbOrTx, domain: string): Promise<boolean> {
  const [row] = await db.select({ id: domains.id }).from(domains).where(eq(domains.domain, domain));
  return row !== undefined;
}

/** A domain of the project, or `undefined`. */
export async function getDomain(db: DbOrTx, projectId: string, id: string): Promise<DomainRow | undefined> {
  const [row] = await db
    .select()
    .from(domains)
    .where(and(eq(domains.projectId, projectId), eq(domains.id, id)));
  return row;
}

/** One keyset page of the project's domains, newest first, optionally only (un)verified ones. */
export function listDomains(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string; verified?: boolean },
) {
  return keysetList(
    db,
    domains,
    and(eq(domains.projectId, projectId), q.verified === undefined ? undefined : eq(domains.verified, q.verified)),
    q,
  );
}

/**
 * Records a check: status and per-record state (`verified` follows the status: a generated column);
 * `verifiedAt` / `failedAt` keep when the domain first reached that state.
 */
export async function recordDomainCheck(
  db: DbOrTx,
  id: string,
  check: { status: DomainStatus; records: DomainRecord[]; reason?: string },
): Promise<DomainRow | undefined> {
  const verified = check.status === 'verified';
  const [row] = await db
    .update(domains)
    .set({
      status: check.status,
      records: check.records,
      checkedAt: new Date(),
      verifiedAt: verified ? sql`coalesce(${domains.verifiedAt}, now())` : null,
      failedAt: check.status === 'failed' ? sql`coalesce(${domains.failedAt}, now())` : null,
      failureReason: check.status === 'failed' ? (check.reason ?? null) : null,
    })
    .where(eq(domains.id, id))
    .returning();
  return row;
}

/**
 * Pending domains with a registered identity (DKIM tokens; operator-added domains have none) not checked for
 * `olderThanMs`, least recently checked first (the worker's refresh).
 */
export async function duePendingDomains(db: DbOrTx, olderThanMs: number, limit: number): Promise<DomainRow[]> {
  return db
    .select()
    .from(domains)
    .where(
      and(
        eq(domains.status, 'pending'),
        sql`cardinality(${domains.dkimTokens}) > 0`,
        or(isNull(domains.checkedAt), lt(domains.checkedAt, new Date(Date.now() - olderThanMs))),
      ),
    )
    .orderBy(asc(domains.checkedAt))
    .limit(limit);
}

/**
 * The first SCHEDULED, SENDING or PAUSED campaign of the project whose sender is on `domain` or a subdomain of it, or
 * `undefined`: such a domain cannot be removed.
 */
export async function campaignUsingDomain(
  db: DbOrTx,
  projectId: string,
  domain: string,
): Promise<{ id: string; status: string } | undefined> {
  const [row] = await db
    .select({ id: campaigns.id, status: campaigns.status })
    .from(campaigns)
    .where(
      and(
        eq(campaigns.projectId, projectId),
        inArray(campaigns.status, ['SCHEDULED', 'SENDING', 'PAUSED']),
        sql`(lower(split_part(${campaigns.fromEmail}, '@', 2)) = ${domain} or lower(split_part(${campaigns.fromEmail}, '@', 2)) like ${likePattern(`.${domain}`, 'endsWith')})`,
      ),
    )
    .limit(1);
  return row;
}

/** Turns receiving on or off for a domain of the project. @returns the domain, or `undefined` when it is not the project's. */
export async function setDomainInbound(
  db: DbOrTx,
  projectId: string,
  id: string,
  enabled: boolean,
): Promise<DomainRow | undefined> {
  const [row] = await db
    .update(domains)
    .set({ inboundEnabled: enabled })
    .where(and(eq(domains.projectId, projectId), eq(domains.id, id)))
    .returning();
  return row;
}

/** Deletes a domain of the project. @returns whether it existed. */
export async function deleteDomain(db: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(domains)
    .where(and(eq(domains.projectId, projectId), eq(domains.id, id)))
    .returning({ id: domains.id });
  return rows.length > 0;
}

/**
 * Sets (or, with null, clears) the custom tracking domain of a domain of the project, with its records (the
 * tracking CNAME replaced); the domain is not ready until its CNAME is found and its configuration sets are made.
 * @returns the domain, or `undefined` when it is not the project's.
 */
export async function setDomainTracking(
  db: DbOrTx,
  projectId: string,
  id: string,
  trackingDomain: string | null,
  records: DomainRecord[],
): Promise<DomainRow | undefined> {
  const [row] = await db
    .update(domains)
    .set({ trackingDomain, trackingReadyAt: null, trackingConnection: null, records })
    .where(and(eq(domains.projectId, projectId), eq(domains.id, id)))
    .returning();
  return row;
}

/**
 * Records a check of a domain's tracking domain: its records (the tracking CNAME's state), and once it is ready the
 * delivery connection its configuration sets were made on. Only while the tracking domain is still `trackingDomain`
 * (a change meanwhile wins).
 */
export async function recordTrackingCheck(
  db: DbOrTx,
  id: string,
  trackingDomain: string,
  records: DomainRecord[],
  ready: { connection: string } | null,
): Promise<DomainRow | undefined> {
  const [row] = await db
    .update(domains)
    .set({
      records,
      checkedAt: new Date(),
      ...(ready ? { trackingReadyAt: new Date(), trackingConnection: ready.connection } : {}),
    })
    .where(and(eq(domains.id, id), eq(domains.trackingDomain, trackingDomain)))
    .returning();
  return row;
}

/** Verified domains whose tracking domain is not ready, not checked for `olderThanMs` (the worker's refresh). */
export async function dueTrackingDomains(db: DbOrTx, olderThanMs: number, limit: number): Promise<DomainRow[]> {
  return db
    .select()
    .from(domains)
    .where(
      and(
        sql`${domains.trackingDomain} is not null and ${domains.trackingReadyAt} is null`,
        eq(domains.status, 'verified'),
        or(isNull(domains.checkedAt), lt(domains.checkedAt, new Date(Date.now() - olderThanMs))),
      ),
    )
    .orderBy(asc(domains.checkedAt))
    .limit(limit);
}
