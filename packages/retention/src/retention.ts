/**
 * Data retention: the worker's `retention` maintenance task applies each project's retention settings
 * ({@link effectiveRetention}: its `projects.retention` overrides over `RETENTION_*_DAYS`) in bounded batches.
 *
 * - **Whole months first.** A month partition of a history table whose every row is past retention for every
 *   project is detached and dropped whole ({@link dropExpiredPartitions}); the batches handle the rest.
 * - **Bounded batches.** Each statement changes at most {@link RETENTION_BATCH} rows of one kind of one project,
 *   found through an index made for its predicate, oldest first (`@mailroom/retention/queries/retention`); each statement
 *   commits on its own, so no lock outlives a batch and nothing scans a table.
 * - **Fair, within a budget.** A pass works in rounds: every (project, kind) with work left gets one batch per
 *   round, so one project's backlog never starves the others. No batch starts after {@link RETENTION_PASS_BUDGET_MS};
 *   what is left waits for the next pass (`more: true`).
 * - **Derived data stays right.** `event_names` counts follow deleted events by statement trigger; timelines,
 *   webhook attempts and step runs go by cascade; a campaign's emails stay while the campaign exists (its stats
 *   are counted from them); contacts are never deleted here, so contact and segment counts do not move (a DYNAMIC
 *   segment with an `event.<name>` condition is re-counted by the segment refresher like any other change).
 *
 * @module
 */
import { projectsWithRetention, retentionBatch, RETENTION_KINDS, type RetentionKind } from './queries/retention';
import { effectiveRetention, type RetentionSettings } from './retention-settings';
import { dropExpiredPartitions, type PartitionDeps } from './partitions';

/** Rows per statement. */
export const RETENTION_BATCH = 1_000;

/** No further batch starts after this long in one pass (ms). */
export const RETENTION_PASS_BUDGET_MS = 30_000;

/** The setting (days) that governs each kind. */
const DAYS_OF: Readonly<Record<RetentionKind, keyof RetentionSettings>> = {
  emailContent: 'emailContentDays',
  attachments: 'emailContentDays',
  emails: 'emailDays',
  events: 'eventDays',
  webhookDeliveries: 'webhookDays',
  workflowExecutions: 'workflowExecutionDays',
  inbound: 'inboundDays',
};

/** Dependencies of the retention pass: the same as the partition pass's (it drops whole months first). */
export type RetentionDeps = PartitionDeps;

/** What one pass did. */
export interface RetentionPassResult {
  /** Rows changed (`emailContent`) or deleted, by kind, over all projects. */
  counts: Record<RetentionKind, number>;
  /** Statements run. */
  batches: number;
  /** The budget ran out with work left: the next pass goes on. */
  more: boolean;
  /** Month partitions dropped whole before the batches ({@link dropExpiredPartitions}). */
  partitionsDropped: string[];
  /** Wall time of dropping those partitions (ms; 0 when none was due), apart from the batches after it. */
  partitionMs: number;
  /** Month partitions whose drop failed this pass (logged; the next pass tries again). */
  partitionsFailed: string[];
}

/**
 * One retention pass over every project.
 *
 * @param options.batchSize - rows per statement (default {@link RETENTION_BATCH}).
 * @param options.budgetMs - no batch starts after this long (ms, default {@link RETENTION_PASS_BUDGET_MS}).
 * @param options.maxBatches - no batch starts after this many (default unbounded; tests use it to stop a pass early).
 * @param options.partitions - false: no month partition is dropped first (default true, {@link dropExpiredPartitions}).
 * @param options.startAt - the project (index in id order) the pass begins with; default a random one, so that a
 *   pass whose budget runs out before the last projects does not leave the same ones behind every time.
 * @throws the database's error (the maintenance job fails and the next tick retries; batches already run stay done).
 */
export async function runRetentionPass(
  deps: RetentionDeps,
  options: { batchSize?: number; budgetMs?: number; maxBatches?: number; startAt?: number; partitions?: boolean } = {},
): Promise<RetentionPassResult> {
  const batchSize = options.batchSize ?? RETENTION_BATCH;
  const budgetMs = options.budgetMs ?? RETENTION_PASS_BUDGET_MS;
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  const started = Date.now();
  const { db } = deps.database;
  const counts = Object.fromEntries(RETENTION_KINDS.map((k) => [k, 0])) as Record<RetentionKind, number>;
  const partitions = options.partitions === false ? { dropped: [], failed: [], ms: 0 } : await timedDrop(deps);
  const projects = await projectsWithRetention(db);
  const start =
    projects.length === 0 ? 0 : (options.startAt ?? Math.floor(Math.random() * projects.length)) % projects.length;
  let work = [...projects.slice(start), ...projects.slice(0, start)].flatMap((p) => {
    const settings = effectiveRetention(deps.config.retention, p.retention);
    return RETENTION_KINDS.map((kind) => ({ projectId: p.id, kind, days: settings[DAYS_OF[kind]] }));
  });
  let batches = 0;
  while (work.length > 0) {
    const left: typeof work = [];
    for (const item of work) {
      if (Date.now() - started >= budgetMs || batches >= maxBatches)
        return finish(deps, counts, batches, true, partitions);
      const n = await retentionBatch(db, item.kind, item.projectId, item.days, batchSize);
      batches++;
      counts[item.kind] += n;
      if (n >= batchSize) left.push(item);
    }
    work = left;
  }
  return finish(deps, counts, batches, false, partitions);
}

function finish(
  deps: RetentionDeps,
  counts: Record<RetentionKind, number>,
  batches: number,
  more: boolean,
  partitions: { dropped: string[]; failed: string[]; ms: number },
): RetentionPassResult {
  if (Object.values(counts).some((n) => n > 0) || partitions.dropped.length > 0) {
    deps.logger.info(
      { counts, batches, more, partitionsDropped: partitions.dropped.length, partitionMs: Math.round(partitions.ms) },
      'retention pass',
    );
  }
  return {
    counts,
    batches,
    more,
    partitionsDropped: partitions.dropped,
    partitionsFailed: partitions.failed,
    partitionMs: partitions.ms,
  };
}

/** {@link dropExpiredPartitions} with its wall time (ms). */
async function timedDrop(deps: RetentionDeps): Promise<{ dropped: string[]; failed: string[]; ms: number }> {
  const t = performance.now();
  const r = await dropExpiredPartitions(deps);
  return { ...r, ms: performance.now() - t };
}
