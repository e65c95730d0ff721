/**
 * The hot statements of the request path (`POST /v1/track`, `POST /v1/send`) run as named statements: Postgres
 * parses each distinct text once per connection, then binds and executes it. It plans it for each call's values
 * for the first five calls, then keeps one generic plan if that plan's estimated cost is no higher
 * (`plan_cache_mode = auto`): checked in `pg_prepared_statements`, the track statements switch after five calls,
 * while the send worker's batched claim and finish never did, and the lone claim and finish and the workflow move
 * stop doing so once the partitioned tables hold a year of months (the send path's claims and finishes run on a
 * pool that forces generic plans: `createDatabase`'s `genericPlans`). The texts are long (contact-upsert CTEs);
 * unnamed, they were parsed and planned at every call. Measured with `npm run bench -- api` (one run, the same load
 * in alternating rounds), named statements took `/v1/send` from 0.46× to 0.66× the bare ceiling and `/v1/track`
 * from 0.60× to 0.82×.
 *
 * Behind PgBouncer in transaction mode this needs PgBouncer 1.21 or later with `max_prepared_statements` set
 * (session mode, or a direct connection, needs nothing).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { is, Param, Placeholder, type SQL } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { QueryResult, QueryResultRow } from 'pg';
import type { DbOrTx } from '../client';

const dialect = new PgDialect();
/** Statement name by text; the name is a digest of the text, so one name never stands for two texts. */
const names = new Map<string, string>();
/** Distinct texts named per process (each is prepared once per connection that runs it); later ones run unnamed. */
const MAX_NAMES = 500;

/** Runs `query` like `db.execute(query)`, as a named statement (see the module). */
export async function executeNamed<T extends QueryResultRow>(db: DbOrTx, query: SQL): Promise<QueryResult<T>> {
  const q = dialect.sqlToQuery(query);
  let name = names.get(q.sql);
  if (name === undefined && names.size < MAX_NAMES) {
    name = `mr_${createHash('sha1').update(q.sql).digest('hex').slice(0, 24)}`;
    names.set(q.sql, name);
  }
  return db._.session.prepareQuery(q, undefined, name, false).execute() as Promise<QueryResult<T>>;
}

/**
 * Runs a fixed statement text as the named statement `name` (prepared once per connection), with `params` as
 * node-postgres takes them (a JS array is one array parameter, where drizzle's `sql` would spread it into a list).
 * The name must stand for this one text in the whole process.
 */
export async function executeNamedText<T extends QueryResultRow>(
  db: DbOrTx,
  name: string,
  text: string,
  params: unknown[],
): Promise<QueryResult<T>> {
  return db._.session.prepareQuery({ sql: text, params }, undefined, name, false).execute() as Promise<QueryResult<T>>;
}

/**
 * A statement whose text is built once (by {@link namedTemplate}) and run many times with other values
 * ({@link executeTemplate}): for statements whose text does not depend on their values, such as the batched writes
 * of `POST /v1/send` (the values travel as array parameters, `unnest`ed by the statement). Building the text from
 * drizzle's `sql` at every call cost the API about 2% of its CPU under `/v1/send` load.
 */
export interface NamedTemplate {
  /** The named statement's name (a digest of the text, as {@link executeNamed}'s). */
  name: string;
  text: string;
  /** Each parameter, in order: a placeholder's name (its value given at each call) or a value fixed in the query. */
  slots: ({ key: string } | { value: unknown })[];
}

/**
 * Builds `query`'s text once: each `sql.placeholder(key)` in it becomes a parameter given at each call; every
 * other value of `query` is fixed in the template.
 */
export function namedTemplate(query: SQL): NamedTemplate {
  const q = dialect.sqlToQuery(query);
  const slots = q.params.map((p) =>
    is(p, Placeholder)
      ? { key: p.name }
      : is(p, Param) && is(p.value, Placeholder)
        ? { key: (p.value as Placeholder).name }
        : { value: p },
  );
  return { name: `mr_${createHash('sha1').update(q.sql).digest('hex').slice(0, 24)}`, text: q.sql, slots };
}

/**
 * Runs `template` as its named statement with `values` for its placeholders (a JS array is one array parameter).
 *
 * @throws `Error` when a placeholder has no value (before anything is sent); what Postgres throws.
 */
export async function executeTemplate<T extends QueryResultRow>(
  db: DbOrTx,
  template: NamedTemplate,
  values: Record<string, unknown>,
): Promise<QueryResult<T>> {
  const params = template.slots.map((s) => {
    if (!('key' in s)) return s.value;
    if (!(s.key in values)) throw new Error(`no value for the placeholder ${s.key} of ${template.name}`);
    return values[s.key];
  });
  return executeNamedText<T>(db, template.name, template.text, params);
}
