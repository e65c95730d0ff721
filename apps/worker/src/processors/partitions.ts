/**
 * Time partitions as a maintenance task: every {@link PARTITIONS_INTERVAL_MS}, one pass across all processes
 * (`@mailroom/retention/partitions`): the month partitions of the history tables are made ahead and the rows in their
 * default partitions are reported. Dropping old months is part of the retention pass.
 *
 * @module
 */
import { runPartitionPass, type PartitionDeps } from '@mailroom/retention/partitions';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** How often the partition pass runs (ms); a pass is a handful of catalog look-ups, and the months kept ahead leave months of slack. */
export const PARTITIONS_INTERVAL_MS = 10 * 60_000;

/** The partition pass as a maintenance task: every {@link PARTITIONS_INTERVAL_MS}, one pass per interval across processes. */
export function partitionsTask(deps: PartitionDeps): MaintenanceTask {
  return oncePerInterval('partitions', PARTITIONS_INTERVAL_MS, () => runPartitionPass(deps));
}
