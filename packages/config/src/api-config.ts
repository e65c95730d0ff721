/**
 * The API's own slice of the runtime configuration: its port, the admin token, request and failure limits, the
 * authentication caches, the proxy trust and the `/metrics` cache. Only the API (and its CLI) reads these; the
 * slice lives here rather than in `apps/api` because {@link loadConfig} (config.ts) composes every slice and a
 * package never imports an app.
 *
 * @module
 */
import { ConfigError, int, optional, renamed, trustProxy, type Env } from '@mailroom/platform/config-env';
import type { TrustProxy } from '@mailroom/platform/trust-proxy';

/**
 * API settings.
 *
 * @process api
 * @group api
 */
export interface ApiConfig {
  /** `PORT`: HTTP port of the API (0–65535, default 8080). */
  readonly port: number;
  /**
   * `ADMIN_TOKEN`: bearer token of `/admin/*`, `/metrics` and the queue dashboard (at least 16 characters; with
   * `NODE_ENV=production` at least 32 and not a placeholder such as `change-me…`, or the API refuses to start); the
   * admin routes are off when unset.
   *
   * @group required
   */
  readonly adminToken: string | undefined;
  /** `RATE_LIMIT_PER_MINUTE`: API requests per minute per project (default 1000). */
  readonly rateLimitPerMinute: number;
  /** `AUTH_CACHE_TTL_MS`: how long a key → project lookup is cached in memory (ms, default 10000). */
  readonly authCacheTtlMs: number;
  /** `KEY_ROTATION_GRACE_HOURS`: how long a rotated-out key keeps working (hours, default 24). */
  readonly keyRotationGraceHours: number;
  /**
   * `AUTH_NEGATIVE_CACHE_TTL_MS`: how long a key found unknown is remembered as unknown in each API process (ms,
   * 0–60000, default 5000), so repeated tries cost no database lookup. Short, so a key just issued by another
   * process works soon.
   */
  readonly authNegativeCacheTtlMs: number;
  /**
   * `AUTH_FAILURE_LIMIT_PER_MINUTE`: failed authentications (unknown or malformed keys, wrong admin tokens) per
   * client IP per minute, across API processes (Redis; default 20); beyond it 429 `RATE_LIMITED` with `Retry-After`.
   */
  readonly authFailureLimitPerMinute: number;
  /** `ADMIN_LOGIN_LIMIT_PER_MINUTE`: `POST /admin/login` attempts per client IP per minute (default 10). */
  readonly adminLoginLimitPerMinute: number;
  /**
   * `UNSUBSCRIBE_LIMIT_PER_MINUTE`: failed unsubscribe lookups (tokens that resolve to nothing, `GET` or `POST
   * /unsubscribe/{token}`) per client IP per minute (default 300). Valid tokens are never counted.
   */
  readonly unsubscribeLimitPerMinute: number;
  /**
   * - `BLOCKED_LOOKUP_INTERVAL_SECONDS`: while a client IP is over its failure limit (keys or unsubscribe tokens),
   *   one lookup per this many seconds (per IP) is still made for a credential the process has not seen valid, so a
   *   legitimate client sharing the address gets through within seconds (s, 1–60, default 2).
   * - `BLOCKED_LOOKUP_INTERVAL_S`: the former name of `BLOCKED_LOOKUP_INTERVAL_SECONDS`, still read when that one is
   *   not set.
   */
  readonly blockedLookupIntervalSeconds: number;
  /**
   * `TRUST_PROXY`: Express's `trust proxy` setting, which decides the client IP (`req.ip`) that per-IP limits
   * count against. `false` (default: the TCP peer; `X-Forwarded-For` ignored), `true` (the left-most
   * `X-Forwarded-For` entry: only behind a proxy that overwrites it), a hop count (trust that many proxies in
   * front of the API), or the addresses/CIDRs of trusted proxies (with the names `loopback`, `linklocal`,
   * `uniquelocal`).
   *
   * @default false
   */
  readonly trustProxy: TrustProxy;
  /**
   * `REPUTATION_METRICS_TTL_MS`: how long each API process serves the reputation gauges of `/metrics` from one read
   * of `reputation_counts` (ms; default 60000). 0: read on every scrape (concurrent scrapes still share one read).
   */
  readonly reputationMetricsTtlMs: number;
  /**
   * `API_WRITE_BATCH_SIZE`: most `/v1/send` requests, and apart from them most `/v1/track` requests, written in one
   * statement (1–500, default 50; 1 writes each request on its own). The requests reaching the write in one turn of
   * the event loop go together; beyond that a request waits for a batch only while `API_WRITE_BATCH_IN_FLIGHT`
   * statements of its kind are already running, so at a low rate every request is written alone, one turn later at
   * most.
   */
  readonly writeBatchSize: number;
  /**
   * `API_WRITE_BATCH_IN_FLIGHT`: most send (and, apart, track) statements running at once per API process (1–100,
   * default 3). Measured with `npm run bench -- api` (`BENCH_API_B_ENV`, same runs): 3 against 2 kept the send p99
   * at 0.72–1.04× the ceiling's over four runs (2: 0.76–1.25×), with requests per second within ±6% and 5–10% more
   * Postgres CPU per request; 4 against 2 had served 10–20% fewer requests per second with 22–33% more Postgres CPU:
   * more statements at once queue more on the project's counter rows and batch less per commit.
   */
  readonly writeBatchInFlight: number;
}

/** Shortest `ADMIN_TOKEN` accepted with `NODE_ENV=production` (characters; `openssl rand -hex 32` gives 64). */
export const PRODUCTION_ADMIN_TOKEN_MIN_LENGTH = 32;

/** What shipped examples and placeholders look like (docker-compose.yml's `change-me-…`, the dev script's token). */
const PLACEHOLDER_TOKEN =
  /change[-_ ]?me|placeholder|example|replace[-_ ]?(me|this)|your[-_ ]?(admin[-_ ]?)?token|(dev|test)[-_ ]?admin[-_ ]?token/i;

/**
 * Why `token` is not fit for production (a placeholder, or shorter than {@link PRODUCTION_ADMIN_TOKEN_MIN_LENGTH}),
 * or undefined when it is.
 */
export function weakAdminToken(token: string): string | undefined {
  if (PLACEHOLDER_TOKEN.test(token) || /^(.)\1*$/.test(token))
    return 'is a placeholder; set a long random value (openssl rand -hex 32)';
  if (token.length < PRODUCTION_ADMIN_TOKEN_MIN_LENGTH) {
    return `must be at least ${PRODUCTION_ADMIN_TOKEN_MIN_LENGTH} characters in production (got ${token.length}); set a long random value (openssl rand -hex 32)`;
  }
  return undefined;
}

/**
 * Parses and validates the API slice. With `NODE_ENV=production` a set `ADMIN_TOKEN` must not be a placeholder
 * nor shorter than {@link PRODUCTION_ADMIN_TOKEN_MIN_LENGTH}: the admin API, `/metrics` and the queue dashboard
 * are behind it.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link ApiConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadApiConfig(env: Env): ApiConfig {
  const port = int(env, 'PORT', 8080, 0, 65535);
  const adminToken = optional(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters');
  }
  const weak =
    adminToken !== undefined && optional(env, 'NODE_ENV') === 'production' ? weakAdminToken(adminToken) : undefined;
  if (weak) throw new ConfigError('ADMIN_TOKEN', weak);
  return Object.freeze({
    port,
    adminToken,
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1000, 1, 10_000_000),
    authCacheTtlMs: int(env, 'AUTH_CACHE_TTL_MS', 10_000, 0, 3_600_000),
    keyRotationGraceHours: int(env, 'KEY_ROTATION_GRACE_HOURS', 24, 0, 24 * 90),
    authNegativeCacheTtlMs: int(env, 'AUTH_NEGATIVE_CACHE_TTL_MS', 5_000, 0, 60_000),
    authFailureLimitPerMinute: int(env, 'AUTH_FAILURE_LIMIT_PER_MINUTE', 20, 1, 1_000_000),
    adminLoginLimitPerMinute: int(env, 'ADMIN_LOGIN_LIMIT_PER_MINUTE', 10, 1, 1_000_000),
    unsubscribeLimitPerMinute: int(env, 'UNSUBSCRIBE_LIMIT_PER_MINUTE', 300, 1, 1_000_000),
    blockedLookupIntervalSeconds: int(
      env,
      renamed(env, 'BLOCKED_LOOKUP_INTERVAL_SECONDS', 'BLOCKED_LOOKUP_INTERVAL_S'),
      2,
      1,
      60,
    ),
    trustProxy: trustProxy(env),
    reputationMetricsTtlMs: int(env, 'REPUTATION_METRICS_TTL_MS', 60_000, 0, 3_600_000),
    writeBatchSize: int(env, 'API_WRITE_BATCH_SIZE', 50, 1, 500),
    writeBatchInFlight: int(env, 'API_WRITE_BATCH_IN_FLIGHT', 3, 1, 100),
  });
}
