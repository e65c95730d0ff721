/**
 * Time partitions of the history tables (docs/architecture.md#time-partitions; `@mailroom/retention/queries/partitions`,
 * migration `0018_partitioning`) as work of the maintenance queue:
 *
 * - {@link runPartitionPass} (the worker's `partitions` task): every month partition from the current month to
 *   {@link PARTITION_MONTHS_AHEAD} months ahead exists, and rows that landed in a default partition are counted and
 *   reported (a warning in the log, `defaultRows` in the job's result).
 * - {@link dropExpiredPartitions} (the start of each retention pass): a month whose every row is past retention for
 *   every project (it ends before now minus the longest effective setting of its kind, overrides included) is
 *   detached and dropped whole, unless something in it must stay (campaign emails, emails not yet final, pending
 *   webhook deliveries); the batched deletes handle what is left. A month of `workflow_step_runs` (whose rows go by
 *   cascade with their execution) goes once empty and a month older than the longest `workflowExecutionDays`.
 *
 * @module
 */
import type { Logger } from '@mailroom/platform/logger';
import { type Database } from '@mailroom/db/client';
import {
  defaultPartitionRows,
  dropMonthPartition,
  ensureMonthPartitions,
  finishDetachedPartitions,
  listMonthPartitions,
  monthStartMs,
  PARTITIONED_TABLES,
  type PartitionedTable,
} from './queries/partitions';
import { projectsWithRetention } from './queries/retention';
import { effectiveRetention, type RetentionSettings } from './retention-settings';

/** Month partitions kept ready after the current month. */
export const PARTITION_MONTHS_AHEAD = 3;

/** Dependencies of the partition tasks. */
export interface PartitionDeps {
  /** The service defaults of data retention (the sending slice's `retention`, `RETENTION_*_DAYS`). */
  config: { readonly retention: Readonly<RetentionSettings> };
  database: Database;
  logger: Logger;
}

/** What one partition pass did. */
export interface PartitionPassResult {
  /** Rows in each table's default partition (counted up to 100,000). */
  defaultRows: Record<PartitionedTable, number>;
  /** Months (`table:YYYY-MM`) not created because the default partition holds rows of theirs that cannot move. */
  blocked: string[];
  /** Tables whose partitions could not be made this pass (their error is logged; the next pass tries again). */
  failed: PartitionedTable[];
}

/**
 * Creates the month partitions of every history table from the current month to {@link PARTITION_MONTHS_AHEAD}
 * months ahead, and counts the rows in the default partitions.
 *
 * @param now - the clock (Unix epoch ms; tests move it).
 */
export async function runPartitionPass(deps: PartitionDeps, now = Date.now()): Promise<PartitionPassResult> {
  const { db } = deps.database;
  const result: PartitionPassResult = { defaultRows: {} as Record<PartitionedTable, number>, blocked: [], failed: [] };
  for (const table of PARTITIONED_TABLES) {
    try {
      const blocked = await ensureMonthPartitions(
        db,
        table,
        monthStartMs(now),
        monthStartMs(now, PARTITION_MONTHS_AHEAD),
      );
      result.blocked.push(...blocked.map((ms) => `${table}:${new Date(ms).toISOString().slice(0, 7)}`));
    } catch (err) {
      // A lock timeout on a busy parent: the months ahead leave room for the next pass.
      deps.logger.error({ err, table }, 'creating month partitions failed');
      result.failed.push(table);
    }
    result.defaultRows[table] = await defaultPartitionRows(db, table);
  }
  const strays = Object.entries(result.defaultRows).filter(([, n]) => n > 0);
  if (strays.length > 0 || result.blocked.length > 0) {
    deps.logger.warn(
      { defaultRows: Object.fromEntries(strays), blocked: result.blocked },
      'rows outside the month partitions (default partitions)',
    );
  }
  return result;
}

/** The setting (days) that governs each partitioned table. */
const DAYS_OF: Readonly<Record<PartitionedTable, keyof RetentionSettings>> = {
  emails: 'emailDays',
  email_events: 'emailDays',
  events: 'eventDays',
  webhook_deliveries: 'webhookDays',
  webhook_attempts: 'webhookDays',
  workflow_step_runs: 'workflowExecutionDays',
};

/**
 * Time (ms) a month waits beyond its setting before it may go. A step-runs month holds the runs of the executions
 * started in it, and an execution's retention counts from when it finished: the month goes only once empty (see
 * `dropMonthPartition`), and a month besides, so that a month still receiving runs is never the one dropped.
 */
const GRACE_MS: Readonly<Partial<Record<PartitionedTable, number>>> = { workflow_step_runs: 31 * 86_400_000 };

/**
 * The longest effective retention (days) of each setting over every project (the service default when there is
 * no project): a month older than that is past retention for all of them.
 */
export async function longestRetention(deps: Pick<PartitionDeps, 'config' | 'database'>): Promise<RetentionSettings> {
  const projects = await projectsWithRetention(deps.database.db);
  const all =
    projects.length === 0
      ? [deps.config.retention]
      : projects.map((p) => effectiveRetention(deps.config.retention, p.retention));
  const longest = { ...all[0] };
  for (const s of all)
    for (const k of Object.keys(longest) as (keyof RetentionSettings)[]) longest[k] = Math.max(longest[k], s[k]);
  return longest;
}

/**
 * Detaches and drops every month partition whose whole month is past retention for every project, unless
 * something in it must stay. A partition whose lock could not be had in time is left for the next pass.
 *
 * @param now - the clock (Unix epoch ms).
 * @returns the names of the partitions dropped (oldest first per table), and of those whose drop failed (the error
 *   is logged; a lock not had in time, typically).
 */
export async function dropExpiredPartitions(
  deps: PartitionDeps,
  now = Date.now(),
): Promise<{ dropped: string[]; failed: string[] }> {
  const { db } = deps.database;
  const dropped = await finishDetachedPartitions(db);
  const failed: string[] = [];
  const longest = await longestRetention(deps);
  for (const table of PARTITIONED_TABLES) {
    const cutoff = now - longest[DAYS_OF[table]] * 86_400_000 - (GRACE_MS[table] ?? 0);
    for (const p of await listMonthPartitions(db, table)) {
      if (p.toMs > cutoff) break;
      try {
        if (await dropMonthPartition(db, p)) dropped.push(p.name);
        // else: something in it must stay; a later month may still go
      } catch (err) {
        deps.logger.error({ err, partition: p.name }, 'dropping a month partition failed');
        failed.push(p.name);
        break;
      }
    }
  }
  if (dropped.length > 0) deps.logger.info({ dropped }, 'retention dropped month partitions');
  return { dropped, failed };
}
