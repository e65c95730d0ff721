/**
 * Template versions: the history of a template's content and its one draft (`template_versions`). The template
 * row always holds the live version's content (`templates.version`), so "latest published" is that row alone.
 *
 * - {@link editLive}: an edit that goes live at once (a new published version): what `PATCH /templates/{id}` does,
 *   as Plunk clients expect. Refused while a draft exists (its base would be lost).
 * - {@link writeDraft}: creates or updates the draft (numbered after the last version); the live content stays.
 * - {@link publishDraft}: the draft goes live; {@link discardDraft} drops it.
 *
 * Name, description and type belong to the template, not to a version: they change at once in every mode.
 * A template written without its version row (by a process older than versions, or `import plunk`) gets it on
 * first use ({@link ensureLiveVersion}). Every statement is scoped by project; changes lock the template row, so
 * concurrent edits are serialised and numbers never collide.
 *
 * @module
 */
import { and, desc, eq, isNull, lt, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { templates, templateVersions } from '@mailroom/db/schema';
import type { TemplateRow } from './templates';

export type TemplateVersionRow = typeof templateVersions.$inferSelect;

/** The versioned fields of a template. */
export const CONTENT_FIELDS = ['subject', 'body', 'from', 'fromName', 'replyTo'] as const;
export type TemplateContent = Pick<TemplateVersionRow, (typeof CONTENT_FIELDS)[number]>;

/** A change of a template: content fields (versioned) and template fields (name, description, type, tracking). */
export type TemplatePatch = Partial<TemplateContent & Pick<TemplateRow, 'name' | 'description' | 'type' | 'tracking'>>;

/** Why a change was refused: the template has a draft (edit live), or has none (publish, discard). */
export type VersionConflict = { conflict: 'draft-exists' | 'no-draft' };

function contentOf(patch: TemplatePatch): Partial<TemplateContent> {
  return Object.fromEntries(CONTENT_FIELDS.filter((k) => patch[k] !== undefined).map((k) => [k, patch[k]]));
}

function metaOf(patch: TemplatePatch): Partial<Pick<TemplateRow, 'name' | 'description' | 'type' | 'tracking'>> {
  const { name, description, type, tracking } = patch;
  return Object.fromEntries(Object.entries({ name, description, type, tracking }).filter(([, v]) => v !== undefined));
}

/** Locks and returns the template (`FOR UPDATE`), or `undefined`. */
async function lockTemplate(tx: DbOrTx, projectId: string, id: string): Promise<TemplateRow | undefined> {
  const [row] = await tx
    .select()
    .from(templates)
    .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
    .for('update');
  return row;
}

/**
 * Writes the live version's row when it is missing (a template created before versions existed, or imported):
 * idempotent.
 */
export async function ensureLiveVersion(db: DbOrTx, t: TemplateRow): Promise<void> {
  await db
    .insert(templateVersions)
    .values({
      projectId: t.projectId,
      templateId: t.id,
      version: t.version,
      subject: t.subject,
      body: t.body,
      from: t.from,
      fromName: t.fromName,
      replyTo: t.replyTo,
      publishedAt: t.updatedAt,
    })
    .onConflictDoNothing();
}

/** The template's draft, or `undefined`. */
export async function draftOf(
  db: DbOrTx,
  projectId: string,
  templateId: string,
): Promise<TemplateVersionRow | undefined> {
  const [row] = await db
    .select()
    .from(templateVersions)
    .where(
      and(
        eq(templateVersions.projectId, projectId),
        eq(templateVersions.templateId, templateId),
        isNull(templateVersions.publishedAt),
      ),
    );
  return row;
}

/** The draft version numbers of these templates of the project (absent: no draft). */
export async function draftNumbers(db: DbOrTx, projectId: string, templateIds: string[]): Promise<Map<string, number>> {
  if (templateIds.length === 0) return new Map();
  const rows = await db
    .select({ templateId: templateVersions.templateId, version: templateVersions.version })
    .from(templateVersions)
    .where(
      and(
        eq(templateVersions.projectId, projectId),
        isNull(templateVersions.publishedAt),
        sql`${templateVersions.templateId} = any(${sql.param(templateIds)}::uuid[])`,
      ),
    );
  return new Map(rows.map((r) => [r.templateId, r.version]));
}

async function nextNumber(tx: DbOrTx, templateId: string): Promise<number> {
  const [{ n }] = (await tx
    .select({ n: sql<number>`coalesce(max(${templateVersions.version}), 0)::int + 1` })
    .from(templateVersions)
    .where(eq(templateVersions.templateId, templateId))) as [{ n: number }];
  return n;
}

/**
 * An edit that goes live at once: content fields make a new published version (the live content with the
 * patch), template fields change the template. A patch of template fields only makes no version.
 *
 * @returns the template, `undefined` (no such template), or a conflict when the template has a draft and the
 *   patch changes content.
 */
export async function editLive(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: TemplatePatch,
): Promise<TemplateRow | VersionConflict | undefined> {
  return db.transaction(async (tx) => {
    const t = await lockTemplate(tx, projectId, id);
    if (!t) return undefined;
    const content = contentOf(patch);
    const set: Partial<TemplateRow> = { ...metaOf(patch), updatedAt: new Date() };
    if (Object.keys(content).length > 0) {
      if (await draftOf(tx, projectId, id)) return { conflict: 'draft-exists' as const };
      await ensureLiveVersion(tx, t);
      const version = await nextNumber(tx, id);
      const merged = {
        subject: t.subject,
        body: t.body,
        from: t.from,
        fromName: t.fromName,
        replyTo: t.replyTo,
        ...content,
      };
      await tx
        .insert(templateVersions)
        .values({ projectId, templateId: id, version, ...merged, publishedAt: new Date() });
      Object.assign(set, merged, { version });
    }
    const [row] = await tx
      .update(templates)
      .set(set)
      .where(and(eq(templates.projectId, projectId), eq(templates.id, id)))
      .returning();
    return row;
  });
}

/**
 * Creates the draft (the live content with the patch, numbered after the last version) or updates it; template
 * fields change the template at once.
 *
 * @returns the template and its draft, or `undefined` (no such template).
 */
export async function writeDraft(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: TemplatePatch,
): Promise<{ template: TemplateRow; draft: TemplateVersionRow } | undefined> {
  return db.transaction(async (tx) => {
    const t = await lockTemplate(tx, projectId, id);
    if (!t) return undefined;
    await ensureLiveVersion(tx, t);
    const content = contentOf(patch);
    const existing = await draftOf(tx, projectId, id);
    let draft: TemplateVersionRow;
    if (existing) {
      [draft] = await tx
        .update(templateVersions)
        .set({ ...content, updatedAt: new Date() })
        .where(eq(templateVersions.id, existing.id))
        .returning();
    } else {
      const base = { subject: t.subject, body: t.body, from: t.from, fromName: t.fromName, replyTo: t.replyTo };
      [draft] = await tx
        .insert(templateVersions)
        .values({
          projectId,
          templateId: id,
          version: await nextNumber(tx, id),
          ...base,
          ...content,
          publishedAt: null,
        })
        .returning();
    }
    const [template] = await tx
      .update(templates)
      .set({ ...metaOf(patch), updatedAt: new Date() })
      .where(eq(templates.id, id))
      .returning();
    return { template, draft };
  });
}

/**
 * Makes the draft the live version: it is stamped published and its content becomes the template's.
 * @returns the template, `undefined` (no such template), or a conflict when there is no draft.
 */
export async function publishDraft(
  db: DbOrTx,
  projectId: string,
  id: string,
): Promise<TemplateRow | VersionConflict | undefined> {
  return db.transaction(async (tx) => {
    const t = await lockTemplate(tx, projectId, id);
    if (!t) return undefined;
    const draft = await draftOf(tx, projectId, id);
    if (!draft) return { conflict: 'no-draft' as const };
    const now = new Date();
    await tx
      .update(templateVersions)
      .set({ publishedAt: now, updatedAt: now })
      .where(eq(templateVersions.id, draft.id));
    const [row] = await tx
      .update(templates)
      .set({
        subject: draft.subject,
        body: draft.body,
        from: draft.from,
        fromName: draft.fromName,
        replyTo: draft.replyTo,
        version: draft.version,
        updatedAt: now,
      })
      .where(eq(templates.id, id))
      .returning();
    return row;
  });
}

/** Drops the draft. @returns true, `undefined` (no such template), or a conflict when there is no draft. */
export async function discardDraft(
  db: DbOrTx,
  projectId: string,
  id: string,
): Promise<true | VersionConflict | undefined> {
  return db.transaction(async (tx) => {
    const t = await lockTemplate(tx, projectId, id);
    if (!t) return undefined;
    const gone = await tx
      .delete(templateVersions)
      .where(and(eq(templateVersions.templateId, id), isNull(templateVersions.publishedAt)))
      .returning({ id: templateVersions.id });
    return gone.length > 0 ? true : { conflict: 'no-draft' as const };
  });
}

/**
 * A template's versions, newest (highest number) first, by keyset on the number: a page never repeats or skips
 * one, whatever is written meanwhile. The draft, when there is one, is the first.
 */
export async function listVersions(
  db: DbOrTx,
  t: TemplateRow,
  q: { limit: number; beforeVersion?: number },
): Promise<{ items: TemplateVersionRow[]; hasMore: boolean; total: number }> {
  await ensureLiveVersion(db, t);
  const where = and(eq(templateVersions.projectId, t.projectId), eq(templateVersions.templateId, t.id));
  const rows = await db
    .select()
    .from(templateVersions)
    .where(q.beforeVersion !== undefined ? and(where, lt(templateVersions.version, q.beforeVersion)) : where)
    .orderBy(desc(templateVersions.version))
    .limit(q.limit + 1);
  const [{ total }] = (await db
    .select({ total: sql<number>`count(*)::int` })
    .from(templateVersions)
    .where(where)) as [{ total: number }];
  return { items: rows.slice(0, q.limit), hasMore: rows.length > q.limit, total };
}

/** Version `n` of the template (published or the draft), or `undefined`. */
export async function getVersion(db: DbOrTx, t: TemplateRow, n: number): Promise<TemplateVersionRow | undefined> {
  if (n === t.version) await ensureLiveVersion(db, t);
  const [row] = await db
    .select()
    .from(templateVersions)
    .where(
      and(
        eq(templateVersions.projectId, t.projectId),
        eq(templateVersions.templateId, t.id),
        eq(templateVersions.version, n),
      ),
    );
  return row;
}

/** Version `n` of a template of the project, looked up by ids, or `undefined` (also for another project's). */
export async function findVersion(
  db: DbOrTx,
  projectId: string,
  templateId: string,
  n: number,
): Promise<TemplateVersionRow | undefined> {
  const [t] = await db
    .select()
    .from(templates)
    .where(and(eq(templates.projectId, projectId), eq(templates.id, templateId)));
  return t && getVersion(db, t, n);
}

/**
 * The template as version `n` has it: the template row with that published version's content and number, or
 * `undefined` when the template has no such published version (a draft is never sent).
 */
export async function pinnedTemplate(db: DbOrTx, t: TemplateRow, n: number): Promise<TemplateRow | undefined> {
  const v = await getVersion(db, t, n);
  if (!v?.publishedAt) return undefined;
  return {
    ...t,
    subject: v.subject,
    body: v.body,
    from: v.from,
    fromName: v.fromName,
    replyTo: v.replyTo,
    version: v.version,
  };
}
