/**
 * The sending slice of the runtime configuration: the send lease, how the SES account's rate and quota are
 * followed and kept, how long test messages stay in the test sink, and the service defaults of data retention.
 *
 * @module
 */
import { bool, ConfigError, fraction, int, type Env } from '@mailroom/platform/config-env';
import {
  RETENTION_DEFAULTS,
  RETENTION_ENV,
  RETENTION_FIELDS,
  RETENTION_MAX_DAYS,
  RETENTION_MIN_DAYS,
  type RetentionSettings,
} from '@mailroom/retention/retention-settings';

/**
 * Send lease, send-rate gate, quota and test message settings.
 *
 * @process worker
 * @group tuning
 */
export interface SendingConfig {
  /** `SEND_LEASE_MS`: after this long (ms, default 60000) an email claimed by a worker that died may be claimed again. */
  readonly sendLeaseMs: number;
  /**
   * `SEND_BATCH_SIZE`: most claims (and most finishes) of one worker process's concurrent send jobs folded into
   * one statement (1–500, default 50; 1 runs each on its own). A claim or finish waits only while two such
   * statements are already running, so at a low rate each runs alone.
   */
  readonly sendBatchSize: number;
  /**
   * `SES_BULK_SEND`: campaign mail goes to SES in `SendBulkEmail` calls, each carrying the emails of one send job
   * (up to 50) rendered by Mailroom (default true; false sends each email on its own with `SendEmail`).
   */
  readonly sesBulkSend: boolean;
  /**
   * `SES_BULK_COALESCE`: one-email send jobs of a worker process (transactional, workflow, campaign mail at a low
   * rate) whose SES calls are ready in the same turn of the event loop share `SendBulkEmail` calls; an email alone in
   * its turn goes by `SendEmail`, without waiting (default true; needs `SES_BULK_SEND`; false sends each one-email
   * job's message with `SendEmail` and keeps Mailroom's own `Message-ID` on all of them).
   */
  readonly sesBulkCoalesce: boolean;
  /** `SES_ACCOUNT_REFRESH_MS`: how often each worker re-reads the SES account (send rate, quota) (ms, default 300000). */
  readonly sesAccountRefreshMs: number;
  /**
   * `SES_QUOTA_CHECK_MS`: how often the 24-hour quota is checked (campaigns paused or resumed) (ms, default 10000).
   * Between two account reads the deployment's own sends since the last read are added, so a check sees them at
   * once.
   */
  readonly sesQuotaCheckMs: number;
  /**
   * `SES_QUOTA_RESERVE`: share of the 24-hour quota kept for transactional and workflow mail (fraction, 0–0.5,
   * default 0.05): campaigns pause at `max24HourSend × (1 − reserve)` sent and resume below
   * `max24HourSend × (1 − 2 × reserve)`.
   */
  readonly sesQuotaReserve: number;
  /**
   * `SES_RATE_SAFETY_MS`: margin (ms, 0–500, default 50) added to the send-rate gate's one-second window. Sends are
   * recorded when their request has been written, so the margin covers only the way from the socket to SES (and
   * the clock of whoever counts there): at most `rate` requests leave in any `1000 + margin` ms (`rate`: the send
   * rate in use, see `SES_MAX_SEND_RATE`), spaced by at least `(1000 + margin) / rate` ms. 50 ms held 14/s in
   * every run of the scale test beside two CPU burners (25 ms let a 15th send in once in ten); it costs 2.4% of
   * the rate.
   */
  readonly sesRateSafetyMs: number;
  /**
   * `SES_FAILOVER_WINDOW_MS`: how long (ms, 1000–3600000, default 60000) a delivery connection's SES must keep
   * failing (5xx, unreachable or timing out, throttling) with no success between before the connection is marked
   * unhealthy for every worker; its domains then go through another connection that has them verified, and come
   * back once a probe (`GetAccount`, every `SES_FAILOVER_PROBE_MS`) finds its SES answering again.
   *
   * @process worker
   * @group worker
   */
  readonly sesFailoverWindowMs: number;
  /**
   * `SES_FAILOVER_PROBE_MS`: how often an unhealthy delivery connection is probed (ms, 200–600000, default 15000;
   * one worker of the deployment probes each time).
   *
   * @process worker
   * @group worker
   */
  readonly sesFailoverProbeMs: number;
  /**
   * `TEST_MESSAGE_RETENTION_HOURS`: how long the MIME message of a test email is kept in the test sink after it
   * was stored (hours, at least 1; default 168 = 7 days). Older ones are deleted by the worker's `test-messages`
   * maintenance task; `GET /emails/{id}/raw` then answers 404 saying the message expired.
   *
   * @group worker
   */
  readonly testMessageRetentionHours: number;
  /**
   * Service defaults of data retention (days, 1–36500; a project's `retention` overrides each), applied by the
   * worker's `retention` maintenance task:
   * - `RETENTION_EMAIL_CONTENT_DAYS`: content of final emails (days, default 30).
   * - `RETENTION_EMAIL_DAYS`: non-campaign email metadata and timeline (days, default 365).
   * - `RETENTION_EVENT_DAYS`: contact events (days, default 365).
   * - `RETENTION_WEBHOOK_DAYS`: finished webhook deliveries and attempts (days, default 30).
   * - `RETENTION_WORKFLOW_EXECUTION_DAYS`: finished workflow executions and step runs (days, default 90).
   * - `RETENTION_INBOUND_DAYS`: received (inbound) messages, their raw bytes and attachments (days, default 30).
   *
   * @process api, worker
   * @group worker
   */
  readonly retention: Readonly<RetentionSettings>;
}

/**
 * Parses and validates the sending slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link SendingConfig}.
 * @throws {@link ConfigError} naming the first bad variable.
 */
export function loadSendingConfig(env: Env): SendingConfig {
  const config: SendingConfig = {
    sendLeaseMs: int(env, 'SEND_LEASE_MS', 60_000, 1000, 3_600_000),
    sendBatchSize: int(env, 'SEND_BATCH_SIZE', 50, 1, 500),
    sesBulkSend: bool(env, 'SES_BULK_SEND', true),
    sesBulkCoalesce: bool(env, 'SES_BULK_COALESCE', true),
    sesAccountRefreshMs: int(env, 'SES_ACCOUNT_REFRESH_MS', 300_000, 100, 86_400_000),
    sesQuotaCheckMs: int(env, 'SES_QUOTA_CHECK_MS', 10_000, 100, 3_600_000),
    sesQuotaReserve: fraction(env, 'SES_QUOTA_RESERVE', 0.05),
    sesRateSafetyMs: int(env, 'SES_RATE_SAFETY_MS', 50, 0, 500),
    sesFailoverWindowMs: int(env, 'SES_FAILOVER_WINDOW_MS', 60_000, 1000, 3_600_000),
    sesFailoverProbeMs: int(env, 'SES_FAILOVER_PROBE_MS', 15_000, 200, 600_000),
    testMessageRetentionHours: int(env, 'TEST_MESSAGE_RETENTION_HOURS', 168, 1, 24 * 3650),
    retention: Object.freeze(
      Object.fromEntries(
        RETENTION_FIELDS.map((f) => [
          f,
          int(env, RETENTION_ENV[f], RETENTION_DEFAULTS[f], RETENTION_MIN_DAYS, RETENTION_MAX_DAYS),
        ]),
      ) as unknown as RetentionSettings,
    ),
  };
  if (config.sesQuotaReserve > 0.5)
    throw new ConfigError('SES_QUOTA_RESERVE', `must be at most 0.5, got ${config.sesQuotaReserve}`);
  return Object.freeze(config);
}
