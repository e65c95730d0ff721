/**
 * The segment filter language: a JSON AST compatible with Plunk's, validated here into a normalized tree that
 * `@mailroom/db` compiles to one parameterised SQL predicate over a project's contacts. The same tree serves
 * segment counts and members, FILTERED campaigns, `GET /contacts?filter=` and workflow conditions.
 *
 * Accepted shapes:
 * - `{ "logic": "AND" | "OR", "groups": [ { "filters": [Condition...], "conditions"?: <Filter> } ] }`: a group
 *   matches when all its filters and its nested `conditions` match; groups combine by `logic`;
 * - a flat array of conditions (all must match).
 *
 * A condition is `{ field, operator, value?, unit?, window?, campaignId? }`. Fields:
 * - `email` (case-insensitive), `subscribed`, `createdAt`, `updatedAt`;
 * - `snoozed` (`equals`/`notEquals` true or false: marketing email paused now, `snoozedUntil` after the query's
 *   "now") and `snoozedUntil` (compared like `createdAt`; a contact without a snooze matches no comparison);
 * - `topic.<topicId>`: `equals` / `notEquals` `true` or `false`: whether the contact is subscribed to the topic
 *   (its choice, else the topic's default; docs/guides/topics.md), the global `subscribed` aside;
 * - `data.<path>`: compared by the type of `value` (string, number, boolean, or an ISO 8601 date string for
 *   the ordering operators); a stored value of another type never matches a typed comparison;
 * - `event.<name>`: `exists` (performed), `notExists`, `within` / `notWithin` (performed in the last
 *   `value` `unit`s), or a count comparison (`greaterThan`… with an integer `value`, optionally over `window`);
 * - `email.sent|delivered|opened|clicked|bounced|complained`: `exists`, `notExists`, `within`, `notWithin`,
 *   optionally restricted to one campaign (`campaignId`);
 * - `context.<path>` (workflow CONDITION steps only, {@link FilterOptions.allowContext}): the execution's context
 *   (`context.trigger.data.<key>` is the data of the event that started it), compared like `data.<path>`.
 *
 * `notEquals`, `notContains`, `notIn` and `notExists` include contacts that lack the key.
 *
 * The parser that validates a filter into this tree is `filter-parser.ts` (`parseSegmentFilter`).
 *
 * @module
 */

export const FILTER_OPERATORS = [
  'equals',
  'notEquals',
  'contains',
  'notContains',
  'startsWith',
  'endsWith',
  'greaterThan',
  'lessThan',
  'greaterThanOrEqual',
  'lessThanOrEqual',
  'in',
  'notIn',
  'exists',
  'notExists',
  'within',
  'notWithin',
] as const;
export type FilterOperator = (typeof FILTER_OPERATORS)[number];

export const FILTER_UNITS = ['minutes', 'hours', 'days'] as const;
export type FilterUnit = (typeof FILTER_UNITS)[number];

/** Milliseconds of one unit. */
export const UNIT_MS: Record<FilterUnit, number> = { minutes: 60_000, hours: 3_600_000, days: 86_400_000 };

export const EMAIL_ACTIVITIES = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'] as const;
export type EmailActivity = (typeof EMAIL_ACTIVITIES)[number];

/** Limits that keep one filter's SQL bounded. */
export const FILTER_LIMITS = {
  depth: 5,
  conditions: 50,
  inValues: 500,
  stringLength: 1000,
  pathSegments: 10,
  maxCount: Number.MAX_SAFE_INTEGER,
} as const;

/** A scalar a condition compares with; `date` is an ISO 8601 string compared as a timestamp. */
export type FilterScalar =
  | { type: 'string'; value: string }
  | { type: 'number'; value: number }
  | { type: 'boolean'; value: boolean }
  | { type: 'date'; value: Date };

/** A time window: the last `amount` `unit`s. */
export interface FilterWindow {
  amount: number;
  unit: FilterUnit;
}

/** Contact timestamps a condition compares. */
export type TimestampField = 'createdAt' | 'updatedAt' | 'snoozedUntil';

/** The comparisons of a count or an ordered value. */
export type Comparison = 'equals' | 'notEquals' | 'greaterThan' | 'lessThan' | 'greaterThanOrEqual' | 'lessThanOrEqual';
type TextMatch = 'contains' | 'notContains' | 'startsWith' | 'endsWith';

/** A validated condition. */
export type FilterCondition =
  | { kind: 'email'; op: 'equals' | 'notEquals' | TextMatch; value: string }
  | { kind: 'email'; op: 'in' | 'notIn'; values: string[] }
  | { kind: 'subscribed' | 'snoozed'; op: 'equals' | 'notEquals'; value: boolean }
  | { kind: 'topic'; topicId: string; op: 'equals' | 'notEquals'; value: boolean }
  | { kind: 'timestamp'; column: TimestampField; op: Exclude<Comparison, 'notEquals'>; value: Date }
  | { kind: 'timestamp'; column: TimestampField; op: 'within' | 'notWithin'; window: FilterWindow }
  | ({ kind: 'data'; path: string[] } & DataSource & DataTest)
  | { kind: 'event'; name: string; op: 'exists' | 'notExists' }
  | { kind: 'event'; name: string; op: 'within' | 'notWithin'; window: FilterWindow }
  | { kind: 'eventCount'; name: string; op: Comparison; count: number; window?: FilterWindow }
  | { kind: 'emailActivity'; activity: EmailActivity; op: 'exists' | 'notExists'; campaignId?: string }
  | {
      kind: 'emailActivity';
      activity: EmailActivity;
      op: 'within' | 'notWithin';
      window: FilterWindow;
      campaignId?: string;
    };

/** Where a `data`-kind condition reads: the contact's `data`, or (workflows) the execution's context. */
export interface DataSource {
  root?: 'context';
}

/** The comparison of a `data`-kind condition. */
export type DataTest =
  | { op: 'equals' | 'notEquals'; value: FilterScalar }
  | { op: Exclude<Comparison, 'equals' | 'notEquals'>; value: FilterScalar }
  | { op: TextMatch; value: string }
  | { op: 'in' | 'notIn'; values: (string | number | boolean)[] }
  | { op: 'exists' | 'notExists' }
  | { op: 'within' | 'notWithin'; window: FilterWindow };

/** Options of {@link parseSegmentFilter}. */
export interface FilterOptions {
  /** Accept `context.<path>` conditions (workflow CONDITION steps). */
  allowContext?: boolean;
}

/** A validated filter: a condition, or a group of filters combined by `logic`. An empty AND matches everyone. */
export type SegmentFilter = FilterCondition | { kind: 'group'; logic: 'AND' | 'OR'; children: SegmentFilter[] };

const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/;

/**
 * True when `s` is an ISO 8601 date or date-time that the filter language compares as a timestamp: its instant
 * must fall in the years 0001–9999 UTC, which Postgres `timestamptz` accepts as written by `toISOString()`
 * (`0000-12-31T10:00:00Z`, what `0001-01-01T00:00+14:00` is in UTC, is out of its range).
 */
export function isIsoDate(s: string): boolean {
  if (!ISO_DATE.test(s)) return false;
  const t = Date.parse(s);
  if (Number.isNaN(t)) return false;
  const year = new Date(t).getUTCFullYear();
  return year >= 1 && year <= 9999;
}

/** The start (ms since epoch) of a window ending `now`. */
export function windowStart(window: FilterWindow, now: number): number {
  return now - window.amount * UNIT_MS[window.unit];
}
