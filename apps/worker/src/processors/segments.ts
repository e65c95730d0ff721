/**
 * The segment refresher: recounts DYNAMIC segments whose count is missing (new or changed filter) or older than
 * `SEGMENT_REFRESH_MS`, and for tracked segments records `segment.<name>.entry` / `.exit` events for the
 * contacts whose membership changed since the last pass (so membership events lag by at most that interval).
 *
 * Runs as the `segments` maintenance task (see `maintenance.ts`).
 *
 * @module
 */
import type { Config } from '@mailroom/config/config';
import type { Logger } from '@mailroom/platform/logger';
import { dueSegments, refreshSegment } from '@mailroom/audiences/queries/segments';
import { type Database } from '@mailroom/db/client';
import type { MaintenanceTask } from './maintenance';

/** Segments refreshed per pass at most. */
const PER_PASS = 20;

/** Dependencies of the refresher. */
export interface SegmentRefresherDeps {
  config: Config;
  database: Database;
  logger: Logger;
}

/** One pass. @returns how many segments were refreshed. */
export async function refreshSegmentsOnce(deps: SegmentRefresherDeps): Promise<number> {
  const due = await dueSegments(deps.database.db, deps.config.segmentRefreshMs, PER_PASS);
  for (const segment of due) {
    try {
      const r = await refreshSegment(deps.database.db, segment);
      if (r.entered || r.exited) deps.logger.info({ segmentId: segment.id, ...r }, 'segment membership changed');
    } catch (err) {
      deps.logger.error({ err, segmentId: segment.id }, 'segment refresh failed');
    }
  }
  return due.length;
}

/**
 * The refresher as a maintenance task: ticks every second (or `SEGMENT_REFRESH_MS` when shorter) and picks the
 * segments that are due; its lock is held for the pass (a minute at most) and released after it, so a slow pass
 * never runs twice at once.
 */
export function segmentsTask(deps: SegmentRefresherDeps): MaintenanceTask {
  return {
    name: 'segments',
    intervalMs: Math.min(1_000, deps.config.segmentRefreshMs),
    lockMs: 60_000,
    release: true,
    run: async () => ({ refreshed: await refreshSegmentsOnce(deps) }),
  };
}
