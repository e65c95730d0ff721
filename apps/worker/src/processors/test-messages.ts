/**
 * Retention of the test-mode sink as a maintenance task: the sending domain's pass
 * (`@mailroom/sending/test-messages`) every {@link PRUNE_INTERVAL_MS}, one pass per interval across all processes
 * (the lock expires rather than being released).
 *
 * @module
 */
import { pruneTestMessagesOnce, type TestMessagePruneDeps } from '@mailroom/sending/test-messages';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** How often the retention pass runs (ms): a message outlives its retention by at most about this long. */
export const PRUNE_INTERVAL_MS = 10 * 60_000;

/** The retention pass as a maintenance task: every {@link PRUNE_INTERVAL_MS}, one pass per interval across processes. */
export function testMessagesTask(deps: TestMessagePruneDeps): MaintenanceTask {
  return oncePerInterval('test-messages', PRUNE_INTERVAL_MS, () => pruneTestMessagesOnce(deps));
}
