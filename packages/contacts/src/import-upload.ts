/**
 * Storing a contact import: the uploaded file is streamed into Postgres in 1 MiB chunks (never held whole in
 * memory, never put in Redis), after its first bytes passed {@link checkImportHead}; then the import is marked
 * queued and handed to `enqueue` (the caller's `contact-import` job).
 *
 * A failed upload (too large, refused head, stream error) deletes what it stored: nothing changes.
 *
 * @module
 */
import type { Readable } from 'node:stream';
import { AppError, ErrorCode, validationError } from '@mailroom/platform/errors';
import { hasNul } from '@mailroom/platform/json-guard';
import { type ImportFormat } from '@mailroom/db/schema/import-format';
import { type Logger, logged } from '@mailroom/platform/logger';
import { type Db } from '@mailroom/db/client';
import { topicIdsByName } from './queries/topics';
import { importFormatOf, readImportHead } from './import-head';
import {
  appendImportChunk,
  createImport,
  deleteImport,
  markImportQueued,
  type ContactImportRow,
} from './queries/imports';

/** Size of a stored chunk (bytes). */
export const IMPORT_CHUNK_BYTES = 1024 * 1024;
/** Bytes looked at before anything is stored. */
const HEAD_BYTES = 64 * 1024;

/** An uploaded file: its bytes, and what the client said about it. */
export interface ImportUpload {
  stream: Readable;
  filename: string | null;
  mediaType: string | undefined;
}

/** 413 for a file over `max` bytes (`Connection: close`: the rest of an oversized body is not read). */
export function importTooLarge(max: number): AppError {
  return new AppError(ErrorCode.PAYLOAD_TOO_LARGE, `The import file is larger than ${max} bytes`, {
    suggestion: 'Split the file, or raise IMPORT_MAX_BYTES on the server.',
    headers: { Connection: 'close' },
  });
}

/** What storing an import needs. `enqueue` starts the import's job; its failure is logged, not thrown. */
export interface StoreImportDeps {
  db: Db;
  /** Largest file (bytes), `IMPORT_MAX_BYTES`. */
  maxBytes: number;
  enqueue: (imp: ContactImportRow) => Promise<unknown>;
  log: Logger;
}

/**
 * Streams an upload into a new import and queues it.
 *
 * @param options.format - overrides what the media type or file name say.
 * @param options.subscribed - `subscribed` of new contacts whose record does not state it.
 * @returns the queued import.
 * @throws {@link AppError} 413 (over `maxBytes`, or `upload.stream.truncated`), 422 (empty, refused by its head
 *   check, a `topic:<name>` column naming no topic of the project, or named with a NUL; `format` unknown); whatever the stream throws. Nothing is left stored.
 */
export async function storeImport(
  deps: StoreImportDeps,
  projectId: string,
  upload: ImportUpload,
  options: { format?: ImportFormat; subscribed: boolean },
): Promise<ContactImportRow> {
  const max = deps.maxBytes;
  let importId: string | undefined;
  try {
    // An RFC 5987 name (`filename*=UTF-8''a%00b.csv`) decodes to U+0000, which the `filename` column cannot hold.
    if (upload.filename !== null && hasNul(upload.filename)) {
      throw validationError([
        {
          field: 'file',
          message: 'the file name must not contain the NUL character (\\u0000)',
          code: 'invalid_string',
        },
      ]);
    }
    const format = options.format ?? importFormatOf(upload.mediaType, upload.filename);
    if (!format) {
      throw validationError([
        {
          field: 'format',
          message:
            'could not tell the file format: send text/csv, application/x-ndjson or application/json, name the file .csv/.ndjson/.json, or pass ?format=',
          code: 'invalid_enum_value',
        },
      ]);
    }

    let size = 0;
    let seq = 0;
    let pending: Buffer[] = [];
    let pendingBytes = 0;
    const flush = async (min: number) => {
      while (pendingBytes >= min && pendingBytes > 0) {
        const all = Buffer.concat(pending);
        const chunk = all.subarray(0, IMPORT_CHUNK_BYTES);
        await appendImportChunk(deps.db, importId!, seq++, Buffer.from(chunk));
        const rest = all.subarray(chunk.length);
        pending = rest.length ? [rest] : [];
        pendingBytes = rest.length;
      }
    };
    const start = async (complete: boolean) => {
      const head = readImportHead(format, Buffer.concat(pending), complete);
      if (!head.ok) throw validationError([head.error]);
      // Every `topic:<name>` column must name a topic of the project (case-insensitively).
      const known = await topicIdsByName(
        deps.db,
        projectId,
        head.topics.map((t) => t.name),
      );
      const unknown = head.topics.filter((t) => !known.has(t.name));
      if (unknown.length) {
        throw validationError(
          unknown.map((t) => ({
            field: 'file',
            message: `the CSV header's column "${t.column}" names no topic of this project`,
            code: 'custom',
          })),
        );
      }
      importId = (
        await createImport(deps.db, projectId, {
          format,
          filename: upload.filename,
          defaultSubscribed: options.subscribed,
        })
      ).id;
    };

    for await (const piece of upload.stream as AsyncIterable<Buffer>) {
      size += piece.length;
      if (size > max) throw importTooLarge(max);
      pending.push(piece);
      pendingBytes += piece.length;
      if (!importId && pendingBytes >= HEAD_BYTES) await start(false);
      if (importId && pendingBytes >= IMPORT_CHUNK_BYTES) await flush(IMPORT_CHUNK_BYTES);
    }
    // busboy marks a file cut at its `fileSize` limit.
    if ((upload.stream as { truncated?: boolean }).truncated) throw importTooLarge(max);
    if (!importId) await start(true);
    await flush(1);
    const queued = await markImportQueued(deps.db, importId!, size, seq);
    try {
      await deps.enqueue(queued);
    } catch (err) {
      // Queued in Postgres all the same: the worker's reconciler enqueues it once Redis answers.
      deps.log.warn({ err, importId: queued.id }, 'enqueue failed; the reconciler will enqueue this import');
    }
    return queued;
  } catch (err) {
    if (importId) await logged(deleteImport(deps.db, importId), deps.log, 'unfinished upload removal');
    throw err;
  }
}
