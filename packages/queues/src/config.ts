/**
 * The queues slice of the runtime configuration: what the queue catalog reads for job options and consumer
 * settings (worker concurrency and job lock, per-queue concurrency, send retries, the webhook retry schedule and
 * timeout) and the send lanes' fair share.
 *
 * @module
 */
import { int, intList, renamed, type Env } from '@mailroom/platform/config-env';

/**
 * Job options, consumer settings and fair share of the queues.
 *
 * @process worker
 * @group tuning
 */
export interface QueueConfig {
  /**
   * - `SEND_CONCURRENCY`: `send` jobs processed at once per worker process (1–1000, default 8): the bound on the
   *   emails a process has in flight to SES.
   * - `WORKER_CONCURRENCY`: the former name of `SEND_CONCURRENCY`, still read when that one is not set.
   */
  readonly sendConcurrency: number;
  /** `WORKER_LOCK_MS`: BullMQ job lock (ms, default 30000); a dead worker's jobs are retried after about this long. */
  readonly workerLockMs: number;
  /**
   * `SEND_MAX_ATTEMPTS`: attempts for transient SES failures before an email is marked failed (1–100, default 8).
   *
   * @process api, worker
   */
  readonly sendMaxAttempts: number;
  /**
   * `SEND_BACKOFF_MS`: base of the exponential backoff between attempts (ms, default 5000).
   *
   * @process api, worker
   */
  readonly sendBackoffMs: number;
  /** `IMPORT_CONCURRENCY`: imports processed at once per worker process (1–16, default 1). */
  readonly importConcurrency: number;
  /**
   * `SEND_FAIR_SHARE_PER_MINUTE`: emails one project may enqueue per minute in the transactional (or workflow)
   * lane at the lane's own priority (default 100); beyond it its mail moves one priority step down per tenfold
   * (three steps at most, still ahead of the next lane), so another project's mail overtakes a burst.
   *
   * @process api, worker
   */
  readonly sendFairSharePerMinute: number;
  /**
   * `WEBHOOK_RETRY_SCHEDULE_MS`: comma-separated waits (ms) before each retry of a failed webhook delivery.
   * Default: 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h (about 28 hours in all, 8 attempts).
   *
   * @process api, worker
   */
  readonly webhookRetryScheduleMs: readonly number[];
  /** `WEBHOOK_TIMEOUT_MS`: how long one webhook attempt may take, connection included (ms, 100–120000, default 10000). */
  readonly webhookTimeoutMs: number;
  /** `WEBHOOK_CONCURRENCY`: webhook deliveries in flight per worker process (1–1000, default 16). */
  readonly webhookConcurrency: number;
  /**
   * `WORKFLOW_CONCURRENCY`: workflow executions run at once per worker process (1–1000, default 16). Each holds a
   * database connection while it moves, so more than `DB_POOL_SIZE` only queues on the pool.
   */
  readonly workflowConcurrency: number;
}

/**
 * Parses and validates the queues slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link QueueConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadQueueConfig(env: Env): QueueConfig {
  return Object.freeze({
    sendConcurrency: int(env, renamed(env, 'SEND_CONCURRENCY', 'WORKER_CONCURRENCY'), 8, 1, 1000),
    workerLockMs: int(env, 'WORKER_LOCK_MS', 30_000, 1000, 600_000),
    sendMaxAttempts: int(env, 'SEND_MAX_ATTEMPTS', 8, 1, 100),
    sendBackoffMs: int(env, 'SEND_BACKOFF_MS', 5_000, 10, 3_600_000),
    importConcurrency: int(env, 'IMPORT_CONCURRENCY', 1, 1, 16),
    sendFairSharePerMinute: int(env, 'SEND_FAIR_SHARE_PER_MINUTE', 100, 1, 10_000_000),
    webhookRetryScheduleMs: intList(
      env,
      'WEBHOOK_RETRY_SCHEDULE_MS',
      [5_000, 300_000, 1_800_000, 7_200_000, 18_000_000, 36_000_000, 36_000_000],
      0,
      7 * 86_400_000,
    ),
    webhookTimeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 10_000, 100, 120_000),
    webhookConcurrency: int(env, 'WEBHOOK_CONCURRENCY', 16, 1, 1000),
    workflowConcurrency: int(env, 'WORKFLOW_CONCURRENCY', 16, 1, 1000),
  });
}
