/**
 * The worker's own slice of the runtime configuration: its health port and the reconciler's intervals. Only the
 * worker reads these; the slice lives here rather than in `apps/worker` because {@link loadConfig} (config.ts)
 * composes every slice and a package never imports an app.
 *
 * @module
 */
import { bool, int, type Env } from '@mailroom/platform/config-env';

/**
 * Worker settings.
 *
 * @process worker
 * @group worker
 */
export interface WorkerConfig {
  /** `WORKER_HEALTH_PORT`: port of the worker's `/health/live` and `/health/ready` (0–65535, default 8081). */
  readonly workerHealthPort: number;
  /** `RECONCILE_INTERVAL_MS`: how often the reconciler looks for queued emails without a job (ms, default 30000). */
  readonly reconcileIntervalMs: number;
  /** `RECONCILE_AFTER_MS`: a queued email older than this (ms, default 60000) is checked for a live job. */
  readonly reconcileAfterMs: number;
  /**
   * `RECONCILE_ON_REDIS_LOSS`: when Redis is found without our data (restarted empty, flushed), reconcile every
   * pending email at once instead of at the next pass (default true). Off only where several deployments share one
   * database (the test suite), since the pass adopts every pending email of the database.
   */
  readonly reconcileOnRedisLoss: boolean;
}

/**
 * Parses and validates the worker slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link WorkerConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadWorkerConfig(env: Env): WorkerConfig {
  return Object.freeze({
    workerHealthPort: int(env, 'WORKER_HEALTH_PORT', 8081, 0, 65535),
    reconcileIntervalMs: int(env, 'RECONCILE_INTERVAL_MS', 30_000, 100, 3_600_000),
    reconcileAfterMs: int(env, 'RECONCILE_AFTER_MS', 60_000, 0, 86_400_000),
    reconcileOnRedisLoss: bool(env, 'RECONCILE_ON_REDIS_LOSS', true),
  });
}
