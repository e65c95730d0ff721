/**
 * The delivery-connection bindings of sending domains and projects (`domains.ses_connection`,
 * `projects.ses_connection`): read by the worker's connection router, set by the operator (admin API, CLI).
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { domains, projects } from '@mailroom/db/schema';

/** A project's delivery-connection bindings: its own and its sending domains'. */
export interface ConnectionBindings {
  project: string | null;
  domains: ReadonlyArray<{ domain: string; connection: string | null }>;
}

/**
 * The bindings of project `projectId` (no project: all null and none).
 * @throws the database's error.
 */
export async function connectionBindings(db: DbOrTx, projectId: string): Promise<ConnectionBindings> {
  const result = await db.execute<{
    project: string | null;
    domains: { domain: string; connection: string | null }[] | null;
  }>(sql`
    select (select ses_connection from projects where id = ${projectId}::uuid) as project,
      (select json_agg(json_build_object('domain', domain, 'connection', ses_connection)) from domains where project_id = ${projectId}::uuid) as domains`);
  const row = result.rows[0];
  return { project: row?.project ?? null, domains: row?.domains ?? [] };
}

/**
 * The connection name bound to mail from `domain` (lower case): the binding of the project's sending domain that
 * is `domain` or its nearest parent (mail may come from a subdomain of a registered domain), else the project's,
 * else null (the first connection).
 */
export function boundConnectionOf(bindings: ConnectionBindings, domain: string): string | null {
  let best: { domain: string; connection: string | null } | undefined;
  for (const d of bindings.domains) {
    if ((domain === d.domain || domain.endsWith(`.${d.domain}`)) && (!best || d.domain.length > best.domain.length))
      best = d;
  }
  return best?.connection ?? bindings.project;
}

/**
 * The connection name bound to mail from `domain` of project `projectId` ({@link boundConnectionOf}).
 * @throws the database's error.
 */
export async function boundConnection(db: DbOrTx, projectId: string, domain: string): Promise<string | null> {
  return boundConnectionOf(await connectionBindings(db, projectId), domain);
}

/**
 * Binds project `projectId` (null: unbinds it) to connection `name`.
 * @returns whether the project exists.
 */
export async function setProjectConnection(db: DbOrTx, projectId: string, name: string | null): Promise<boolean> {
  const rows = await db
    .update(projects)
    .set({ sesConnection: name })
    .where(eq(projects.id, projectId))
    .returning({ id: projects.id });
  return rows.length > 0;
}

/**
 * Binds sending domain `domain` (null: unbinds it) to connection `name`; `projectId` given, only that project's.
 * @returns whether the domain exists (in that project).
 */
export async function setDomainConnection(
  db: DbOrTx,
  domain: string,
  name: string | null,
  projectId?: string,
): Promise<boolean> {
  const where = projectId
    ? and(eq(domains.domain, domain), eq(domains.projectId, projectId))
    : eq(domains.domain, domain);
  const rows = await db.update(domains).set({ sesConnection: name }).where(where).returning({ id: domains.id });
  return rows.length > 0;
}
