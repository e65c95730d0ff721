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
  tables ??= // Tables with a project_id, partitions left out: a partitioned table's digest covers its partitions' rows.
    (
      await database.pool.query<{ table_name: string }>(
        `select c.relname as table_name from pg_class c
       join pg_attribute a on a.attrelid = c.oid and a.attname = 'project_id' and not a.attisdropped
       where c.relnamespace = 'public'::regnamespace and c.relkind in ('r', 'p') and not c.relispartition
       order by c.relname`,
      )
    ).rows.map((r) => r.table_name);
  const parts = [
    `select 'projects' as t, count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' order by x::text), '')) as v from projects x where x.id = $1`,
    ...tables.map(
      (t) =>
        `select '${t}', count(*)::text || ':' || md5(coalesce(string_agg(x::text, '|' order by x::text), '')) from "${t}" x where x.project_id = $1`,
    ),
  ];
  // A named statement: each pooled connection plans the long union once, not for every snapshot.
  const { rows } = await database.pool.query<{ t: string; v: string }>({
    name: 'fuzz-project-snapshot',
    text: parts.join(' union all '),
    values: [projectId],
  });
  return Object.fromEntries(rows.map((r) => [r.t, r.v]));
}

/** The tables whose fingerprint differs between two snapshots (empty: nothing written). */
export function changedTables(before: Snapshot, after: Snapshot): string[] {
  return Object.keys({ ...before, ...after }).filter((t) => before[t] !== after[t]);
}
