/**
 * Projects, API keys and sending domains: the operator-facing data (CLI and `/admin/*`).
 *
 * @module
 */
import { and, eq, gt, isNull, or, sql } from 'drizzle-orm';
import { asciiHostname, generateKey, hashKey, type KeyKind } from '@mailroom/core';
import type { Db, DbOrTx } from '../client';
import { apiKeys, domains, projects } from '../schema';

/** A project with a freshly issued key pair; the keys are shown this once and only their hashes are stored. */
export interface IssuedProject {
  id: string;
  name: string;
  disabled: boolean;
  publicKey: string;
  secretKey: string;
}

async function issueKeys(db: DbOrTx, projectId: string): Promise<{ publicKey: string; secretKey: string }> {
  const publicKey = generateKey('public');
  const secretKey = generateKey('secret');
  await db.insert(apiKeys).values([
    { projectId, kind: 'public', keyHash: hashKey(publicKey), keyPrefix: publicKey.slice(0, 10) },
    { projectId, kind: 'secret', keyHash: hashKey(secretKey), keyPrefix: secretKey.slice(0, 10) },
  ]);
  return { publicKey, secretKey };
}

/** Creates a project and its first key pair. */
export async function createProject(db: Db, name: string): Promise<IssuedProject> {
  return db.transaction(async (tx) => {
    const [project] = await tx.insert(projects).values({ name }).returning();
    const keys = await issueKeys(tx, project!.id);
    return { id: project!.id, name: project!.name, disabled: project!.disabled, ...keys };
  });
}

/**
 * Issues a new key pair; the current keys keep working for `graceHours` (0 = revoked now).
 *
 * @returns the project with the new keys, or `undefined` when the project does not exist.
 */
export async function rotateKeys(db: Db, projectId: string, graceHours: number): Promise<IssuedProject | undefined> {
  return db.transaction(async (tx) => {
    const [project] = await tx.select().from(projects).where(eq(projects.id, projectId)).for('update');
    if (!project) return undefined;
    const expiry = new Date(Date.now() + graceHours * 3_600_000);
    // Keys already expiring keep the earlier of their expiry and the new one.
    await tx
      .update(apiKeys)
      .set({ expiresAt: sql`least(coalesce(${apiKeys.expiresAt}, ${expiry}), ${expiry})` })
      .where(eq(apiKeys.projectId, projectId));
    const keys = await issueKeys(tx, projectId);
    return { id: project.id, name: project.name, disabled: project.disabled, ...keys };
  });
}

/** Disables or enables a project. @returns the project, or `undefined` when it does not exist. */
export async function setProjectDisabled(db: Db, projectId: string, disabled: boolean) {
  const [row] = await db
    .update(projects)
    .set({ disabled, updatedAt: new Date() })
    .where(eq(projects.id, projectId))
    .returning({ id: projects.id, name: projects.name, disabled: projects.disabled });
  return row;
}

/** What authentication needs to know about a presented key. */
export interface KeyRecord {
  projectId: string;
  kind: KeyKind;
  projectDisabled: boolean;
}

/** Looks up an unexpired key by its SHA-256 hash. */
export async function findKey(db: Db, keyHash: string): Promise<KeyRecord | undefined> {
  const [row] = await db
    .select({ projectId: apiKeys.projectId, kind: apiKeys.kind, projectDisabled: projects.disabled, keyHash: apiKeys.keyHash })
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(and(eq(apiKeys.keyHash, keyHash), or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, sql`now()`))));
  return row ? { projectId: row.projectId, kind: row.kind, projectDisabled: row.projectDisabled } : undefined;
}

/** Outcome of {@link addDomain}. */
export type AddDomainResult =
  | { ok: true; domain: typeof domains.$inferSelect }
  | { ok: false; reason: 'taken' | 'invalid' };

/**
 * Registers a sending domain for a project (idempotent for the same project; `verified` is updated).
 * A domain already registered by another project is refused.
 */
export async function addDomain(db: Db, projectId: string, domain: string, verified: boolean): Promise<AddDomainResult> {
  // The same normal form as `POST /domains` (ASCII, lower case, no trailing dot), so both paths meet on one row.
  const name = asciiHostname(domain);
  if (!name) return { ok: false, reason: 'invalid' };
  const [row] = await db
    .insert(domains)
    .values({ projectId, domain: name, verifiedAt: verified ? new Date() : null, status: verified ? 'verified' : 'pending' })
    .onConflictDoUpdate({
      target: domains.domain,
      set: {
        status: sql`excluded.status`,
        verifiedAt: sql`case when excluded.status = 'verified' then coalesce(${domains.verifiedAt}, now()) else null end`,
      },
      setWhere: eq(domains.projectId, projectId),
    })
    .returning();
  return row ? { ok: true, domain: row } : { ok: false, reason: 'taken' };
}

/** Names of the project's verified sending domains. */
export async function verifiedDomains(db: DbOrTx, projectId: string): Promise<string[]> {
  const rows = await db
    .select({ domain: domains.domain })
    .from(domains)
    .where(and(eq(domains.projectId, projectId), eq(domains.verified, true)));
  return rows.map((r) => r.domain);
}

/** The project that registered `domain`, or `undefined`. */
export async function domainOwner(db: DbOrTx, domain: string): Promise<string | undefined> {
  const name = asciiHostname(domain);
  if (!name) return undefined;
  const [row] = await db.select({ projectId: domains.projectId }).from(domains).where(eq(domains.domain, name));
  return row?.projectId;
}
