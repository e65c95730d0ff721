/**
 * API-key authentication (spec "Authentication"; docs/api/overview.md, authentication): `Authorization: Bearer
 * sk_…|pk_…` (or a test key, `sk_test_…|pk_test_…`: the same routes, and the request carries `mode: 'test'`).
 *
 * - missing, malformed, unknown, expired or revoked key → 401 `UNAUTHORIZED`;
 * - a public key on a secret-key route → 403 `PUBLIC_KEY_NOT_ALLOWED`;
 * - a disabled project → 403 `PROJECT_DISABLED`;
 * - a send-only key (`scope: sending`) on any route but a sending one → 403 `KEY_SCOPE_FORBIDDEN`;
 * - a client IP over its failed-authentication limit → 429 `RATE_LIMITED` with `Retry-After`.
 *
 * Lookups are by SHA-256 hash and cached in memory for `AUTH_CACHE_TTL_MS`, so disabling a project, rotating or
 * revoking a key reaches every API process within that time (at once in the process that made the change). A key
 * found unknown is remembered as unknown for `AUTH_NEGATIVE_CACHE_TTL_MS`, so repeating it costs no database
 * lookup; a malformed key never costs one. Parallel requests with the same key share one lookup.
 *
 * Every database lookup of a key this process has not seen valid is counted against the client IP before it is
 * made (`FailureLimiter.attempt`, atomic in Redis) and given back when the key is valid, so a parallel burst of
 * made-up keys reaches the database at most `AUTH_FAILURE_LIMIT_PER_MINUTE` times a minute (plus the trickle of
 * one lookup per `BLOCKED_LOOKUP_INTERVAL_SECONDS` of a blocked address). A key this process has seen valid costs no
 * Redis call here.
 *
 * @module
 */
import type { Request, RequestHandler } from 'express';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { bearerToken, matchesToken, safeEqual } from '@mailroom/platform/bearer';
import { hashKey, keyKind, type KeyKind } from '@mailroom/projects/keys';
import { findKey, type KeyRecord } from '@mailroom/projects/queries/projects';
import { type Db } from '@mailroom/db/client';
import { clientIp, type Attempt, type FailureLimiter } from './rate-limit';
import { toMiddleware, type RequestStep } from './steps';

/**
 * The in-process cache of key lookups, by key hash (hex SHA-256).
 *
 * - A key found valid is cached for `ttlMs`; after that it is looked up again, but the process keeps remembering
 *   that the hash was valid (up to `maxEntries` hashes, oldest forgotten first): {@link knownGood} lets a client
 *   that authenticates through an IP that is over its failure limit keep working.
 * - A key found unknown is cached as unknown for `negativeTtlMs`, in its own bounded map, so a flood of made-up
 *   keys never pushes valid ones out.
 */
export class AuthCache {
  private readonly entries = new Map<string, { value: KeyRecord; expires: number }>();
  private readonly misses = new Map<string, number>();
  private readonly inflight = new Map<string, Promise<KeyRecord | null>>();

  /**
   * @param ttlMs - how long a valid key's record is trusted (ms; `AUTH_CACHE_TTL_MS`).
   * @param negativeTtlMs - how long an unknown key stays unknown without a lookup (ms; `AUTH_NEGATIVE_CACHE_TTL_MS`).
   * @param maxEntries - bound of each of the two maps (entries).
   */
  constructor(
    private readonly ttlMs: number,
    private readonly negativeTtlMs = Math.min(ttlMs, 5_000),
    private readonly maxEntries = 10_000,
  ) {}

  /**
   * The record of the key whose hash is `hash`, from the cache or from `load` (the database).
   *
   * @returns `null` for an unknown (or expired, or revoked) key.
   * @throws whatever `load` throws (e.g. Postgres unavailable); nothing is cached then.
   */
  async lookup(hash: string, load: () => Promise<KeyRecord | undefined>): Promise<KeyRecord | null> {
    const now = Date.now();
    const hit = this.entries.get(hash);
    if (hit && hit.expires > now) return hit.value;
    const miss = this.misses.get(hash);
    if (miss !== undefined && miss > now) return null;
    const value = (await load()) ?? null;
    if (value) {
      this.misses.delete(hash);
      this.entries.delete(hash);
      bounded(this.entries, this.maxEntries).set(hash, { value, expires: Date.now() + this.ttlMs });
    } else {
      this.entries.delete(hash);
      if (this.negativeTtlMs > 0) {
        this.misses.delete(hash);
        bounded(this.misses, this.maxEntries).set(hash, Date.now() + this.negativeTtlMs);
      }
    }
    return value;
  }

  /** Whether this process has seen the key valid (it may have been revoked since: {@link lookup} decides). */
  knownGood(hash: string): boolean {
    return this.entries.has(hash);
  }

  /** Whether the key is remembered as unknown now ({@link lookup} answers `null` without a database lookup). */
  knownBad(hash: string): boolean {
    const miss = this.misses.get(hash);
    return miss !== undefined && miss > Date.now();
  }

  /** The lookup of `hash` another request has under way ({@link leading}), if any. */
  pending(hash: string): Promise<KeyRecord | null> | undefined {
    return this.inflight.get(hash);
  }

  /**
   * Runs `run` (the counted lookup of `hash`) as the one under way for that hash, so that parallel requests
   * with the same key wait for it ({@link pending}) instead of each counting and looking up. `run` is started
   * and registered in the same tick, so no request in between can miss it.
   *
   * @returns what `run` returns. @throws what it throws (waiting requests then try on their own).
   */
  async leading(hash: string, run: () => Promise<KeyRecord | null>): Promise<KeyRecord | null> {
    const flight = run();
    this.inflight.set(hash, flight);
    try {
      return await flight;
    } finally {
      if (this.inflight.get(hash) === flight) this.inflight.delete(hash);
    }
  }

  /**
   * Forgets every lookup (after an admin change in this process: a project created, a key rotated or revoked, a
   * project disabled): the next request of each key reads the database. Hashes seen valid stay {@link knownGood}.
   */
  clear(): void {
    this.misses.clear();
    for (const entry of this.entries.values()) entry.expires = 0;
  }
}

function bounded<K, V>(map: Map<K, V>, max: number): Map<K, V> {
  while (map.size >= max) map.delete(map.keys().next().value as K);
  return map;
}

/**
 * Authenticates the request and sets `res.locals.auth` (`{ projectId, kind, mode }`; `mode` is the stored key's,
 * `test` for `sk_test_…`/`pk_test_…` keys, and is cached with the rest of the key's record).
 *
 * Per client IP ({@link clientIp}) in `failures`:
 * - a key this process has seen valid: no count, no Redis call, looked up (from cache) as usual;
 * - a malformed key, or one answered without a lookup of its own (negative cache, or the lookup of a parallel
 *   request with the same key): counted as a failure when it fails (401, or 429 beyond the limit);
 * - any other key: counted before its database lookup (429 without a lookup beyond the limit, except for the
 *   blocked address's trickle lookup), and given back if the key is valid.
 *
 * A missing header is not counted (it guesses nothing).
 *
 * @param accept - key kinds this route takes (`['secret']` for most, `['public', 'secret']` for `/v1/track`).
 * @throws {@link AppError} 401 `UNAUTHORIZED`, 403 `PUBLIC_KEY_NOT_ALLOWED` / `PROJECT_DISABLED`, 429 `RATE_LIMITED`;
 *   503 `SERVICE_UNAVAILABLE` when the lookup cannot reach Postgres.
 */
export function authenticate(db: Db, cache: AuthCache, accept: KeyKind[], failures: FailureLimiter): RequestHandler {
  return toMiddleware(authenticateStep(db, cache, accept, failures));
}

/** Which keys a route takes beyond its kinds: `sending` routes (`/v1/send`) also take send-only keys. */
export interface RouteKeyScope {
  /** The route sends mail: a `sending` key may call it. */
  sending?: boolean;
}

/** {@link authenticate} as a request step (see `steps.ts`), for `mountRoutes`; the same checks and errors. */
export function authenticateStep(
  db: Db,
  cache: AuthCache,
  accept: KeyKind[],
  failures: FailureLimiter,
  routeScope: RouteKeyScope = {},
): RequestStep {
  return async (req, res) => {
    const key = bearerToken(req.get('authorization'));
    if (!key) {
      throw new AppError(ErrorCode.UNAUTHORIZED, 'Missing API key: send "Authorization: Bearer <key>"', {
        suggestion: 'Use the secret key (sk_…) of your project.',
      });
    }
    const record = await resolveKey(db, cache, failures, key, clientIp(req));
    if (!accept.includes(record.kind)) {
      throw new AppError(ErrorCode.PUBLIC_KEY_NOT_ALLOWED, 'A public key (pk_) cannot be used on this endpoint', {
        suggestion: 'Use the secret key (sk_…); public keys work only with /v1/track.',
      });
    }
    if (record.projectDisabled) throw new AppError(ErrorCode.PROJECT_DISABLED, 'This project is disabled');
    if (record.scope === 'sending' && !routeScope.sending) {
      throw new AppError(
        ErrorCode.KEY_SCOPE_FORBIDDEN,
        'This key is restricted to sending (scope "sending"): it may only call POST /v1/send and the SMTP relay',
        {
          suggestion: 'Use a full-access secret key for this endpoint.',
        },
      );
    }
    // From here on the request's log lines carry the project (and a test key's `keyMode`): see request-id.ts.
    res.locals.auth = {
      projectId: record.projectId,
      kind: record.kind,
      mode: record.mode,
      keyId: record.keyId,
      scope: record.scope,
      allowedDomains: record.allowedDomains,
    };
  };
}

/**
 * The record of a presented key (`sk_…`, `pk_…`, or a test key), with the per-IP failure accounting described in
 * {@link authenticate}: shared by the HTTP steps and the SMTP relay's `AUTH`, so a guess over either counts
 * toward the same limit of the address. The caller checks kind, project state and scope.
 *
 * @param ip - the client address the attempt is counted against.
 * @throws {@link AppError} 401 `UNAUTHORIZED` (malformed, unknown, expired or revoked key), 429 `RATE_LIMITED`;
 *   the lookup's error (Postgres or Redis unavailable) as it is.
 */
export async function resolveKey(
  db: Db,
  cache: AuthCache,
  failures: FailureLimiter,
  key: string,
  ip: string,
): Promise<KeyRecord> {
  const invalid = () => new AppError(ErrorCode.UNAUTHORIZED, 'Invalid API key');
  if (!keyKind(key)) {
    await failures.fail(ip);
    throw invalid();
  }
  const hash = hashKey(key);
  const load = () => findKey(db, hash);
  let record: KeyRecord | null | undefined;
  if (cache.knownGood(hash) || cache.knownBad(hash)) {
    record = await cache.lookup(hash, load);
  } else {
    // A lookup of this key under way (a parallel request) answers this one too, uncounted if it finds the key. Its
    // failure is the leading request's to report; this one then looks the key up itself.
    record = await cache.pending(hash)?.catch(() => undefined);
  }
  if (record === undefined) {
    let attempt: Attempt | undefined;
    record = await cache.leading(hash, async () => {
      attempt = await failures.attempt(ip);
      return cache.lookup(hash, load);
    });
    if (!record) throw attempt!.failure(invalid());
    await attempt!.succeeded();
  } else if (!record) {
    await failures.fail(ip);
    throw invalid();
  }
  return record;
}

/**
 * Checks an admin token typed into the dashboard's login form (constant-time). The right token passes (the form
 * has its own per-IP attempt limit, `ADMIN_LOGIN_LIMIT_PER_MINUTE`, counted before this); a wrong one counts as a
 * failed authentication of the client IP.
 *
 * @returns `true` for the right token, `false` when none was given.
 * @throws {@link AppError} 401 `UNAUTHORIZED` for a wrong token, 429 `RATE_LIMITED` once the IP is over its limit.
 */
export async function checkAdminToken(
  req: Request,
  given: string | undefined,
  adminToken: string,
  failures: FailureLimiter,
): Promise<boolean> {
  if (!given) return false;
  if (safeEqual(given, adminToken)) return true;
  await failures.fail(clientIp(req));
  throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid admin token');
}

/**
 * Checks an admin token sent as a bearer header (admin API, `/metrics`, the dashboard), constant-time
 * (`matchesToken`); `adminToken` may list several accepted tokens (`/metrics`: `METRICS_TOKEN` and `ADMIN_TOKEN`).
 *
 * A client IP over its failed-authentication limit gets 429 whatever the token, so a blocked address learns
 * nothing about the tokens it tries; otherwise the right token passes (uncounted) and a wrong one is counted
 * (atomically, so parallel guesses cannot exceed the limit).
 *
 * @returns `true` for the right token, `false` when none was given.
 * @throws {@link AppError} 401 `UNAUTHORIZED` for a wrong token, 429 `RATE_LIMITED` (with `Retry-After`) when the
 *   IP is over its limit.
 */
export async function checkAdminBearer(
  req: Request,
  given: string | undefined,
  adminToken: string | readonly (string | undefined)[],
  failures: FailureLimiter,
): Promise<boolean> {
  if (!given) return false;
  const ip = clientIp(req);
  if (matchesToken(given, typeof adminToken === 'string' ? [adminToken] : adminToken)) {
    await failures.assertNotBlocked(ip);
    return true;
  }
  await failures.fail(ip);
  throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid admin token');
}

/**
 * Guards `/admin/*` with `ADMIN_TOKEN` (bearer, see {@link checkAdminBearer}); admin routes are off (403) when it
 * is unset. `/metrics` has its own guard, {@link metricsOnly}.
 *
 * @throws {@link AppError} 403 `FORBIDDEN` (no `ADMIN_TOKEN`), 401 `UNAUTHORIZED`, 429 `RATE_LIMITED`.
 */
export function adminOnly(adminToken: string | undefined, failures: FailureLimiter): RequestHandler {
  return toMiddleware(adminStep(adminToken, failures));
}

/**
 * Guards `/metrics`: a bearer token equal to `METRICS_TOKEN` or `ADMIN_TOKEN` (whichever are set), checked and
 * counted like an admin token ({@link checkAdminBearer}), so a Prometheus scrape needs no admin rights.
 *
 * @throws {@link AppError} 403 `FORBIDDEN` (neither token set), 401 `UNAUTHORIZED`, 429 `RATE_LIMITED`.
 */
export function metricsOnly(
  tokens: { adminToken: string | undefined; metricsToken: string | undefined },
  failures: FailureLimiter,
): RequestHandler {
  return toMiddleware(async (req) => {
    if (!tokens.adminToken && !tokens.metricsToken) {
      throw new AppError(ErrorCode.FORBIDDEN, '/metrics is disabled: set METRICS_TOKEN (or ADMIN_TOKEN) to enable it');
    }
    if (
      !(await checkAdminBearer(
        req,
        bearerToken(req.get('authorization')),
        [tokens.metricsToken, tokens.adminToken],
        failures,
      ))
    ) {
      throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid metrics token');
    }
  });
}

/** {@link adminOnly} as a request step (see `steps.ts`), for `mountRoutes`. */
export function adminStep(adminToken: string | undefined, failures: FailureLimiter): RequestStep {
  return async (req) => {
    if (!adminToken) throw new AppError(ErrorCode.FORBIDDEN, 'The admin API is disabled: set ADMIN_TOKEN to enable it');
    if (!(await checkAdminBearer(req, bearerToken(req.get('authorization')), adminToken, failures))) {
      throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid admin token');
    }
  };
}
