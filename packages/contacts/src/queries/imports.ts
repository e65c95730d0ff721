/**
 * Bulk contact imports: the uploaded file (chunked in Postgres), batched upserts with their progress, row errors.
 * Every query is scoped by `projectId` or by an import id the caller already resolved for its project.
 *
 * @module
 */
import { and, asc, eq, sql, type SQL } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { importTopicCtes } from './import-topics';
import { storableText, type ImportRecord, type ImportRowError } from '../imports';
import type { DbOrTx } from '@mailroom/db/client';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { mergedDataSqlText, mergedSubscribedSqlText } from '@mailroom/db/queries/batch-upsert';
import { contactImportChunks, contactImportErrors, contactImports, type ImportFormat } from '@mailroom/db/schema';

export type { ImportRecord, ImportRowError };

export type ContactImportRow = typeof contactImports.$inferSelect;

/** Row errors kept per import (the `failed` count covers all of them). */
export const IMPORT_ERRORS_KEPT = 1_000;

/** Creates an import in state `uploading` (invisible to workers until {@link markImportQueued}). */
export async function createImport(
  db: DbOrTx,
  projectId: string,
  input: { format: ImportFormat; filename: string | null; defaultSubscribed: boolean },
): Promise<ContactImportRow> {
  const [row] = await db
    .insert(contactImports)
    .values({
      projectId,
      status: 'uploading',
      format: input.format,
      filename: input.filename,
      defaultSubscribed: input.defaultSubscribed,
    })
    .returning();
  return row;
}

/**
 * Stores chunk `seq` (0-based) of an upload and marks the upload alive (one statement), so the reconciler does
 * not take a slow upload for an abandoned one.
 */
export async function appendImportChunk(db: DbOrTx, importId: string, seq: number, data: Buffer): Promise<void> {
  await db.execute(sql`
    with chunk as (insert into contact_import_chunks (import_id, seq, data) values (${importId}::uuid, ${seq}, ${data}))
    update contact_imports set updated_at = now() where id = ${importId}::uuid`);
}

/** Ends the upload: `uploading → queued` with the file's size (bytes) and chunk count. */
export async function markImportQueued(
  db: DbOrTx,
  importId: string,
  sizeBytes: number,
  chunkCount: number,
): Promise<ContactImportRow> {
  const [row] = await db
    .update(contactImports)
    .set({ status: 'queued', sizeBytes, chunkCount, updatedAt: new Date() })
    .where(and(eq(contactImports.id, importId), eq(contactImports.status, 'uploading')))
    .returning();
  return row;
}

/** Deletes an import and its chunks and errors (a failed upload leaves nothing behind). */
export async function deleteImport(db: DbOrTx, importId: string): Promise<void> {
  await db.delete(contactImports).where(eq(contactImports.id, importId));
}

/** An import of the project, or `undefined` (also for another project's id). */
export async function getImport(db: DbOrTx, projectId: string, id: string): Promise<ContactImportRow | undefined> {
  const [row] = await db
    .select()
    .from(contactImports)
    .where(and(eq(contactImports.projectId, projectId), eq(contactImports.id, id)));
  return row;
}

/** The kept row errors of an import of the project, in file order. */
export async function getImportErrors(db: DbOrTx, projectId: string, importId: string) {
  return db
    .select({ row: contactImportErrors.row, email: contactImportErrors.email, errors: contactImportErrors.errors })
    .from(contactImportErrors)
    .innerJoin(contactImports, eq(contactImports.id, contactImportErrors.importId))
    .where(and(eq(contactImports.projectId, projectId), eq(contactImportErrors.importId, importId)))
    .orderBy(asc(contactImportErrors.row))
    .limit(IMPORT_ERRORS_KEPT);
}

/**
 * Takes an import for processing: `queued | running → running` (a `running` one is resumed after a crash).
 *
 * @returns the row, or `undefined` when it is missing or already final.
 */
export async function startImport(db: DbOrTx, importId: string): Promise<ContactImportRow | undefined> {
  const [row] = await db
    .update(contactImports)
    .set({ status: 'running', startedAt: sql`coalesce(${contactImports.startedAt}, now())`, updatedAt: new Date() })
    .where(and(eq(contactImports.id, importId), sql`${contactImports.status} in ('queued', 'running')`))
    .returning();
  return row;
}

/** Chunk `seq` of an upload, or `undefined` past the end. */
export async function readImportChunk(db: DbOrTx, importId: string, seq: number): Promise<Buffer | undefined> {
  const [row] = await db
    .select({ data: contactImportChunks.data })
    .from(contactImportChunks)
    .where(and(eq(contactImportChunks.importId, importId), eq(contactImportChunks.seq, seq)));
  return row?.data;
}

/** Outcome counts of a batch. */
export interface ImportCounts {
  created: number;
  updated: number;
  skipped: number;
}

/**
 * Folds records with the same address into the first (later values win), as applying them in file order
 * would. A folded record counts as `updated` when it changes what the earlier ones set, else `skipped`.
 */
function foldDuplicates(records: ImportRecord[]): { distinct: ImportRecord[]; updated: number; skipped: number } {
  const byKey = new Map<string, ImportRecord>();
  let updated = 0;
  let skipped = 0;
  for (const r of records) {
    const prev = byKey.get(r.emailKey);
    if (!prev) {
      byKey.set(r.emailKey, { ...r, set: { ...r.set }, removed: [...r.removed], topics: r.topics && { ...r.topics } });
      continue;
    }
    const changes =
      (r.subscribed !== undefined && r.subscribed !== prev.subscribed) ||
      Object.entries(r.set).some(([k, v]) => JSON.stringify(prev.set[k]) !== JSON.stringify(v)) ||
      r.removed.some((k) => k in prev.set || !prev.removed.includes(k)) ||
      Object.entries(r.topics ?? {}).some(([k, v]) => prev.topics?.[k] !== v);
    if (changes) updated++;
    else skipped++;
    for (const k of r.removed) delete prev.set[k];
    Object.assign(prev.set, r.set);
    prev.removed = [...new Set([...prev.removed.filter((k) => !(k in r.set)), ...r.removed])];
    if (r.subscribed !== undefined) prev.subscribed = r.subscribed;
    if (r.topics) prev.topics = { ...prev.topics, ...r.topics };
  }
  return { distinct: [...byKey.values()], updated, skipped };
}

/**
 * The batch an import batch waits for before its statements end: the batch of the same import starting at
 * `fromRow`, applied by another transaction at the same time (see `commitImportBatch`).
 */
export interface ImportBatchGate {
  importId: string;
  fromRow: number;
}

/**
 * The transaction-level advisory lock of an import's batch, in the two-`int4` form: the last 32 bits of the
 * import's id (the random end of a UUIDv7) and the batch's first row modulo 2^31 - 1. The batch holds it
 * exclusively from its first statement to its commit; the batch after it takes it `shared` to wait for that end.
 */
export function importBatchLock(gate: ImportBatchGate, shared: boolean): SQL {
  const importKey = Number.parseInt(gate.importId.replace(/-/g, '').slice(-8), 16) | 0;
  const rowKey = gate.fromRow % 2_147_483_647;
  return shared
    ? sql`pg_advisory_xact_lock_shared(${importKey}::int, ${rowKey}::int)`
    : sql`pg_advisory_xact_lock(${importKey}::int, ${rowKey}::int)`;
}

/** The merged `data` of `current` with the patch of the input alias `input` (its `patch` and `removed_keys`). */
function mergedData(current: string, input: string): SQL {
  return sql.raw(mergedDataSqlText(current, `${input}.patch`, `${input}.removed_keys`));
}

/**
 * Applies a batch of records to a project's contacts in one statement with array parameters (no per-row
 * statements): existing contacts are merged in SQL (`data || set - removed`; `subscribed` only when stated, so an
 * unsubscribed contact stays unsubscribed unless its row says otherwise) and written only when something
 * changes; new ones are inserted (`subscribed` = stated or `defaultSubscribed`). A contact inserted concurrently
 * between the two steps is retried as an update. Topic choices (`topics`) are written by the same statement
 * (`importTopicCtes`); a contact whose only change is a topic choice counts as updated.
 *
 * @param after - when set, every statement ends by waiting for that batch's transaction (its advisory lock, taken
 *   shared after the contacts are written): the statement's counter trigger (`contact_stats`) then runs only once
 *   the batch before has committed, so two batches applied at once never wait on each other's counter row.
 * @param deliveries - receives the webhook deliveries the statement wrote (topic changes), once it succeeded: the
 *   caller enqueues them after its transaction commits.
 * @returns created (new contacts), updated (changed), skipped (already as the file says).
 */
export async function importContactBatch(
  db: DbOrTx,
  projectId: string,
  records: ImportRecord[],
  defaultSubscribed: boolean,
  after?: ImportBatchGate,
  deliveries?: WebhookDeliveryRef[],
): Promise<ImportCounts> {
  const written: WebhookDeliveryRef[] = [];
  const gate = after ? sql`(select 1 from ${importBatchLock(after, true)})` : sql`1`;
  const folded = foldDuplicates(records);
  const counts: ImportCounts = { created: 0, updated: folded.updated, skipped: folded.skipped };
  let pending = folded.distinct;
  for (let attempt = 0; pending.length > 0; attempt++) {
    if (attempt === 5) throw new Error('contact import batch kept racing with concurrent inserts');
    const result = await db.execute<{
      seen: number;
      updated: number;
      created: number;
      raced: string[];
      deliveries: WebhookDeliveryRef[];
    }>(sql`
      with input as (
        select * from unnest(
          ${sql.param(pending.map(() => newId()))}::uuid[],
          ${sql.param(pending.map((r) => r.email))}::text[],
          ${sql.param(pending.map((r) => r.emailKey))}::text[],
          ${sql.param(pending.map((r) => r.subscribed ?? defaultSubscribed))}::boolean[],
          ${sql.param(pending.map((r) => r.subscribed !== undefined))}::boolean[],
          ${sql.param(pending.map((r) => JSON.stringify(r.set)))}::jsonb[],
          ${sql.param(pending.map((r) => JSON.stringify(r.removed)))}::jsonb[]
        ) as t(id, email, email_key, subscribed, stated, patch, removed)
      ),
      prepared as (
        select i.*, array(select jsonb_array_elements_text(i.removed)) as removed_keys from input i
      ),
      -- Each address is looked up on its own through the (project_id, email_key) index: the lateral subquery with
      -- "limit 1" cannot be flattened into a join, and "id = any(…)" below reads back only the batch's rows. A
      -- plain join let the planner hash the project's whole contact list once per batch (its estimate of a
      -- project's rows is far off while an import grows the table), which made an import quadratic in the
      -- project's size: the main cost of a 1,000,000-row import.
      seen as (
        select c.id, c.email_key, c.subscribed, c.data from input i
        cross join lateral (
          select c.id, c.email_key, c.subscribed, c.data from contacts c
          where c.project_id = ${projectId}::uuid and c.email_key = i.email_key limit 1
        ) c
      ),
      changed as (
        select s.id, p.stated, p.subscribed, p.patch, p.removed_keys from seen s join prepared p on p.email_key = s.email_key
        where (p.stated and s.subscribed <> p.subscribed) or ${mergedData('s.data', 'p')} <> s.data
      ),
      upd as (
        update contacts c set
          subscribed = ${sql.raw(mergedSubscribedSqlText('c.subscribed', 'ch.stated', 'ch.subscribed'))},
          data = ${mergedData('c.data', 'ch')},
          updated_at = now()
        from changed ch
        where c.id = any((select array_agg(id) from changed)::uuid[]) and c.id = ch.id and c.project_id = ${projectId}::uuid
          and ((ch.stated and c.subscribed <> ch.subscribed) or ${mergedData('c.data', 'ch')} <> c.data)
        returning c.email_key
      ),
      ins as (
        insert into contacts (id, project_id, email, email_key, subscribed, data)
        select p.id, ${projectId}::uuid, p.email, p.email_key, p.subscribed, p.patch
        from prepared p where not exists (select 1 from seen s where s.email_key = p.email_key)
        on conflict (project_id, email_key) do nothing
        returning id, email_key
      ),
      ${importTopicCtes(projectId, pending)}
      select (select count(*) from seen)::int as seen,
        (select count(*) from (select email_key from upd union select email_key from topic_written) w)::int as updated,
        (select count(*) from ins)::int as created,
        array(
          select p.email_key from prepared p
          where not exists (select 1 from seen s where s.email_key = p.email_key)
            and not exists (select 1 from ins where ins.email_key = p.email_key)
        ) as raced,
        coalesce((select json_agg(json_build_object('id', id, 'projectId', project_id, 'generation', generation)) from topic_hooks), '[]'::json) as deliveries,
        -- Last: after the writes above, before the statement's triggers.
        ${gate} as gated
    `);
    const r = result.rows[0];
    counts.created += r.created;
    counts.updated += r.updated;
    counts.skipped += r.seen - r.updated;
    written.push(...r.deliveries);
    const raced = new Set(r.raced);
    pending = pending.filter((p) => raced.has(p.emailKey));
  }
  deliveries?.push(...written);
  return counts;
}

/**
 * Ends an import: `completed` (or `failed` with `error`, stored through `storableText`, since a parser's message
 * may quote a NUL byte of the file); its uploaded file is deleted.
 */
export async function finishImport(
  db: DbOrTx,
  importId: string,
  outcome: { error?: string; bytesProcessed?: number },
): Promise<void> {
  await db.transaction(async (tx) => {
    await tx
      .update(contactImports)
      .set({
        status: outcome.error ? 'failed' : 'completed',
        error: outcome.error ? storableText(outcome.error, 2_000) : null,
        ...(outcome.bytesProcessed !== undefined ? { bytesProcessed: outcome.bytesProcessed } : {}),
        finishedAt: new Date(),
        updatedAt: new Date(),
      })
      .where(eq(contactImports.id, importId));
    await tx.delete(contactImportChunks).where(eq(contactImportChunks.importId, importId));
  });
}

/**
 * Imports that should be running but may have lost their job (Redis flushed): `queued` or `running` and not
 * updated for `olderThanMs`. Also deletes uploads abandoned for `abandonedMs` (the API died mid-upload).
 */
export async function pendingImports(
  db: DbOrTx,
  olderThanMs: number,
  abandonedMs: number,
): Promise<{ id: string; projectId: string }[]> {
  await db.execute(sql`
    delete from contact_imports where status = 'uploading'
      and updated_at < now() - make_interval(secs => ${abandonedMs / 1000})`);
  const rows = await db.execute<{ id: string; project_id: string }>(sql`
    select id, project_id from contact_imports
    where status in ('queued', 'running') and updated_at < now() - make_interval(secs => ${olderThanMs / 1000})
    order by id limit 1000`);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id }));
}
