/**
 * Compiles a validated {@link SegmentFilter} into one SQL predicate over `contacts`. Every value is a bound
 * parameter (never spliced into the text); identifiers are fixed.
 *
 * How each condition is evaluated, and the index that serves it:
 * - `data.<path> equals` → containment `data @> {"path": value}` (GIN `contacts_data_idx`, jsonb_path_ops);
 *   ordering operators compare only values of the filter value's JSON type (numbers as numeric through a strict
 *   SQL/JSON path, {@link numberComparison}; ISO dates as timestamps via `mailroom_try_timestamptz`; strings as
 *   text); `notEquals`/`notContains`/`notIn`/`notExists`
 *   are the negations, so contacts without the key match them;
 * - `snoozed` compares `snoozed_until` with the context's "now"; `snoozedUntil` compares the column itself;
 * - `email` operators on the lower-cased address (`email_key`; substring forms use the trigram index);
 * - `event.<name>` → `EXISTS` over `events` (planned as a semi-/anti-join on `events_project_name_contact_idx`,
 *   project, name, contact, id), time windows as id ranges (event ids are UUIDv7 of their time); counts as a
 *   grouped `IN` (or `NOT IN` when a count of zero satisfies the comparison, so contacts that never performed the
 *   event are included), a grouped scan of that index in contact order;
 * - `email.<activity>` → `EXISTS` over the contact's emails and their timeline entries;
 * - `topic.<topicId>` → the contact's choice for the topic (`contact_topics`, primary key), else the topic's default.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { idLowerBound } from '@mailroom/platform/ids';
import {
  windowStart,
  type FilterCondition,
  type FilterScalar,
  type SegmentFilter,
  type TimestampField,
} from '../segments';
import { likePattern } from '@mailroom/db/queries/like';
import { topicSubscribedSql } from '@mailroom/contacts/queries/topics';

/** Where the compiled predicate runs. */
export interface FilterContext {
  projectId: string;
  /** "Now" for time windows (ms since epoch); one value per query, so a page and its count agree. */
  now: number;
  /** Alias (or table name) of `contacts` in the surrounding query; default `contacts`. */
  alias?: string;
  /** What `context.<path>` conditions read (a workflow execution's context); absent: they match nothing. */
  context?: Record<string, unknown>;
}

/** The column of each timestamp field. */
const TIMESTAMP_COLUMNS: Record<TimestampField, string> = {
  createdAt: 'created_at',
  updatedAt: 'updated_at',
  snoozedUntil: 'snoozed_until',
};

const COMPARE: Record<string, string> = {
  equals: '=',
  notEquals: '<>',
  greaterThan: '>',
  lessThan: '<',
  greaterThanOrEqual: '>=',
  lessThanOrEqual: '<=',
};

function nest(path: string[], value: unknown): unknown {
  return path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value);
}

/**
 * A strict-mode SQL/JSON path comparing the number at `path` with the variable `$v` (`strict $."a"."b" ? (@ > $v)`),
 * for `jsonb_path_exists(data, path, {"v": n}, silent => true)`. Same result as comparing
 * `(data #> path)::numeric` when that value is a JSON number, and no match otherwise: strict mode neither unwraps
 * arrays nor forgives a missing key, and comparing a number with a string, boolean, null, array or object is
 * unknown. About twice as fast per row as extracting the value with `#>` and casting it (no copy of the value).
 *
 * @returns `undefined` when a segment could be read as an array index by `#>` (it begins with an integer) or holds
 *   NUL or a UTF-16 surrogate (which a path literal might not take as `#>` does): those keep the `#>` form, so
 *   results never differ.
 */
export function numberComparison(path: string[], op: string): string | undefined {
  if (path.some((k) => /^\s*[+-]?\d|[\u0000\ud800-\udfff]/.test(k))) return undefined;
  return `strict $${path.map((k) => `.${JSON.stringify(k)}`).join('')} ? (@ ${op} $v)`;
}

/** Whether a count of zero satisfies `count OP n`. */
function zeroSatisfies(op: string, n: number): boolean {
  switch (op) {
    case 'equals':
      return n === 0;
    case 'notEquals':
      return n !== 0;
    case 'greaterThan':
      return false;
    case 'greaterThanOrEqual':
      return n === 0;
    case 'lessThan':
      return n > 0;
    default:
      return true; // lessThanOrEqual, n >= 0
  }
}

/**
 * Compiles a filter.
 *
 * @returns a boolean SQL expression over the contacts row named by `ctx.alias`. It does not restrict the
 *   project: callers add `project_id = …` themselves (the event and email subqueries are scoped here).
 */
export function compileFilter(filter: SegmentFilter, ctx: FilterContext): SQL {
  const alias = sql.identifier(ctx.alias ?? 'contacts');
  const col = (name: string) => sql`${alias}.${sql.identifier(name)}`;

  const contextJson = sql`${JSON.stringify(ctx.context ?? {})}::jsonb`;
  const source = (c: { root?: 'context' }): SQL => (c.root === 'context' ? contextJson : col('data'));

  const typed = (data: SQL, path: string[], v: FilterScalar, op: string): SQL => {
    const at = sql`(${data} #> ${sql.param(path)}::text[])`;
    const o = sql.raw(COMPARE[op]);
    switch (v.type) {
      case 'number': {
        const jsonpath = numberComparison(path, COMPARE[op]);
        if (jsonpath)
          return sql`jsonb_path_exists(${data}, ${jsonpath}::jsonpath, ${JSON.stringify({ v: v.value })}::jsonb, true)`;
        return sql`(case when jsonb_typeof(${at}) = 'number' then ${at}::numeric end) ${o} ${v.value}::numeric`;
      }
      case 'date':
        return sql`mailroom_try_timestamptz(case when jsonb_typeof(${at}) = 'string' then ${at} #>> '{}' end) ${o} ${v.value.toISOString()}::timestamptz`;
      case 'string':
        return sql`(case when jsonb_typeof(${at}) = 'string' then ${at} #>> '{}' end) ${o} ${v.value}::text`;
      default:
        return sql`false`;
    }
  };

  const condition = (c: FilterCondition): SQL => {
    switch (c.kind) {
      case 'email': {
        const key = col('email_key');
        if ('values' in c) {
          const any = sql`${key} = any(${sql.param(c.values)}::text[])`;
          return c.op === 'in' ? any : sql`not (${any})`;
        }
        if (c.op === 'equals') return sql`${key} = ${c.value}`;
        if (c.op === 'notEquals') return sql`${key} <> ${c.value}`;
        if (c.op === 'notContains') return sql`${key} not like ${likePattern(c.value, 'contains')}`;
        return sql`${key} like ${likePattern(c.value, c.op)}`;
      }
      case 'subscribed':
        return c.op === 'equals' ? sql`${col('subscribed')} = ${c.value}` : sql`${col('subscribed')} <> ${c.value}`;
      case 'snoozed': {
        const snoozed = sql`coalesce(${col('snoozed_until')} > ${new Date(ctx.now).toISOString()}::timestamptz, false)`;
        return (c.op === 'equals') === c.value ? snoozed : sql`not ${snoozed}`;
      }
      case 'topic': {
        const subscribed = topicSubscribedSql(sql`${ctx.projectId}::uuid`, col('id'), sql`${c.topicId}::uuid`);
        return c.op === 'equals' ? sql`${subscribed} = ${c.value}` : sql`${subscribed} <> ${c.value}`;
      }
      case 'timestamp': {
        const column = col(TIMESTAMP_COLUMNS[c.column]);
        if ('window' in c) {
          const since = new Date(windowStart(c.window, ctx.now)).toISOString();
          return c.op === 'within' ? sql`${column} >= ${since}::timestamptz` : sql`${column} < ${since}::timestamptz`;
        }
        return sql`${column} ${sql.raw(COMPARE[c.op])} ${c.value.toISOString()}::timestamptz`;
      }
      case 'data': {
        const data = source(c);
        const at = sql`(${data} #> ${sql.param(c.path)}::text[])`;
        const text = sql`(case when jsonb_typeof(${at}) = 'string' then ${at} #>> '{}' end)`;
        switch (c.op) {
          case 'exists':
            return sql`coalesce(jsonb_typeof(${at}), 'null') <> 'null'`;
          case 'notExists':
            return sql`coalesce(jsonb_typeof(${at}), 'null') = 'null'`;
          case 'equals':
            return sql`${data} @> ${JSON.stringify(nest(c.path, c.value.value))}::jsonb`;
          case 'notEquals':
            return sql`not (${data} @> ${JSON.stringify(nest(c.path, c.value.value))}::jsonb)`;
          case 'in':
            return sql`coalesce(${JSON.stringify(c.values)}::jsonb @> jsonb_build_array(${at}), false)`;
          case 'notIn':
            return sql`not coalesce(${JSON.stringify(c.values)}::jsonb @> jsonb_build_array(${at}), false)`;
          case 'contains':
          case 'startsWith':
          case 'endsWith':
            return sql`coalesce(${text} ilike ${likePattern(c.value, c.op)}, false)`;
          case 'notContains':
            return sql`not coalesce(${text} ilike ${likePattern(c.value, 'contains')}, false)`;
          case 'within':
          case 'notWithin': {
            const since = new Date(windowStart(c.window, ctx.now)).toISOString();
            const ts = sql`mailroom_try_timestamptz(${text})`;
            return c.op === 'within'
              ? sql`coalesce(${ts} >= ${since}::timestamptz and ${ts} <= ${new Date(ctx.now).toISOString()}::timestamptz, false)`
              : sql`not coalesce(${ts} >= ${since}::timestamptz, false)`;
          }
          default:
            return sql`coalesce(${typed(data, c.path, c.value, c.op)}, false)`;
        }
      }
      case 'event': {
        const since = 'window' in c ? sql` and e.id >= ${idLowerBound(windowStart(c.window, ctx.now))}::uuid` : sql``;
        const performed = sql`exists (select 1 from events e where e.project_id = ${ctx.projectId}::uuid and e.contact_id = ${col('id')} and e.name = ${c.name}${since})`;
        return c.op === 'exists' || c.op === 'within' ? performed : sql`not ${performed}`;
      }
      case 'eventCount': {
        const since = c.window ? sql` and e.id >= ${idLowerBound(windowStart(c.window, ctx.now))}::uuid` : sql``;
        const o = sql.raw(COMPARE[c.op]);
        const grouped = (having: SQL) =>
          sql`(select e.contact_id from events e where e.project_id = ${ctx.projectId}::uuid and e.name = ${c.name}${since} group by e.contact_id having ${having})`;
        return zeroSatisfies(c.op, c.count)
          ? sql`${col('id')} not in ${grouped(sql`not (count(*) ${o} ${c.count})`)}`
          : sql`${col('id')} in ${grouped(sql`count(*) ${o} ${c.count}`)}`;
      }
      case 'emailActivity': {
        const since =
          'window' in c
            ? sql` and v.created_at >= ${new Date(windowStart(c.window, ctx.now)).toISOString()}::timestamptz`
            : sql``;
        const campaign = c.campaignId ? sql` and m.campaign_id = ${c.campaignId}::uuid` : sql``;
        const happened = sql`exists (select 1 from emails m join email_events v on v.email_id = m.id
          where m.project_id = ${ctx.projectId}::uuid and m.contact_id = ${col('id')} and v.type = ${c.activity}${campaign}${since})`;
        return c.op === 'exists' || c.op === 'within' ? happened : sql`not ${happened}`;
      }
    }
  };

  const node = (f: SegmentFilter): SQL => {
    if (f.kind !== 'group') return sql`(${condition(f)})`;
    if (f.children.length === 0) return f.logic === 'AND' ? sql`true` : sql`false`;
    return sql`(${sql.join(f.children.map(node), sql.raw(f.logic === 'AND' ? ' and ' : ' or '))})`;
  };
  return node(filter);
}
