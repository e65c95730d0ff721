/**
 * A project's operator overrides of service settings, stored as one jsonb object per kind (`projects.guardrails`,
 * `projects.retention`): a field present overrides the service default, a field absent (or the column null) takes
 * it. One read and one update serve every kind.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** The `projects` columns that hold overrides. */
export type OverrideColumn = 'guardrails' | 'retention';

/**
 * A project's stored overrides of one kind.
 *
 * @returns the overrides (`{}` when none are set), or `undefined` when the project does not exist.
 */
export async function getProjectOverrides<T extends object>(
  db: DbOrTx,
  projectId: string,
  column: OverrideColumn,
): Promise<T | undefined> {
  const rows = await db.execute<{ overrides: T | null }>(
    sql`select ${sql.identifier(column)} as overrides from projects where id = ${projectId}::uuid`,
  );
  const row = rows.rows[0];
  return row ? (row.overrides ?? ({} as T)) : undefined;
}

/**
 * Changes a project's overrides of one kind in one statement: a field given a value is set, a field given `null`
 * is cleared (back to the service default), a field left out (`undefined`) keeps its value. Values must already
 * be valid.
 *
 * @returns the overrides after the change (`{}` when none are left), or `undefined` when the project does not exist.
 */
export async function updateProjectOverrides<T extends object>(
  db: DbOrTx,
  projectId: string,
  column: OverrideColumn,
  patch: Record<string, unknown>,
): Promise<T | undefined> {
  const given = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
  const col = sql.identifier(column);
  const rows = await db.execute<{ overrides: T | null }>(sql`
    update projects set
      ${col} = nullif(jsonb_strip_nulls(coalesce(${col}, '{}'::jsonb) || ${JSON.stringify(given)}::jsonb), '{}'::jsonb),
      updated_at = now()
    where id = ${projectId}::uuid
    returning ${col} as overrides
  `);
  const row = rows.rows[0];
  return row ? (row.overrides ?? ({} as T)) : undefined;
}
