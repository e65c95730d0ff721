/**
 * Bulk contact import: `POST /contacts/import` (202, queued) and `GET /contacts/import/{id}` (state, progress,
 * counts, row errors). File rules: `@mailroom/contacts/imports`; storing the upload:
 * `@mailroom/contacts/import-upload`.
 *
 * Bodies: `multipart/form-data` with the file in the field `file` (busboy), or the file itself as the body with
 * `Content-Type: text/csv`, `application/x-ndjson` or `application/json`.
 *
 * @module
 */
import type express from 'express';
import busboy from 'busboy';
import { Type, type Static } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound, validationError, errorMessage } from '@mailroom/platform/errors';
import { enqueueImport } from '@mailroom/queues/enqueue';
import { importTooLarge, storeImport, type ImportUpload } from '@mailroom/contacts/import-upload';
import {
  getImport,
  getImportErrors,
  IMPORT_ERRORS_KEPT,
  type ContactImportRow,
} from '@mailroom/contacts/queries/imports';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, StringEnum, Timestamp } from './common';

const ImportStatus = StringEnum(
  ['queued', 'running', 'completed', 'failed'] as const,
  'queued → running → completed | failed',
);
const Format = StringEnum(['csv', 'ndjson', 'json'] as const, 'csv, ndjson or json');

const RowError = Type.Object({
  row: Type.Integer({ description: '1-based record number in the file (the CSV header is not counted)' }),
  email: Nullable(Type.String()),
  errors: Type.Array(Type.Object({ field: Type.String(), message: Type.String(), code: Type.String() })),
});

const ContactImport = Type.Object({
  id: Type.String(),
  status: ImportStatus,
  format: Format,
  filename: Nullable(Type.String()),
  defaultSubscribed: Type.Boolean({ description: '`subscribed` of new contacts whose row does not state it' }),
  progress: Type.Object({
    bytesProcessed: Type.Integer(),
    bytesTotal: Type.Integer(),
    percent: Type.Number({ description: '0–100, by bytes of the file read' }),
    rowsProcessed: Type.Integer({ description: 'records applied or rejected so far' }),
  }),
  counts: Type.Object({
    created: Type.Integer({ description: 'new contacts' }),
    updated: Type.Integer({ description: 'existing contacts changed' }),
    skipped: Type.Integer({ description: 'rows that matched an existing contact and changed nothing' }),
    failed: Type.Integer({ description: 'rows rejected (see errors)' }),
  }),
  errors: Type.Array(RowError, { description: `rejected rows, in file order (the first ${IMPORT_ERRORS_KEPT})` }),
  error: Nullable(Type.String({ description: 'why the import stopped (status failed)' })),
  createdAt: Timestamp,
  startedAt: Nullable(Timestamp),
  finishedAt: Nullable(Timestamp),
});

const ImportQuery = Type.Object(
  {
    format: Type.Optional(Format),
    subscribed: Type.Boolean({
      default: true,
      description: '`subscribed` of new contacts whose row does not state it (default true)',
    }),
  },
  { additionalProperties: false },
);

/** Room for multipart boundaries and part headers on top of the file limit (bytes). */
const MULTIPART_OVERHEAD = 64 * 1024;

/** The file stream of a multipart body (field `file`), or of the body itself. */
function openUpload(req: express.Request, max: number): Promise<ImportUpload> {
  const contentType = req.get('content-type') ?? '';
  if (!contentType.toLowerCase().startsWith('multipart/form-data')) {
    return Promise.resolve({ stream: req, filename: null, mediaType: contentType || undefined });
  }
  return new Promise((resolve, reject) => {
    let bb: busboy.Busboy;
    try {
      bb = busboy({ headers: req.headers, limits: { files: 1, fileSize: max + 1, fields: 20, parts: 25 } });
    } catch (err) {
      reject(new AppError(ErrorCode.BAD_REQUEST, `Malformed multipart body: ${errorMessage(err)}`));
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
    bb.on('error', (err) =>
      reject(new AppError(ErrorCode.BAD_REQUEST, `Malformed multipart body: ${errorMessage(err)}`)),
    );
    bb.on('close', () => {
      if (!found)
        reject(
          validationError([{ field: 'file', message: 'is required (multipart field "file")', code: 'invalid_type' }]),
        );
    });
    req.pipe(bb);
  });
}

/**
 * Reads the request's file and stores it as a queued import (`storeImport`).
 *
 * @throws {@link AppError} 400 (malformed multipart), 413 (a declared `Content-Length` over the limit), 422 (`file`
 *   missing), and whatever `storeImport` throws.
 */
async function acceptImport(
  deps: AppDeps,
  log: AppDeps['logger'],
  projectId: string,
  req: express.Request,
  options: { format?: ContactImportRow['format']; subscribed: boolean },
): Promise<ContactImportRow> {
  const max = deps.config.importMaxBytes;
  const declared = Number(req.get('content-length') ?? NaN);
  const multipart = (req.get('content-type') ?? '').toLowerCase().startsWith('multipart/form-data');
  try {
    if (Number.isFinite(declared) && declared > max + (multipart ? MULTIPART_OVERHEAD : 0)) throw importTooLarge(max);
    const upload = await openUpload(req, max);
    const enqueue = (imp: ContactImportRow) => enqueueImport(deps.queues.import, imp);
    return await storeImport({ db: deps.database.db, maxBytes: max, enqueue, log }, projectId, upload, options);
  } catch (err) {
    // Let the client finish sending so it can read the error; an oversized body is cut off by `Connection: close`.
    req.unpipe();
    req.resume();
    throw err;
  }
}

function present(row: ContactImportRow, errors: Static<typeof RowError>[]): Static<typeof ContactImport> {
  return {
    id: row.id,
    status: row.status === 'uploading' ? 'queued' : row.status,
    format: row.format,
    filename: row.filename,
    defaultSubscribed: row.defaultSubscribed,
    progress: {
      bytesProcessed: row.bytesProcessed,
      bytesTotal: row.sizeBytes,
      percent:
        row.status === 'completed'
          ? 100
          : row.sizeBytes
            ? Math.min(100, Math.floor((1000 * row.bytesProcessed) / row.sizeBytes) / 10)
            : 0,
      rowsProcessed: row.rowsProcessed,
    },
    counts: { created: row.created, updated: row.updated, skipped: row.skipped, failed: row.failed },
    errors,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
    startedAt: row.startedAt?.toISOString() ?? null,
    finishedAt: row.finishedAt?.toISOString() ?? null,
  };
}

/** Routes of this module. */
export function importRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/contacts/import',
      operationId: 'importContacts',
      tag: 'Contacts',
      summary: 'Import contacts in bulk (queued)',
      description:
        'Send a CSV (header row with an `email` column; optional `subscribed`; `topic:<topic name>` columns set the ' +
        "contact's topic choices, and one naming no topic of the project is a 422 on `file`; other columns become data keys), " +
        'NDJSON (one `{ email, subscribed?, data? }` per line) or a JSON array of such objects: as ' +
        'multipart/form-data (field `file`) or as the body itself. The file is checked (header, first record), ' +
        'stored, and imported by a worker in batches; poll GET /contacts/import/{id}. Invalid rows are reported, ' +
        'not fatal. An unsubscribed contact is re-subscribed only by a row whose `subscribed` says so. ' +
        'Largest file: IMPORT_MAX_BYTES (default 256 MiB).',
      auth: 'secret',
      query: ImportQuery,
      requestBody: {
        required: true,
        content: {
          'multipart/form-data': {
            schema: { type: 'object', required: ['file'], properties: { file: { type: 'string', format: 'binary' } } },
          },
          'text/csv': { schema: { type: 'string' } },
          'application/x-ndjson': { schema: { type: 'string' } },
          'application/json': { schema: { type: 'array', items: { type: 'object' } } },
        },
      },
      response: ContactImport,
      status: 202,
      errors: [400, 401, 403, 413, 422, 429],
      handler: async ({ query, auth, req, log }) => {
        const row = await acceptImport(deps, log, auth.projectId, req, {
          format: query.format,
          subscribed: query.subscribed,
        });
        return { data: present(row, []) };
      },
    }),
    route({
      method: 'get',
      path: '/contacts/import/:id',
      operationId: 'getContactImport',
      tag: 'Contacts',
      summary: 'Get an import: state, progress, counts and row errors',
      auth: 'secret',
      params: IdParams,
      response: ContactImport,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const row = await getImport(db, auth.projectId, params.id);
        if (!row || row.status === 'uploading') throw notFound('Import');
        return { data: present(row, await getImportErrors(db, auth.projectId, row.id)) };
      },
    }),
  ];
}
