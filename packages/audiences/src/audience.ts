/**
 * Audiences: who, among a project's contacts, a preview, a segment's member list, the segment refresher, a
 * campaign or a workflow condition is about. Every such question is one {@link Audience} value compiled to one
 * SQL predicate over `contacts` ({@link compileAudience}; `audiencePredicate` in `queries/audience.ts` when a
 * segment must be looked up first), so they all share the filter compiler and its semantics.
 *
 * A filter arrives here already parsed (`parseSegmentFilter`, segments.ts): a request's filter is parsed once by
 * its route, a stored one (a DYNAMIC segment's, a FILTERED campaign's) once when it is read back.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { segments } from '@mailroom/db/schema';
import { type SegmentFilter } from './segments';
import { parseSegmentFilter } from './filter-parser';
import { compileFilter } from './queries/segment-filter';
import { topicSubscribedSql } from '@mailroom/contacts/queries/topics';

/**
 * An audience:
 * - `ALL`: every contact of the project;
 * - `SEGMENT`: the members of a segment, whichever its type (looked up by `audiencePredicate`);
 * - `FILTERED`: the contacts a parsed filter matches (a DYNAMIC segment's, a FILTERED campaign's, a preview's,
 *   `GET /contacts?filter=`, a workflow condition's);
 * - `STATIC`: the explicit members of a STATIC segment.
 */
export type Audience =
  | { type: 'ALL' }
  | { type: 'SEGMENT'; segmentId: string }
  | { type: 'FILTERED'; filter: SegmentFilter }
  | { type: 'STATIC'; segmentId: string };

/** An audience that compiles without a lookup. */
export type ResolvedAudience = Exclude<Audience, { type: 'SEGMENT' }>;

/** Where an audience's predicate runs. */
export interface AudienceScope {
  /** "Now" for the filter's time windows (ms since epoch); one value per query, so a page and its count agree. */
  now: number;
  /** Alias (or table name) of `contacts` in the surrounding query; default `contacts`. */
  alias?: string;
  /** What `context.<path>` conditions read (a workflow execution's context). */
  context?: Record<string, unknown>;
  /**
   * A topic the audience is restricted to (a campaign's `topicId`): only contacts subscribed to it, explicitly or by
   * its `opt_out` default (`topicSubscribedSql`), belong. The global `subscribed` flag is the caller's, as before.
   */
  topicId?: string;
}

/**
 * A segment's audience: its members (STATIC) or its filter, parsed from the stored JSON (DYNAMIC).
 *
 * @throws {@link AppError} 422 when the stored filter no longer parses (it was validated when stored).
 */
export function segmentAudience(
  segment: Pick<typeof segments.$inferSelect, 'id' | 'type' | 'filter'>,
): ResolvedAudience {
  return segment.type === 'STATIC'
    ? { type: 'STATIC', segmentId: segment.id }
    : { type: 'FILTERED', filter: parseSegmentFilter(segment.filter, 'filter') };
}

/**
 * Compiles an audience into one boolean SQL expression over the contacts row named by `scope.alias`. Every value
 * is a bound parameter. It does not restrict the project: callers add `project_id = …` themselves (the
 * subqueries of a filter are scoped here).
 */
export function compileAudience(projectId: string, audience: ResolvedAudience, scope: AudienceScope): SQL {
  const base = compileBase(projectId, audience, scope);
  if (!scope.topicId) return base;
  const alias = sql.identifier(scope.alias ?? 'contacts');
  return sql`(${base}) and ${topicSubscribedSql(sql`${projectId}::uuid`, sql`${alias}.id`, sql`${scope.topicId}::uuid`)}`;
}

function compileBase(projectId: string, audience: ResolvedAudience, scope: AudienceScope): SQL {
  const alias = scope.alias ?? 'contacts';
  switch (audience.type) {
    case 'ALL':
      return sql`true`;
    case 'STATIC':
      return sql`exists (select 1 from segment_members sm where sm.segment_id = ${audience.segmentId}::uuid and sm.contact_id = ${sql.identifier(alias)}.id)`;
    case 'FILTERED':
      return compileFilter(audience.filter, {
        projectId,
        now: scope.now,
        alias,
        ...(scope.context ? { context: scope.context } : {}),
      });
  }
}
