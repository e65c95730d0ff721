/**
 * "Nothing written": a fingerprint of everything a project owns, taken straight from Postgres. Every table with a
 * `project_id` column is found in the catalog (so a table added later is covered without editing this file) and
 * summarised as its row count and an md5 of its rows for the project, plus the project's own row. Two equal
 * snapshots mean no row was inserted, updated or deleted in between.
 */
import type { Database } from '@mailroom/db/client';

/** `table → "count:md5"` for one project. */
export type Snapshot = Record<string, string>;

let tables: string[] | undefined;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** Takes the fingerprint of `projectId`'s rows. */
export async function projectSnapshot(database: Database, projectId: string): Promise<Snapshot> {
  if (!UUID.test(projectId)) throw new Error(`not a project id: ${projectId}`);
  tables ??= (
    await database.pool.query<{ table_name: string }>(
      `select table_name from information_schema.columns
       where column_name = 'project_id' and table_schema = 'public' order by table_name`,
    )
  ).rows.map((r) => r.table_name);
  const parts = [
    `select 'projects' as t, count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' order by x::text), '')) as v from projects x where x.id = $1`,
    ...tables.map(
      (t) => `select '${t}', count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' order by x::text), '')) from "${t}" x where x.project_id = $1`,
    ),
  ];
  const { rows } = await database.pool.query<{ t: string; v: string }>(parts.join(' union all '), [projectId]);
  return Object.fromEntries(rows.map((r) => [r.t, r.v]));
}

/** The tables whose fingerprint differs between two snapshots (empty: nothing written). */
export function changedTables(before: Snapshot, after: Snapshot): string[] {
  return Object.keys({ ...before, ...after }).filter((t) => before[t] !== after[t]);
}
