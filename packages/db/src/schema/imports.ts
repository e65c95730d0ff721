import {
  bigint,
  boolean,
  check,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uuid,
  index,
} from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';

/** States of a contact import: `uploading` (request still streaming) → `queued` → `running` → `completed` | `failed`. */
export const IMPORT_STATUSES = ['uploading', 'queued', 'running', 'completed', 'failed'] as const;
export type ImportStatus = (typeof IMPORT_STATUSES)[number];
import type { ImportFormat } from './import-format';
export type { ImportFormat };

/**
 * A bulk contact import. The uploaded file lives in `contact_import_chunks` until the import finishes; the
 * worker resumes after `rowsProcessed` (committed with each batch), so a retried job never counts a row twice.
 */
export const contactImports = pgTable(
  'contact_imports',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    status: text('status').notNull().$type<ImportStatus>(),
    format: text('format').notNull().$type<ImportFormat>(),
    filename: text('filename'),
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull().default(0),
    chunkCount: integer('chunk_count').notNull().default(0),
    /** `subscribed` of new contacts whose row does not state it. */
    defaultSubscribed: boolean('default_subscribed').notNull(),
    bytesProcessed: bigint('bytes_processed', { mode: 'number' }).notNull().default(0),
    rowsProcessed: integer('rows_processed').notNull().default(0),
    created: integer('created').notNull().default(0),
    updated: integer('updated').notNull().default(0),
    skipped: integer('skipped').notNull().default(0),
    failed: integer('failed').notNull().default(0),
    /** Why the whole import failed (unreadable file); row errors are in `contact_import_errors`. */
    error: text('error'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }),
    finishedAt: timestamp('finished_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('contact_imports_project_idx').on(t.projectId, t.id),
    index('contact_imports_pending_idx')
      .on(t.id)
      .where(sql`${t.status} in ('uploading', 'queued', 'running')`),
    check('contact_imports_status_check', sql.raw(`status in (${IMPORT_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
    check('contact_imports_format_check', sql`${t.format} in ('csv', 'ndjson', 'json')`),
  ],
);

/** The uploaded file, in order, in chunks of about 1 MiB (read back one at a time by the worker). */
export const contactImportChunks = pgTable(
  'contact_import_chunks',
  {
    importId: uuid('import_id')
      .notNull()
      .references(() => contactImports.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    data: bytea('data').notNull(),
  },
  (t) => [primaryKey({ columns: [t.importId, t.seq] })],
);

/** Rows an import could not apply (the first 1,000 of an import; `failed` counts them all). */
export const contactImportErrors = pgTable(
  'contact_import_errors',
  {
    importId: uuid('import_id')
      .notNull()
      .references(() => contactImports.id, { onDelete: 'cascade' }),
    /** 1-based record number in the file (the CSV header is not a record). */
    row: integer('row').notNull(),
    email: text('email'),
    errors: jsonb('errors').$type<{ field: string; message: string; code: string }[]>().notNull(),
  },
  (t) => [primaryKey({ columns: [t.importId, t.row] })],
);
