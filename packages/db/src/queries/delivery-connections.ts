/**
 * The delivery-connection bindings of sending domains and projects (`domains.ses_connection`,
 * `projects.ses_connection`): read by the worker's connection router, set by the operator (admin API, CLI).
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '../client';
import { domains, projects } from '../schema';

/**
 * The connection name bound to mail from `domain` of project `projectId`: the domain's binding, else the
 * project's, else null (the first connection). Matches the domain exactly (lower-case, as stored).
 *
 * @throws the database's error.
 */
export async function boundConnection(db: DbOrTx, projectId: string, domain: string): Promise<string | null> {
  const result = await db.execute<{ name: string | null }>(sql`
    select coalesce(
      (select ses_connection from domains where project_id = ${projectId}::uuid and domain = ${domain}),
      (select ses_connection from projects where id = ${projectId}::uuid)
    ) as name`);
  return result.rows[0]?.name ?? null;
}

/**
 * Binds project `projectId` (null: unbinds it) to connection `name`.
 * @returns whether the project exists.
 */
export async function setProjectConnection(db: DbOrTx, projectId: string, name: string | null): Promise<boolean> {
  const rows = await db.update(projects).set({ sesConnection: name }).where(eq(projects.id, projectId)).returning({ id: projects.id });
  return rows.length > 0;
}

/**
 * Binds sending domain `domain` (null: unbinds it) to connection `name`; `projectId` given, only that project's.
 * @returns whether the domain exists (in that project).
 */
export async function setDomainConnection(db: DbOrTx, domain: string, name: string | null, projectId?: string): Promise<boolean> {
  const where = projectId ? and(eq(domains.domain, domain), eq(domains.projectId, projectId)) : eq(domains.domain, domain);
  const rows = await db.update(domains).set({ sesConnection: name }).where(where).returning({ id: domains.id });
  return rows.length > 0;
}
