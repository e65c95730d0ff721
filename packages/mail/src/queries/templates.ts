/**
 * Templates of a project. Every query is scoped by `projectId`.
 *
 * @module
 */
import { and, count, desc, eq, ilike, lt, or, type SQL } from 'drizzle-orm';
import { likePattern } from '@mailroom/db/queries/like';
import type { DbOrTx } from '@mailroom/db/client';
import { templates, templateVersions, type TemplateType } from '@mailroom/db/schema';

export type TemplateRow = typeof templates.$inferSelect;
export type NewTemplate = Omit<typeof templates.$inferInsert, 'id' | 'projectId' | 'createdAt' | 'updatedAt'>;

/** Creates a template with its version 1, published (`template_versions`), in one transaction. */
export async function createTemplate(db: DbOrTx, projectId: string, input: NewTemplate): Promise<TemplateRow> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .insert(templates)
      .values({ ...input, projectId, version: 1 })
      .returning();
    await tx.insert(templateVersions).values({
      projectId,
      templateId: row.id,
      version: 1,
      subject: row.subject,
      body: row.body,
      from: row.from,
      fromName: row.fromName,
      replyTo: row.replyTo,
      publishedAt: row.createdAt,
    });
    return row;
  });
}

/** A template of the project, or `undefined` (also for another project's id). */
export async function getTemplate(db: DbOrTx, projectId: string, id: string): Promise<TemplateRow | undefined> {
  const [row] = await db
    .select()
    .from(templates)
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)));
  return row;
}

/** Applies a partial update; `undefined` fields are left alone, `null` clears nullable ones. */
export async function updateTemplate(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: Partial<NewTemplate>,
): Promise<TemplateRow | undefined> {
  const [row] = await db
    .update(templates)
    .set({ ...patch, updatedAt: new Date() })
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
    .returning();
  return row;
}

/** Deletes a template; emails already queued keep their copy of its content. @returns whether it existed. */
export async function deleteTemplate(db: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(templates)
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
    .returning({ id: templates.id });
  return rows.length > 0;
}

/** Filters and paging of {@link listTemplates}. */
export interface TemplateListQuery {
  limit: number;
  /** Keyset: return templates created before this id (newest first). */
  afterId?: string;
  /** Page number (1-based) for the page-number compatibility form; ignored when `afterId` is set. */
  page?: number;
  type?: TemplateType;
  /** Case-insensitive substring of the name, description or subject. */
  search?: string;
}

/**
 * Lists templates newest first.
 *
 * @returns `items` (at most `limit`), `hasMore`, `total` (matching the filters) and `before`: how many matching
 * templates precede the page (gives the page number of a cursor page).
 */
export async function listTemplates(db: DbOrTx, projectId: string, q: TemplateListQuery) {
  const filters: SQL[] = [eq(templates.projectId, projectId)];
  if (q.type) filters.push(eq(templates.type, q.type));
  if (q.search) {
    const pattern = likePattern(q.search);
    filters.push(
      or(ilike(templates.name, pattern), ilike(templates.description, pattern), ilike(templates.subject, pattern))!,
    );
  }
  const where = and(...filters);
  const pageWhere = q.afterId ? and(where, lt(templates.id, q.afterId)) : where;
  const offset = !q.afterId && q.page && q.page > 1 ? (q.page - 1) * q.limit : 0;
  // Page numbers need an offset; templates per project are few, and the cursor form stays pure keyset.
  const rows = await db
    .select()
    .from(templates)
    .where(pageWhere)
    .orderBy(desc(templates.id))
    .limit(q.limit + 1)
    .offset(offset);
  const [{ total }] = (await db.select({ total: count() }).from(templates).where(where)) as [{ total: number }];
  let before = offset;
  if (q.afterId) {
    const [{ n }] = (await db
      .select({ n: count() })
      .from(templates)
      .where(and(where, lt(templates.id, q.afterId)))) as [{ n: number }];
    before = total - n;
  }
  return { items: rows.slice(0, q.limit), hasMore: rows.length > q.limit, total, before };
}
