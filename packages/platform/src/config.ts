/**
 * Runtime configuration, parsed once from environment variables into a typed, frozen object.
 *
 * Nothing else in the code base reads `process.env`: entry points call {@link loadConfig} once and pass
 * the result down. Bad values fail fast with a {@link ConfigError} naming the variable.
 *
 * @module
 */
import { bool, ConfigError, fraction, int, intList, list, optional, sesProvider, str, trustProxy, url, type Env } from './config-env';
import type { TrustProxy } from './trust-proxy';
import type { SendRateConfig } from './config-send-rate';
import { DEFAULT_GUARDRAILS, type Guardrails } from './guardrail-defaults';

/** Typed configuration shared by the API, the worker and the CLI. */
export interface Config extends SendRateConfig {
  /** `NODE_ENV`: `production`, `development` or `test`. */
  readonly env: 'production' | 'development' | 'test';
  /** `DATABASE_URL`: Postgres connection string. */
  readonly databaseUrl: string;
  /** `DB_POOL_SIZE`: connections per process. */
  readonly dbPoolSize: number;
  /** `REDIS_URL`: Redis connection string (queues, rate limits). */
  readonly redisUrl: string;
  /**
   * `REDIS_CLUSTER_NODES`: comma-separated `host:port` seed nodes of a Redis Cluster; when set it replaces
   * `REDIS_URL` (its credentials and TLS still apply to every node). `QUEUE_PREFIX` must then carry a hash tag.
   */
  readonly redisClusterNodes: readonly string[];
  /** `QUEUE_PREFIX`: BullMQ key prefix, hash-tagged (`{name}`) so keys share one Redis Cluster slot. */
  readonly queuePrefix: string;
  /** `PORT`: HTTP port of the API. */
  readonly port: number;
  /** `PUBLIC_URL`: the externally reachable base URL of the API (links in mail). */
  readonly publicUrl: string;
  /** `ADMIN_TOKEN`: bearer token of `/admin/*`; admin routes are off when unset. */
  readonly adminToken: string | undefined;
  /** `LOG_LEVEL`: pino level. */
  readonly logLevel: string;
  /** `LOG_PRETTY`: human-readable logs (development). */
  readonly logPretty: boolean;
  /** `SES_REGION`. */
  readonly sesRegion: string;
  /** `SES_ENDPOINT`: override of the SES endpoint, e.g. the local emulator `http://127.0.0.1:8005`. */
  readonly sesEndpoint: string | undefined;
  /** `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`; when unset the AWS default credential chain applies. */
  readonly awsCredentials: { readonly accessKeyId: string; readonly secretAccessKey: string } | undefined;
  /** `SES_CONFIGURATION_SET`: passed on every send when set (event publishing). */
  readonly sesConfigurationSet: string | undefined;
  /**
   * `SES_TIMEOUT_MS`: longest one SES call may take on the wire, connecting included (ms). A call cut off by it is
   * "SES unreachable": retried later without spending an attempt. Keep it well under `SEND_LEASE_MS`.
   */
  readonly sesTimeoutMs: number;
  /** `RATE_LIMIT_PER_MINUTE`: API requests per minute per project. */
  readonly rateLimitPerMinute: number;
  /** `AUTH_CACHE_TTL_MS`: how long a key → project lookup is cached in memory (ms). */
  readonly authCacheTtlMs: number;
  /** `KEY_ROTATION_GRACE_HOURS`: how long a rotated-out key keeps working (hours). */
  readonly keyRotationGraceHours: number;
  /**
   * `AUTH_NEGATIVE_CACHE_TTL_MS`: how long a key found unknown is remembered as unknown in each API process (ms),
   * so repeated tries cost no database lookup. Short, so a key just issued by another process works soon.
   */
  readonly authNegativeCacheTtlMs: number;
  /**
   * `AUTH_FAILURE_LIMIT_PER_MINUTE`: failed authentications (unknown or malformed keys, wrong admin tokens) per
   * client IP per minute, across API processes (Redis); beyond it 429 `RATE_LIMITED` with `Retry-After`.
   */
  readonly authFailureLimitPerMinute: number;
  /** `ADMIN_LOGIN_LIMIT_PER_MINUTE`: `POST /admin/login` attempts per client IP per minute. */
  readonly adminLoginLimitPerMinute: number;
  /**
   * `UNSUBSCRIBE_LIMIT_PER_MINUTE`: failed unsubscribe lookups (tokens that resolve to nothing, `GET` or `POST
   * /unsubscribe/{token}`) per client IP per minute. Valid tokens are never counted.
   */
  readonly unsubscribeLimitPerMinute: number;
  /**
   * `BLOCKED_LOOKUP_INTERVAL_S`: while a client IP is over its failure limit (keys or unsubscribe tokens), one
   * lookup per this many seconds (per IP) is still made for a credential the process has not seen valid, so a
   * legitimate client sharing the address gets through within seconds (s).
   */
  readonly blockedLookupIntervalS: number;
  /**
   * `TRUST_PROXY`: Express's `trust proxy` setting, which decides the client IP (`req.ip`) that per-IP limits
   * count against. `false` (default: the TCP peer; `X-Forwarded-For` ignored), `true` (the left-most
   * `X-Forwarded-For` entry: only behind a proxy that overwrites it), a hop count (trust that many proxies in
   * front of the API), or the addresses/CIDRs of trusted proxies (with the names `loopback`, `linklocal`,
   * `uniquelocal`).
   */
  readonly trustProxy: TrustProxy;
  /** `WORKER_CONCURRENCY`: jobs processed at once per worker process. */
  readonly workerConcurrency: number;
  /** `WORKER_HEALTH_PORT`: port of the worker's `/health/live` and `/health/ready`. */
  readonly workerHealthPort: number;
  /** `WORKER_LOCK_MS`: BullMQ job lock (ms); a dead worker's jobs are retried after about this long. */
  readonly workerLockMs: number;
  /** `SEND_LEASE_MS`: after this long (ms) an email claimed by a worker that died may be claimed again. */
  readonly sendLeaseMs: number;
  /** `RECONCILE_INTERVAL_MS`: how often the reconciler looks for queued emails without a job (ms). */
  readonly reconcileIntervalMs: number;
  /** `RECONCILE_AFTER_MS`: a queued email older than this (ms) is checked for a live job. */
  readonly reconcileAfterMs: number;
  /** `SEND_MAX_ATTEMPTS`: attempts for transient SES failures before an email is marked failed. */
  readonly sendMaxAttempts: number;
  /** `SEND_BACKOFF_MS`: base of the exponential backoff between attempts (ms). */
  readonly sendBackoffMs: number;
  /** `IMPORT_MAX_BYTES`: largest contact import file (bytes); larger uploads get 413. */
  readonly importMaxBytes: number;
  /** `IMPORT_BATCH_SIZE`: contacts per import statement (rows). */
  readonly importBatchSize: number;
  /** `IMPORT_CONCURRENCY`: imports processed at once per worker process. */
  readonly importConcurrency: number;
  /** `CAMPAIGN_BATCH_SIZE`: recipients turned into email rows per fan-out statement (rows). */
  readonly campaignBatchSize: number;
  /**
   * `CAMPAIGN_QUEUE_WINDOW`: most emails of one campaign waiting in the send queue at once (jobs); the rest wait
   * as rows, so Redis never holds a whole audience.
   */
  readonly campaignQueueWindow: number;
  /** `CAMPAIGN_TICK_MS`: how often a sending campaign tops up its window and checks for completion (ms). */
  readonly campaignTickMs: number;
  /**
   * `CAMPAIGN_PAUSE_RECHECK_MS`: how long a send job of a PAUSED campaign waits before it looks again (ms). A
   * resume wakes the campaign's jobs at once; this only bounds a wake-up that was missed.
   */
  readonly campaignPauseRecheckMs: number;
  /** `SEGMENT_REFRESH_MS`: how often dynamic segments are recounted and tracked memberships re-evaluated (ms). */
  readonly segmentRefreshMs: number;
  /**
   * `SNS_TOPIC_ARNS`: comma-separated SNS topic ARNs whose messages `POST /webhooks/ses` accepts (SES event
   * publishing). Empty: the endpoint refuses every message.
   */
  readonly snsTopicArns: readonly string[];
  /**
   * `SNS_CERT_HOSTS`: comma-separated host patterns a `SigningCertURL` (and a `SubscribeURL`) may point at; `*`
   * stands for one DNS label. Default: Amazon SNS (`sns.*.amazonaws.com`, `sns.*.amazonaws.com.cn`). URLs must be
   * https, except on a loopback host listed here explicitly (tests serve their own certificate there).
   * A pattern is matched against the URL's host *and port* (`URL.host`, case-insensitive): a pattern without a port
   * matches only URLs on the scheme's default port (443 for https, 80 for http; `:443` written out is the same
   * URL), and a URL on any other port needs it in the pattern (`127.0.0.1:8443`). `*` never matches a port.
   */
  readonly snsCertHosts: readonly string[];
  /**
   * `TEST_MESSAGE_RETENTION_HOURS`: how long the MIME message of a test email is kept in the test sink after it
   * was stored (hours, at least 1; default 168 = 7 days). Older ones are deleted by the worker's `test-messages`
   * maintenance task; `GET /emails/{id}/raw` then answers 404 saying the message expired.
   */
  readonly testMessageRetentionHours: number;
  /**
   * `REPUTATION_METRICS_TTL_MS`: how long each API process serves the reputation gauges of `/metrics` from one read
   * of `reputation_counts` (ms; default 60000). 0: read on every scrape (concurrent scrapes still share one read).
   */
  readonly reputationMetricsTtlMs: number;
  /** `SOFT_BOUNCE_LIMIT`: transient bounces of one address within the window that suppress it. */
  readonly softBounceLimit: number;
  /** `SOFT_BOUNCE_WINDOW_HOURS`: the window of {@link softBounceLimit} (hours). */
  readonly softBounceWindowHours: number;
  /**
   * Service defaults of the campaign guardrails (a project's `guardrails` overrides each): `GUARDRAIL_MIN_SAMPLE`
   * (outcomes before a campaign is judged, default 200), `GUARDRAIL_MAX_HARD_BOUNCE_RATE` (hard bounces per
   * outcome, fraction, default 0.02) and `GUARDRAIL_MAX_COMPLAINT_RATE` (complaints per outcome, default 0.0005).
   */
  readonly guardrails: Readonly<Guardrails>;
  /**
   * `WEBHOOK_RETRY_SCHEDULE_MS`: comma-separated waits (ms) before each retry of a failed webhook delivery.
   * Default: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about 28 hours in all, 8 attempts).
   */
  readonly webhookRetryScheduleMs: readonly number[];
  /** `WEBHOOK_TIMEOUT_MS`: how long one webhook attempt may take, connection included (ms). */
  readonly webhookTimeoutMs: number;
  /** `WEBHOOK_CONCURRENCY`: webhook deliveries in flight per worker process. */
  readonly webhookConcurrency: number;
  /**
   * `WEBHOOK_ALLOW_PRIVATE_TARGETS`: allow webhook URLs on private, loopback and link-local addresses (off by
   * default: a tenant must not reach the operator's internal network).
   */
  readonly webhookAllowPrivateTargets: boolean;
  /**
   * `WORKFLOW_CONCURRENCY`: workflow executions run at once per worker process. Each holds a database connection
   * while it moves, so more than `DB_POOL_SIZE` only queues on the pool.
   */
  readonly workflowConcurrency: number;
  /**
   * `WORKFLOW_LEASE_MS`: how long a worker holds an execution it runs (ms, extended for a WEBHOOK step's timeout);
   * an execution whose worker died is resumed by another after this.
   */
  readonly workflowLeaseMs: number;
  /** `WORKFLOW_INBOX_POLL_MS`: how often the worker looks for trigger events besides being notified (ms). */
  readonly workflowInboxPollMs: number;
  /** `WORKFLOW_RETRY_BACKOFF_MS`: base of the exponential backoff between WEBHOOK step attempts (ms). */
  readonly workflowRetryBackoffMs: number;
  /** `DNS_SERVERS`: comma-separated `host` or `host:port` resolvers for verification and domains; unset: the system's. */
  readonly dnsServers: readonly string[];
  /** `DNS_TIMEOUT_MS`: one DNS query attempt (ms). */
  readonly dnsTimeoutMs: number;
  /** `DNS_TRIES`: attempts per DNS query. */
  readonly dnsTries: number;
  /** `DNS_CACHE_TTL_S`: how long a domain's DNS answer is cached in Redis (s); nonexistent domains a tenth of it. */
  readonly dnsCacheTtlS: number;
  /**
   * `DOMAIN_IDENTITY_PROVIDER`: `ses` (SES v2 email identities, Easy DKIM) or `local` (records checked through DNS
   * by this service: the emulator has no identities). Default `local` when `SES_ENDPOINT` is set, else `ses`.
   */
  readonly domainIdentityProvider: 'ses' | 'local';
  /** `MAIL_FROM_SUBDOMAIN`: the custom MAIL FROM subdomain registered for each sending domain (`mail` → mail.example.com). */
  readonly mailFromSubdomain: string;
  /** `DOMAIN_REFRESH_MS`: how often the worker re-checks pending sending domains (ms). */
  readonly domainRefreshMs: number;
}

export type { TrustProxy } from './trust-proxy';
export { ConfigError } from './config-env';

/**
 * Parses and validates configuration.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link Config}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadConfig(env: Env): Config {
  const nodeEnv = str(env, 'NODE_ENV', 'development');
  if (!['production', 'development', 'test'].includes(nodeEnv)) {
    throw new ConfigError('NODE_ENV', `must be production, development or test, got "${nodeEnv}"`);
  }
  const accessKeyId = optional(env, 'AWS_ACCESS_KEY_ID');
  const secretAccessKey = optional(env, 'AWS_SECRET_ACCESS_KEY');
  if (Boolean(accessKeyId) !== Boolean(secretAccessKey)) {
    throw new ConfigError(accessKeyId ? 'AWS_SECRET_ACCESS_KEY' : 'AWS_ACCESS_KEY_ID', 'must be set together with its pair');
  }
  const queuePrefix = str(env, 'QUEUE_PREFIX', '{mailroom}');
  if (!/^[\w{}:.-]{1,64}$/.test(queuePrefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'may hold only letters, digits, _ - . : { } (at most 64)');
  }
  const port = int(env, 'PORT', 8080, 0, 65535);
  const adminToken = optional(env, 'ADMIN_TOKEN');
  if (adminToken !== undefined && adminToken.length < 16) {
    throw new ConfigError('ADMIN_TOKEN', 'must be at least 16 characters');
  }
  const config: Config = {
    env: nodeEnv as Config['env'],
    databaseUrl: url(env, 'DATABASE_URL', 'postgres://postgres@127.0.0.1:5432/mailroom', ['postgres:', 'postgresql:'])!,
    dbPoolSize: int(env, 'DB_POOL_SIZE', 10, 1, 500),
    redisUrl: url(env, 'REDIS_URL', 'redis://127.0.0.1:6379', ['redis:', 'rediss:'])!,
    redisClusterNodes: list(env, 'REDIS_CLUSTER_NODES', []),
    queuePrefix,
    port,
    publicUrl: url(env, 'PUBLIC_URL', `http://localhost:${port}`, ['http:', 'https:'])!,
    adminToken,
    logLevel: str(env, 'LOG_LEVEL', nodeEnv === 'test' ? 'silent' : 'info'),
    logPretty: bool(env, 'LOG_PRETTY', false),
    sesRegion: str(env, 'SES_REGION', 'us-east-1'),
    sesEndpoint: url(env, 'SES_ENDPOINT', undefined, ['http:', 'https:']),
    awsCredentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    sesConfigurationSet: optional(env, 'SES_CONFIGURATION_SET'),
    sesMaxSendRate: optional(env, 'SES_MAX_SEND_RATE') === undefined ? undefined : int(env, 'SES_MAX_SEND_RATE', 14, 1, 10000),
    sesAccountProvider: sesProvider(env, 'SES_ACCOUNT_PROVIDER'),
    sesAccountRefreshMs: int(env, 'SES_ACCOUNT_REFRESH_MS', 300_000, 100, 86_400_000),
    sesQuotaCheckMs: int(env, 'SES_QUOTA_CHECK_MS', 10_000, 100, 3_600_000),
    sesQuotaReserve: fraction(env, 'SES_QUOTA_RESERVE', 0.05),
    sesLocalMaxSendRate: int(env, 'SES_LOCAL_MAX_SEND_RATE', optional(env, 'SES_MAX_SEND_RATE') === undefined ? 14 : int(env, 'SES_MAX_SEND_RATE', 14, 1, 10000), 1, 10000),
    sesLocalMax24HourSend: int(env, 'SES_LOCAL_MAX_24H_SEND', 50_000, 1, 1_000_000_000),
    sesRateSafetyMs: int(env, 'SES_RATE_SAFETY_MS', 50, 0, 500),
    sesTimeoutMs: int(env, 'SES_TIMEOUT_MS', 30_000, 100, 300_000),
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 1000, 1, 10_000_000),
    authCacheTtlMs: int(env, 'AUTH_CACHE_TTL_MS', 10_000, 0, 3_600_000),
    keyRotationGraceHours: int(env, 'KEY_ROTATION_GRACE_HOURS', 24, 0, 24 * 90),
    authNegativeCacheTtlMs: int(env, 'AUTH_NEGATIVE_CACHE_TTL_MS', 5_000, 0, 60_000),
    authFailureLimitPerMinute: int(env, 'AUTH_FAILURE_LIMIT_PER_MINUTE', 20, 1, 1_000_000),
    adminLoginLimitPerMinute: int(env, 'ADMIN_LOGIN_LIMIT_PER_MINUTE', 10, 1, 1_000_000),
    unsubscribeLimitPerMinute: int(env, 'UNSUBSCRIBE_LIMIT_PER_MINUTE', 300, 1, 1_000_000),
    blockedLookupIntervalS: int(env, 'BLOCKED_LOOKUP_INTERVAL_S', 2, 1, 60),
    trustProxy: trustProxy(env),
    workerConcurrency: int(env, 'WORKER_CONCURRENCY', 8, 1, 1000),
    workerHealthPort: int(env, 'WORKER_HEALTH_PORT', 8081, 0, 65535),
    workerLockMs: int(env, 'WORKER_LOCK_MS', 30_000, 1000, 600_000),
    sendLeaseMs: int(env, 'SEND_LEASE_MS', 60_000, 1000, 3_600_000),
    reconcileIntervalMs: int(env, 'RECONCILE_INTERVAL_MS', 30_000, 100, 3_600_000),
    reconcileAfterMs: int(env, 'RECONCILE_AFTER_MS', 60_000, 0, 86_400_000),
    sendMaxAttempts: int(env, 'SEND_MAX_ATTEMPTS', 8, 1, 100),
    sendBackoffMs: int(env, 'SEND_BACKOFF_MS', 5_000, 10, 3_600_000),
    importMaxBytes: int(env, 'IMPORT_MAX_BYTES', 256 * 1024 * 1024, 1, 16 * 1024 * 1024 * 1024),
    importBatchSize: int(env, 'IMPORT_BATCH_SIZE', 5_000, 1, 50_000),
    importConcurrency: int(env, 'IMPORT_CONCURRENCY', 1, 1, 16),
    campaignBatchSize: int(env, 'CAMPAIGN_BATCH_SIZE', 5_000, 1, 50_000),
    campaignQueueWindow: int(env, 'CAMPAIGN_QUEUE_WINDOW', 5_000, 1, 1_000_000),
    campaignTickMs: int(env, 'CAMPAIGN_TICK_MS', 1_000, 10, 60_000),
    campaignLaneSeconds: int(env, 'CAMPAIGN_LANE_SECONDS', 3, 1, 3_600),
    sendFairSharePerMinute: int(env, 'SEND_FAIR_SHARE_PER_MINUTE', 100, 1, 10_000_000),
    campaignPauseRecheckMs: int(env, 'CAMPAIGN_PAUSE_RECHECK_MS', 60_000, 100, 3_600_000),
    segmentRefreshMs: int(env, 'SEGMENT_REFRESH_MS', 300_000, 100, 86_400_000),
    snsTopicArns: list(env, 'SNS_TOPIC_ARNS', []),
    snsCertHosts: list(env, 'SNS_CERT_HOSTS', ['sns.*.amazonaws.com', 'sns.*.amazonaws.com.cn']),
    testMessageRetentionHours: int(env, 'TEST_MESSAGE_RETENTION_HOURS', 168, 1, 24 * 3650),
    reputationMetricsTtlMs: int(env, 'REPUTATION_METRICS_TTL_MS', 60_000, 0, 3_600_000),
    softBounceLimit: int(env, 'SOFT_BOUNCE_LIMIT', 3, 1, 1000),
    softBounceWindowHours: int(env, 'SOFT_BOUNCE_WINDOW_HOURS', 72, 1, 24 * 365),
    guardrails: Object.freeze({
      minSample: int(env, 'GUARDRAIL_MIN_SAMPLE', DEFAULT_GUARDRAILS.minSample, 1, 10_000_000),
      maxHardBounceRate: fraction(env, 'GUARDRAIL_MAX_HARD_BOUNCE_RATE', DEFAULT_GUARDRAILS.maxHardBounceRate),
      maxComplaintRate: fraction(env, 'GUARDRAIL_MAX_COMPLAINT_RATE', DEFAULT_GUARDRAILS.maxComplaintRate),
    }),
    webhookRetryScheduleMs: intList(env, 'WEBHOOK_RETRY_SCHEDULE_MS', [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000], 0, 7 * 86_400_000),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    webhookConcurrency: int(env, 'WEBHOOK_CONCURRENCY', 16, 1, 1000),
    webhookAllowPrivateTargets: bool(env, 'WEBHOOK_ALLOW_PRIVATE_TARGETS', false),
    workflowConcurrency: int(env, 'WORKFLOW_CONCURRENCY', 16, 1, 1000),
    workflowLeaseMs: int(env, 'WORKFLOW_LEASE_MS', 60_000, 500, 3_600_000),
    workflowInboxPollMs: int(env, 'WORKFLOW_INBOX_POLL_MS', 1_000, 10, 60_000),
    workflowRetryBackoffMs: int(env, 'WORKFLOW_RETRY_BACKOFF_MS', 5_000, 10, 3_600_000),
    dnsServers: list(env, 'DNS_SERVERS', []),
    dnsTimeoutMs: int(env, 'DNS_TIMEOUT_MS', 2_000, 50, 30_000),
    dnsTries: int(env, 'DNS_TRIES', 2, 1, 5),
    dnsCacheTtlS: int(env, 'DNS_CACHE_TTL_S', 3_600, 0, 7 * 86_400),
    domainIdentityProvider: sesProvider(env, 'DOMAIN_IDENTITY_PROVIDER'),
    mailFromSubdomain: str(env, 'MAIL_FROM_SUBDOMAIN', 'mail'),
    domainRefreshMs: int(env, 'DOMAIN_REFRESH_MS', 60_000, 100, 86_400_000),
  };
  if (config.sesQuotaReserve > 0.5) throw new ConfigError('SES_QUOTA_RESERVE', `must be at most 0.5, got ${config.sesQuotaReserve}`);
  for (const node of config.redisClusterNodes) {
    if (!/^[\w.-]+:\d{1,5}$/.test(node)) throw new ConfigError('REDIS_CLUSTER_NODES', `must list host:port entries, got "${node}"`);
  }
  if (config.redisClusterNodes.length > 0 && !/\{[^{}]+\}/.test(config.queuePrefix)) {
    throw new ConfigError('QUEUE_PREFIX', 'must carry a hash tag ({name}) with REDIS_CLUSTER_NODES, so every key of a queue is in one slot');
  }
  for (const server of config.dnsServers) {
    if (!/^(\[[0-9a-f:]+\]|[\w.-]+)(:\d{1,5})?$/i.test(server)) throw new ConfigError('DNS_SERVERS', `must list host or host:port entries, got "${server}"`);
  }
  if (!/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/.test(config.mailFromSubdomain)) {
    throw new ConfigError('MAIL_FROM_SUBDOMAIN', 'must be one DNS label (letters, digits, hyphens)');
  }
  for (const arn of config.snsTopicArns) {
    if (!/^arn:aws[\w-]*:sns:[\w-]+:\d{12}:[\w-]{1,256}$/.test(arn)) throw new ConfigError('SNS_TOPIC_ARNS', `must list SNS topic ARNs, got "${arn}"`);
  }
  for (const host of config.snsCertHosts) {
    if (!/^[\w*.-]+(:\d+)?$/.test(host)) throw new ConfigError('SNS_CERT_HOSTS', `must list host names, got "${host}"`);
  }
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(config.logLevel)) {
    throw new ConfigError('LOG_LEVEL', `must be a pino level, got "${config.logLevel}"`);
  }
  return Object.freeze(config);
}
