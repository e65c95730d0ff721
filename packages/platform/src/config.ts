/**
 * The platform slice of the runtime configuration: what every process needs whatever it does (environment,
 * Postgres, Redis, queue prefix, public URL, logging).
 *
 * Each package that reads settings has its own slice (`<package>/config`, parsed by its `load<Name>Config`);
 * `@mailroom/config/config` composes them into the one frozen `Config` the entry points parse once and pass down.
 * Nothing else reads `process.env`. Bad values fail fast with a {@link ConfigError} naming the variable.
 *
 * @module
 */
import { bool, ConfigError, int, list, optional, str, url, type Env } from './config-env';

/**
 * Settings shared by every process (API, worker, CLI).
 *
 * @process api, worker, cli
 * @group shared
 */
export interface PlatformConfig {
  /** `NODE_ENV`: `production`, `development` or `test` (default `development`). */
  readonly env: 'production' | 'development' | 'test';
  /**
   * `DATABASE_URL`: Postgres connection string (default `postgres://postgres@127.0.0.1:5432/mailroom`).
   *
   * @group required
   */
  readonly databaseUrl: string;
  /**
   * `DB_POOL_SIZE`: connections of the process's main pool (1–500, default 10; a worker opens up to 5 more).
   *
   * @group tuning
   */
  readonly dbPoolSize: number;
  /**
   * `DATABASE_REPLICA_URLS`: comma-separated connection strings of Postgres streaming replicas of `DATABASE_URL`
   * (default none). The API sends lists, searches, stats, `/reputation` and segment previews to them; writes,
   * idempotency, the send path, authentication and single-item reads stay on the primary (`@mailroom/db/replicas`).
   * Each API process opens up to `DB_POOL_SIZE` connections per replica, plus one for the lag checks.
   *
   * @process api
   * @group api
   */
  readonly databaseReplicaUrls: readonly string[];
  /**
   * `DATABASE_REPLICA_MAX_LAG_MS`: a replica whose replay lag exceeds this is skipped (reads go to another replica
   * or the primary) until it catches up (ms, 0–3600000, default 5000).
   *
   * @process api
   * @group api
   */
  readonly databaseReplicaMaxLagMs: number;
  /**
   * `DATABASE_REPLICA_CHECK_INTERVAL_MS`: time between two health and lag checks of each replica (ms, 100–60000,
   * default 1000).
   *
   * @process api
   * @group api
   */
  readonly databaseReplicaCheckIntervalMs: number;
  /**
   * `REDIS_URL`: Redis connection string (queues, rate limits; default `redis://127.0.0.1:6379`).
   *
   * @group required
   */
  readonly redisUrl: string;
  /**
   * `REDIS_CLUSTER_NODES`: comma-separated `host:port` seed nodes of a Redis Cluster; when set it replaces
   * `REDIS_URL` (its credentials and TLS still apply to every node). `QUEUE_PREFIX` must then carry a hash tag.
   */
  readonly redisClusterNodes: readonly string[];
  /** `QUEUE_PREFIX`: BullMQ key prefix, hash-tagged (`{name}`) so keys share one Redis Cluster slot (default `{mailroom}`). */
  readonly queuePrefix: string;
  /**
   * `PUBLIC_URL`: the externally reachable base URL of the API (links in mail; default `http://localhost:<PORT>`).
   *
   * @group required
   */
  readonly publicUrl: string;
  /** `LOG_LEVEL`: pino level (default `silent` when `NODE_ENV=test`, else `info`). */
  readonly logLevel: string;
  /** `LOG_PRETTY`: human-readable logs (development; default false). */
  readonly logPretty: boolean;
  /**
   * `METRICS_TOKEN`: bearer token a Prometheus scrape sends (at least 16 characters). When set, the worker's
   * `/metrics` requires it, and the API's `/metrics` takes it beside `ADMIN_TOKEN` (so the scraper needs no admin
   * rights); unset, the worker's `/metrics` is open and the API's takes `ADMIN_TOKEN` only.
   */
  readonly metricsToken: string | undefined;
}

export { ConfigError } from './config-env';

/**
 * Parses and validates the platform slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link PlatformConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadPlatformConfig(env: Env): PlatformConfig {
  const nodeEnv = str(env, 'NODE_ENV', 'development');
  if (!['production', 'development', 'test'].includes(nodeEnv)) {
    throw new ConfigError('NODE_ENV', `must be production, development or test, got "${nodeEnv}"`);
  }
  const queuePrefix = str(env, 'QUEUE_PREFIX', '{mailroom}');
  if (!/^[\w{}:.-]{1,64}$/.test(queuePrefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'may hold only letters, digits, _ - . : { } (at most 64)');
  }
  // The API's port (its own slice) is read here too: the default public URL points at it.
  const port = int(env, 'PORT', 8080, 0, 65535);
  const config: PlatformConfig = {
    env: nodeEnv as PlatformConfig['env'],
    databaseUrl: url(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/mailroom', ['postgres:', 'postgresql:'])!,
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 500),
    databaseReplicaUrls: list(env, 'DATABASE_REPLICA_URLS', []),
    databaseReplicaMaxLagMs: int(env, 'DATABASE_REPLICA_MAX_LAG_MS', 5_000, 0, 3_600_000),
    databaseReplicaCheckIntervalMs: int(env, 'DATABASE_REPLICA_CHECK_INTERVAL_MS', 1_000, 100, 60_000),
    redisUrl: url(env, 'REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:'])!,
    redisClusterNodes: list(env, 'REDIS_CLUSTER_NODES', []),
    queuePrefix,
    publicUrl: url(env, 'PUBLIC_URL', `http://localhost:${port}`, ['http:', 'https:'])!,
    logLevel: str(env, 'LOG_LEVEL', nodeEnv === 'test' ? 'silent' : 'info'),
    logPretty: bool(env, 'LOG_PRETTY', false),
    metricsToken: optional(env, 'METRICS_TOKEN'),
  };
  if (config.metricsToken !== undefined && config.metricsToken.length < 16) {
    throw new ConfigError('METRICS_TOKEN', 'must be at least 16 characters');
  }
  for (const replica of config.databaseReplicaUrls) {
    let protocol: string;
    try {
      protocol = new URL(replica).protocol;
    } catch {
      throw new ConfigError(
        'DATABASE_REPLICA_URLS',
        'must list postgres:// URLs separated by commas, got an entry that is not a URL',
      );
    }
    if (protocol !== 'postgres:' && protocol !== 'postgresql:')
      throw new ConfigError('DATABASE_REPLICA_URLS', `must list postgres:// URLs, got "${protocol}"`);
  }
  for (const node of config.redisClusterNodes) {
    if (!/^[\w.-]+:\d{1,5}$/.test(node))
      throw new ConfigError('REDIS_CLUSTER_NODES', `must list host:port entries, got "${node}"`);
  }
  if (config.redisClusterNodes.length > 0 && !/\{[^{}]+\}/.test(config.queuePrefix)) {
    throw new ConfigError(
      'QUEUE_PREFIX',
      'must carry a hash tag ({name}) with REDIS_CLUSTER_NODES, so every key of a queue is in one slot',
    );
  }
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(config.logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be a pino level, got "${config.logLevel}"`);
  }
  return Object.freeze(config);
}
