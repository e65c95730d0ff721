/**
 * Folding counter deltas as a maintenance task (`@mailroom/contacts/queries/counters`): every
 * {@link COUNTER_FOLD_INTERVAL_MS}, one pass per interval across all worker processes. Reads never wait for it
 * (they add pending deltas); the fold keeps the delta tables small so those reads stay cheap.
 *
 * @module
 */
import type { Database } from '@mailroom/db/client';
import { foldAllCounterDeltas } from '@mailroom/contacts/queries/counters';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** How often deltas are folded (ms). */
export const COUNTER_FOLD_INTERVAL_MS = 1_000;

/** The fold as a maintenance task: every {@link COUNTER_FOLD_INTERVAL_MS}, one pass per interval across processes. */
export function countersTask(deps: { database: Database }): MaintenanceTask {
  return oncePerInterval('counters', COUNTER_FOLD_INTERVAL_MS, async () => ({
    folded: await foldAllCounterDeltas(deps.database.db),
  }));
}
