/**
 * Projects, API keys and sending domains: the operator-facing data (CLI and `/admin/*`).
 *
 * @module
 */
import { and, eq, gt, isNull, or, sql } from 'drizzle-orm';
import { asciiHostname } from '@mailroom/platform/address';
import { generateKey, hashKey, keyPrefix, type KeyKind, type KeyMode, type KeyReference } from '../keys';
import type { Db, DbOrTx } from '@mailroom/db/client';
import { apiKeys, domains, projects, type ApiKeyScope } from '@mailroom/db/schema';

/** A project with a freshly issued key pair; the keys are shown this once and only their hashes are stored. */
export interface IssuedProject {
  id: string;
  name: string;
  disabled: boolean;
  publicKey: string;
  secretKey: string;
}

/** A new project: its live key pair and its test key pair (`pk_test_…`, `sk_test_…`), shown this once. */
export interface CreatedProject extends IssuedProject {
  testPublicKey: string;
  testSecretKey: string;
}

/** A project's freshly rotated key pair of one mode (`sk_test_…`/`pk_test_…` when `mode` is `test`). */
export interface RotatedKeys extends IssuedProject {
  mode: KeyMode;
}

/** The restriction of a key: `full`, or `sending` with optional sending domains (null: any verified domain). */
export interface KeyScope {
  scope: ApiKeyScope;
  allowedDomains: string[] | null;
}

const FULL: KeyScope = { scope: 'full', allowedDomains: null };

async function issueKey(
  db: DbOrTx,
  projectId: string,
  kind: KeyKind,
  mode: KeyMode,
  scope: KeyScope = FULL,
): Promise<{ key: string; id: string }> {
  const key = generateKey(kind, mode);
  const [row] = await db
    .insert(apiKeys)
    .values({
      projectId,
      kind,
      mode,
      keyHash: hashKey(key),
      keyPrefix: keyPrefix(key),
      scope: scope.scope,
      allowedDomains: scope.allowedDomains,
    })
    .returning({ id: apiKeys.id });
  return { key, id: row.id };
}

async function issueKeys(
  db: DbOrTx,
  projectId: string,
  mode: KeyMode,
): Promise<{ publicKey: string; secretKey: string }> {
  const publicKey = (await issueKey(db, projectId, 'public', mode)).key;
  const secretKey = (await issueKey(db, projectId, 'secret', mode)).key;
  return { publicKey, secretKey };
}

/** Creates a project with its first live key pair and its first test key pair. */
export async function createProject(db: Db, name: string): Promise<CreatedProject> {
  return db.transaction(async (tx) => {
    const [project] = await tx.insert(projects).values({ name }).returning();
    const live = await issueKeys(tx, project.id, 'live');
    const test = await issueKeys(tx, project.id, 'test');
    return {
      id: project.id,
      name: project.name,
      disabled: project.disabled,
      ...live,
      testPublicKey: test.publicKey,
      testSecretKey: test.secretKey,
    };
  });
}

/**
 * Issues a new key pair of one mode; the project's current full-access keys of that mode keep working for
 * `graceHours` (0 = revoked now), and keys of the other mode, and scoped keys (`sending`: each is made, and
 * revoked, on its own), are left alone. Rotating `test` on a project that has no test
 * keys (one made before test mode) simply issues its first test pair.
 *
 * @returns the project with the new keys, or `undefined` when the project does not exist.
 */
export async function rotateKeys(
  db: Db,
  projectId: string,
  graceHours: number,
  mode: KeyMode = 'live',
): Promise<RotatedKeys | undefined> {
  return db.transaction(async (tx) => {
    const [project] = await tx.select().from(projects).where(eq(projects.id, projectId)).for('update');
    if (!project) return undefined;
    const expiry = new Date(Date.now() + graceHours * 3_600_000);
    // Keys already expiring keep the earlier of their expiry and the new one.
    await tx
      .update(apiKeys)
      .set({ expiresAt: sql`least(coalesce(${apiKeys.expiresAt}, ${expiry}), ${expiry})` })
      .where(and(eq(apiKeys.projectId, projectId), eq(apiKeys.mode, mode), eq(apiKeys.scope, 'full')));
    const keys = await issueKeys(tx, projectId, mode);
    return { id: project.id, name: project.name, disabled: project.disabled, mode, ...keys };
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

/**
 * Issues one secret key with a scope (`sending`: `/v1/send` and SMTP only, optionally only from `allowedDomains`,
 * lower-case names). The key is returned once; only its hash is stored.
 *
 * @returns `undefined` when the project does not exist.
 */
export async function createScopedKey(
  db: Db,
  projectId: string,
  mode: KeyMode,
  scope: KeyScope,
): Promise<{ key: string; summary: KeySummary } | undefined> {
  return db.transaction(async (tx) => {
    const [project] = await tx
      .select({ id: projects.id })
      .from(projects)
      .where(eq(projects.id, projectId))
      .for('update');
    if (!project) return undefined;
    const { key, id } = await issueKey(tx, projectId, 'secret', mode, scope);
    const [summary] = await tx.select(keySummaryColumns).from(apiKeys).where(eq(apiKeys.id, id));
    return { key, summary };
  });
}

/** What authentication needs to know about a presented key. */
export interface KeyRecord extends KeyScope {
  /** The key's id (`api_keys.id`): what an SMTP submission's idempotency is keyed by, with its Message-ID. */
  keyId: string;
  projectId: string;
  kind: KeyKind;
  /** `test`: what the key creates is test data (mail goes to the sink, never to SES). */
  mode: KeyMode;
  projectDisabled: boolean;
}

/** Looks up a key that is neither expired nor revoked by its SHA-256 hash (hex). */
export async function findKey(db: Db, keyHash: string): Promise<KeyRecord | undefined> {
  const [row] = await db
    .select({
      keyId: apiKeys.id,
      projectId: apiKeys.projectId,
      kind: apiKeys.kind,
      mode: apiKeys.mode,
      scope: apiKeys.scope,
      allowedDomains: apiKeys.allowedDomains,
      projectDisabled: projects.disabled,
    })
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(
      and(
        eq(apiKeys.keyHash, keyHash),
        isNull(apiKeys.revokedAt),
        or(isNull(apiKeys.expiresAt), gt(apiKeys.expiresAt, sql`now()`)),
      ),
    );
  return row ? { ...row } : undefined;
}

/** One API key as operators see it: never the key itself, only its visible prefix. */
export interface KeySummary {
  id: string;
  kind: KeyKind;
  mode: KeyMode;
  /** The visible prefix of the key (`keyPrefix` of `@mailroom/core`), e.g. `sk_AbC1234` or `sk_test_AbC1234`. */
  keyPrefix: string;
  createdAt: Date;
  /** When a rotation ends (or ended) the key; null while it is a current key. */
  expiresAt: Date | null;
  /** When an operator revoked the key; null if never. */
  revokedAt: Date | null;
  /** Whether the key authenticates now (not revoked, not expired). */
  active: boolean;
  /** `full`, or `sending` (`/v1/send` and SMTP only). */
  scope: ApiKeyScope;
  /** A `sending` key's sending domains; null: any verified domain. */
  allowedDomains: string[] | null;
}

const keySummaryColumns = {
  id: apiKeys.id,
  kind: apiKeys.kind,
  mode: apiKeys.mode,
  keyPrefix: apiKeys.keyPrefix,
  createdAt: apiKeys.createdAt,
  expiresAt: apiKeys.expiresAt,
  revokedAt: apiKeys.revokedAt,
  active: sql<boolean>`(${apiKeys.revokedAt} is null and (${apiKeys.expiresAt} is null or ${apiKeys.expiresAt} > now()))`,
  scope: apiKeys.scope,
  allowedDomains: apiKeys.allowedDomains,
};

/**
 * The project's keys, oldest first (revoked and expired ones included: they are the audit trail).
 *
 * @returns `undefined` when the project does not exist.
 */
export async function listKeys(db: Db, projectId: string): Promise<KeySummary[] | undefined> {
  const [project] = await db.select({ id: projects.id }).from(projects).where(eq(projects.id, projectId));
  if (!project) return undefined;
  return db
    .select(keySummaryColumns)
    .from(apiKeys)
    .where(eq(apiKeys.projectId, projectId))
    .orderBy(apiKeys.createdAt, apiKeys.id);
}

/** Outcome of {@link revokeKey}. */
export type RevokeKeyResult =
  | { ok: true; key: KeySummary; alreadyRevoked: boolean; replacementKey: string | null }
  | { ok: false; reason: 'project_not_found' | 'key_not_found' | 'ambiguous' };

/**
 * Revokes one key of a project at once (sets `revoked_at`; the row stays as the audit trail). `selector` is the
 * key itself, its visible prefix or its id (see `parseKeyReference`).
 *
 * Revoking a current key (one no rotation has ended yet) also issues a new key of the same kind and mode,
 * returned once in `replacementKey`, so the project is never left without a working key of that kind and mode;
 * the other keys are left alone. A key already in a rotation's grace period, or already expired, gets no replacement: the rotation
 * issued it. Revoking a revoked key changes nothing (`alreadyRevoked`, the original `revokedAt`).
 *
 * Every process's auth cache still holds the key for up to `AUTH_CACHE_TTL_MS`: that is the bound on how long
 * a revoked key keeps working elsewhere.
 *
 * @returns `ambiguous` when a prefix matches more than one key of the project (give the key or its id).
 */
export async function revokeKey(db: Db, projectId: string, selector: KeyReference): Promise<RevokeKeyResult> {
  return db.transaction(async (tx) => {
    // The same lock as rotateKeys: a revocation and a rotation of one project never interleave.
    const [project] = await tx
      .select({ id: projects.id })
      .from(projects)
      .where(eq(projects.id, projectId))
      .for('update');
    if (!project) return { ok: false, reason: 'project_not_found' };
    const match =
      selector.by === 'key'
        ? eq(apiKeys.keyHash, hashKey(selector.key))
        : selector.by === 'prefix'
          ? eq(apiKeys.keyPrefix, selector.prefix)
          : eq(apiKeys.id, selector.id);
    const rows = await tx
      .select(keySummaryColumns)
      .from(apiKeys)
      .where(and(eq(apiKeys.projectId, projectId), match))
      .limit(2);
    if (rows.length === 0) return { ok: false, reason: 'key_not_found' };
    if (rows.length > 1) return { ok: false, reason: 'ambiguous' };
    const row = rows[0];
    if (row.revokedAt) return { ok: true, key: row, alreadyRevoked: true, replacementKey: null };
    const [revoked] = await tx
      .update(apiKeys)
      .set({ revokedAt: sql`now()` })
      .where(eq(apiKeys.id, row.id))
      .returning({ revokedAt: apiKeys.revokedAt });
    // A scoped key's replacement has its scope and domains: revoking a leaked key never widens what it could do.
    const replacementKey =
      row.expiresAt === null
        ? (await issueKey(tx, projectId, row.kind, row.mode, { scope: row.scope, allowedDomains: row.allowedDomains }))
            .key
        : null;
    return {
      ok: true,
      key: { ...row, revokedAt: revoked.revokedAt, active: false },
      alreadyRevoked: false,
      replacementKey,
    };
  });
}

/** Outcome of {@link addDomain}. */
export type AddDomainResult =
  { ok: true; domain: typeof domains.$inferSelect } | { ok: false; reason: 'taken' | 'invalid' };

/**
 * Registers a sending domain for a project (idempotent for the same project; `verified` is updated).
 * A domain already registered by another project is refused.
 */
export async function addDomain(
  db: Db,
  projectId: string,
  domain: string,
  verified: boolean,
): Promise<AddDomainResult> {
  // The same normal form as `POST /domains` (ASCII, lower case, no trailing dot), so both paths meet on one row.
  const name = asciiHostname(domain);
  if (!name) return { ok: false, reason: 'invalid' };
  const [row] = await db
    .insert(domains)
    .values({
      projectId,
      domain: name,
      verifiedAt: verified ? new Date() : null,
      status: verified ? 'verified' : 'pending',
    })
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

/** Names of all the project's registered domains (verified or not). */
export async function projectDomainNames(db: DbOrTx, projectId: string): Promise<string[]> {
  const rows = await db.select({ domain: domains.domain }).from(domains).where(eq(domains.projectId, projectId));
  return rows.map((r) => r.domain);
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
