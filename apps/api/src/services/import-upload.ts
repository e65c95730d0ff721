/**
 * Accepting a contact import (`POST /contacts/import`): the upload is streamed into Postgres in 1 MiB chunks
 * (never held whole in memory, never put in Redis), after its first bytes passed {@link checkImportHead}; then
 * the import is queued and a `contact-import` job is enqueued (`jobId` = import id).
 *
 * Bodies: `multipart/form-data` with the file in the field `file` (busboy), or the file itself as the body with
 * `Content-Type: text/csv`, `application/x-ndjson` or `application/json`.
 *
 * A failed upload (too large, refused head, client gone) deletes what it stored: the request changes nothing.
 *
 * @module
 */
import type { Readable } from 'node:stream';
import type express from 'express';
import busboy from 'busboy';
import type { Queue } from 'bullmq';
import { AppError, ErrorCode, validationError } from '@mailroom/platform/errors';
import { checkImportHead, importFormatOf } from '@mailroom/contacts/imports';
import { hasNul } from '@mailroom/platform/json-guard';
import { type ImportJobPayload } from '@mailroom/queues/catalog';
import { enqueueImport } from '@mailroom/queues/enqueue';
import { type Config } from '@mailroom/platform/config';
import { type ImportFormat } from '@mailroom/db/schema/import-format';
import { type Logger } from '@mailroom/platform/logger';
import {
  appendImportChunk,
  createImport,
  deleteImport,
  markImportQueued,
  type ContactImportRow,
} from '@mailroom/contacts/queries/imports';
import { type Db } from '@mailroom/db/client';

/** Size of a stored chunk (bytes). */
export const IMPORT_CHUNK_BYTES = 1024 * 1024;
/** Bytes looked at before anything is stored. */
const HEAD_BYTES = 64 * 1024;
/** Room for multipart boundaries and part headers on top of the file limit (bytes). */
const MULTIPART_OVERHEAD = 64 * 1024;

interface Upload {
  stream: Readable;
  filename: string | null;
  mediaType: string | undefined;
}

function tooLarge(max: number): AppError {
  return new AppError(ErrorCode.PAYLOAD_TOO_LARGE, `The import file is larger than ${max} bytes`, {
    suggestion: 'Split the file, or raise IMPORT_MAX_BYTES on the server.',
    headers: { Connection: 'close' },
  });
}

/** The file stream of a multipart body (field `file`), or of the body itself. */
function openUpload(req: express.Request, max: number): Promise<Upload> {
  const contentType = req.get('content-type') ?? '';
  if (!contentType.toLowerCase().startsWith('multipart/form-data')) {
    return Promise.resolve({ stream: req, filename: null, mediaType: contentType || undefined });
  }
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fileSize: max + 1, fields: 20, parts: 25 } });
    } catch (err) {
      reject(new AppError(ErrorCode.BAD_REQUEST, `Malformed multipart body: ${(err as Error).message}`));
      return;
    }
    let found = false;
    bb.on('file', (name, stream, info) => {
      if (name !== 'file' || found) {
        stream.resume();
        return;
      }
      found = true;
      resolve({ stream, filename: info.filename ?? null, mediaType: info.mimeType });
    });
    bb.on('error', (err) => reject(new AppError(ErrorCode.BAD_REQUEST, `Malformed multipart body: ${(err as Error).message}`)));
    bb.on('close', () => {
      if (!found) reject(validationError([{ field: 'file', message: 'is required (multipart field "file")', code: 'invalid_type' }]));
    });
    req.pipe(bb);
  });
}

/**
 * Streams an upload into a new import and queues it.
 *
 * @param options.format - overrides what the media type or file name say.
 * @param options.subscribed - `subscribed` of new contacts whose record does not state it.
 * @returns the queued import.
 * @throws {@link AppError} 400 (malformed multipart), 413 (over `IMPORT_MAX_BYTES`), 422 (`file` missing, empty,
 *   refused by its head check or named with a NUL; `format` unknown).
 */
export async function acceptImport(
  deps: { config: Config; db: Db; importQueue: Queue<ImportJobPayload>; log: Logger },
  projectId: string,
  req: express.Request,
  options: { format?: ImportFormat; subscribed: boolean },
): Promise<ContactImportRow> {
  const max = deps.config.importMaxBytes;
  const declared = Number(req.get('content-length') ?? NaN);
  const multipart = (req.get('content-type') ?? '').toLowerCase().startsWith('multipart/form-data');
  let importId: string | undefined;
  try {
    if (Number.isFinite(declared) && declared > max + (multipart ? MULTIPART_OVERHEAD : 0)) throw tooLarge(max);
    const upload = await openUpload(req, max);
    // An RFC 5987 name (`filename*=UTF-8''a%00b.csv`) decodes to U+0000, which the `filename` column cannot hold.
    if (upload.filename !== null && hasNul(upload.filename)) {
      throw validationError([{ field: 'file', message: 'the file name must not contain the NUL character (\\u0000)', code: 'invalid_string' }]);
    }
    const format = options.format ?? importFormatOf(upload.mediaType, upload.filename);
    if (!format) {
      throw validationError([
        {
          field: 'format',
          message: 'could not tell the file format: send text/csv, application/x-ndjson or application/json, name the file .csv/.ndjson/.json, or pass ?format=',
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
      const problem = checkImportHead(format, Buffer.concat(pending), complete);
      if (problem) throw validationError([problem]);
      importId = (await createImport(deps.db, projectId, { format, filename: upload.filename, defaultSubscribed: options.subscribed })).id;
    };

    for await (const piece of upload.stream as AsyncIterable<Buffer>) {
      size += piece.length;
      if (size > max) throw tooLarge(max);
      pending.push(piece);
      pendingBytes += piece.length;
      if (!importId && pendingBytes >= HEAD_BYTES) await start(false);
      if (importId && pendingBytes >= IMPORT_CHUNK_BYTES) await flush(IMPORT_CHUNK_BYTES);
    }
    if ((upload.stream as { truncated?: boolean }).truncated) throw tooLarge(max);
    if (!importId) await start(true);
    await flush(1);
    const queued = await markImportQueued(deps.db, importId!, size, seq);
    try {
      await enqueueImport(deps.importQueue, { id: queued.id, projectId });
    } catch (err) {
      // Queued in Postgres all the same: the worker's reconciler enqueues it once Redis answers.
      deps.log.warn({ err, importId: queued.id }, 'enqueue failed; the reconciler will enqueue this import');
    }
    return queued;
  } catch (err) {
    if (importId) await deleteImport(deps.db, importId).catch(() => undefined);
    // Let the client finish sending so it can read the error; an oversized body is cut off by `Connection: close`.
    req.unpipe();
    req.resume();
    throw err;
  }
}
