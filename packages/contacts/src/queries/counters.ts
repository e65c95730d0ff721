/**
 * Maintained counters without a hot row (migration `0017_counter_deltas`).
 *
 * `contact_stats` (contacts per project) and `event_names` (count and first/last seen per event name) are not
 * updated by writers: the statement triggers on `contacts` and `events` append one aggregated delta row per writing
 * statement to `contact_stat_deltas` / `event_name_deltas`, so concurrent writers of one project never wait on a
 * shared row until each other's commit. {@link foldCounterDeltas} moves deltas into the counters; the views
 * `contact_stats_now` and `event_names_now` add the deltas not yet folded, so reads are exact at every moment
 * whether or not a fold has run.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** Delta rows folded per table by one {@link foldCounterDeltas} statement. */
export const COUNTER_FOLD_BATCH = 10_000;

/**
 * Folds up to `batchSize` delta rows of each delta table into `contact_stats` and `event_names`, in one
 * transaction; rows another fold holds are skipped (two workers folding at once never count a delta twice). A name
 * whose count reaches zero is removed; deltas of a deleted project are dropped.
 *
 * @returns the number of delta rows folded (0 when there was nothing to fold).
 */
export async function foldCounterDeltas(db: DbOrTx, batchSize = COUNTER_FOLD_BATCH): Promise<number> {
  const r = await db.execute<{ n: number }>(sql`select mailroom_fold_counter_deltas(${batchSize}::int) as n`);
  return Number(r.rows[0].n);
}

/**
 * Folds until no delta is left (at most `maxBatches` statements, so a backlog cannot hold one pass forever).
 *
 * @returns the number of delta rows folded.
 */
export async function foldAllCounterDeltas(
  db: DbOrTx,
  maxBatches = 100,
  batchSize = COUNTER_FOLD_BATCH,
): Promise<number> {
  let total = 0;
  for (let i = 0; i < maxBatches; i++) {
    const n = await foldCounterDeltas(db, batchSize);
    total += n;
    if (n < batchSize) break;
  }
  return total;
}
