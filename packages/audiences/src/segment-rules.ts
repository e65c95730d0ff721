/**
 * The rules of segments: a DYNAMIC segment is defined by its filter, a STATIC one by explicit members; a segment's
 * type never changes; a segment that campaigns still fan out from cannot be deleted, and the SCHEDULED campaigns
 * on a deleted one fail (announced as `campaign.failed`).
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import type { Logger } from '@mailroom/platform/logger';
import type { SegmentType } from '@mailroom/db/schema';
import type { DbOrTx } from '@mailroom/db/client';
import { commitWithOutbox, type OutboxDeps } from '@mailroom/webhooks/outbox';
import { parseSegmentFilter } from './filter-parser';
import { deleteSegment, getSegment, type SegmentRow } from './queries/segments';

/** A filter as a request gave it, with the name of the field it came in (errors name that field). */
export interface GivenFilter {
  value?: unknown;
  field: string;
}

/**
 * The type of a new segment: as given, else DYNAMIC with a filter and STATIC without. A given filter is checked.
 *
 * @throws {@link AppError} 422: a DYNAMIC segment without a filter, a STATIC one with a filter, or the filter's
 *   problems (`parseSegmentFilter`).
 */
export function newSegmentType(type: SegmentType | undefined, filter: GivenFilter): SegmentType {
  const resolved = type ?? (filter.value !== undefined ? 'DYNAMIC' : 'STATIC');
  if (resolved === 'DYNAMIC' && filter.value === undefined)
    throw validationError([
      {
        field: 'filter',
        message: "is required for a DYNAMIC segment (or Plunk's filters / condition)",
        code: 'invalid_type',
      },
    ]);
  if (resolved === 'STATIC' && filter.value !== undefined)
    throw validationError([{ field: filter.field, message: 'a STATIC segment has no filter', code: 'custom' }]);
  if (filter.value !== undefined) parseSegmentFilter(filter.value, filter.field);
  return resolved;
}

/** Refuses a type other than the segment's own (clients may send it back unchanged). @throws {@link AppError} 422. */
export function requireSameType(current: Pick<SegmentRow, 'type'>, type: SegmentType | undefined): void {
  if (type !== undefined && type !== current.type)
    throw validationError([
      { field: 'type', message: `a segment's type cannot change (this one is ${current.type})`, code: 'custom' },
    ]);
}

/** Checks a new filter for an existing segment. @throws {@link AppError} 422 for a STATIC segment or a bad filter. */
export function checkNewFilter(current: Pick<SegmentRow, 'type'>, filter: GivenFilter): void {
  if (filter.value === undefined) return;
  if (current.type === 'STATIC')
    throw validationError([{ field: filter.field, message: 'a STATIC segment has no filter', code: 'custom' }]);
  parseSegmentFilter(filter.value, filter.field);
}

/** A segment of the project. @throws {@link AppError} 404 when there is none. */
export async function requireSegment(db: DbOrTx, projectId: string, id: string): Promise<SegmentRow> {
  const s = await getSegment(db, projectId, id);
  if (!s) throw notFound('Segment');
  return s;
}

/** Refuses explicit members to a DYNAMIC segment. @throws {@link AppError} 409 `CONFLICT`. */
export function requireStatic(s: Pick<SegmentRow, 'type'>): void {
  if (s.type !== 'STATIC') {
    throw new AppError(
      ErrorCode.CONFLICT,
      'Only STATIC segments have explicit members; a DYNAMIC segment is defined by its filter',
    );
  }
}

/**
 * Deletes a segment (`deleteSegment`), announcing `campaign.failed` for each SCHEDULED campaign it fails.
 *
 * @returns the ids of the failed campaigns.
 * @throws {@link AppError} 404; 409 `CONFLICT` while a campaign still builds its recipient list from it.
 */
export async function deleteSegmentNow(
  deps: OutboxDeps,
  log: Logger,
  projectId: string,
  id: string,
): Promise<string[]> {
  const r = await commitWithOutbox(
    deps,
    log,
    projectId,
    (tx) => deleteSegment(tx, projectId, id),
    (done) =>
      done.deleted
        ? done.failedCampaigns.map((campaignId) => ({
            type: 'campaign.failed',
            data: { campaignId, ...(done.failedTestCampaigns.includes(campaignId) ? { test: true } : {}) },
          }))
        : [],
  );
  if (!r.deleted && r.reason === 'missing') throw notFound('Segment');
  if (!r.deleted)
    throw new AppError(
      ErrorCode.CONFLICT,
      `Campaign ${r.campaignId} is still sending to this segment; cancel it or wait until its recipients are queued`,
    );
  return r.failedCampaigns;
}
