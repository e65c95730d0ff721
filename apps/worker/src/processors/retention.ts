/**
 * Data retention as a maintenance task: the sending domain's pass (`@mailroom/retention/retention`) every
 * {@link RETENTION_INTERVAL_MS}, one pass per interval across all processes (the lock expires rather than being
 * released).
 *
 * @module
 */
import { runRetentionPass, type RetentionDeps } from '@mailroom/retention/retention';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** How often the retention pass runs (ms): a record outlives its retention by at most about this long. */
export const RETENTION_INTERVAL_MS = 10 * 60_000;

/** The retention pass as a maintenance task: every {@link RETENTION_INTERVAL_MS}, one pass per interval across processes. */
export function retentionTask(deps: RetentionDeps): MaintenanceTask {
  return oncePerInterval('retention', RETENTION_INTERVAL_MS, () => runRetentionPass(deps));
}
