/**
 * Contact import files: the record rules and the streaming parser the worker runs (csv-parse for CSV, `readline`
 * for NDJSON, stream-json for a JSON array); formats and the header check before an upload are in `./import-head`
 * (re-exported here). Nothing here holds a whole file: records come out one at a time, in file order.
 *
 * Record rules (one contact per record):
 * - CSV: a header row naming the columns. `email` (required, case-insensitive) and `subscribed` (optional:
 *   true/false, yes/no, 1/0; an empty cell means "not stated") are fields of the contact; every other named
 *   column becomes a `data` key holding the cell's text. Empty cells set nothing (they never erase stored data).
 *   Columns with an empty header are ignored. A column named `topic:<name>` (prefix and name case-insensitive) is
 *   the contact's choice for the project's topic of that name (true/false, yes/no, 1/0; empty: no change); the
 *   upload is refused when no topic has that name (`storeImport`).
 * - NDJSON (one JSON object per line) and JSON (an array of objects): each record has the shape of the body of
 *   `POST /contacts`: `{ email, subscribed?, data? }`; a `data` key set to `null` is removed from the contact.
 * - `subscribed` is applied only when a record states it, so an import never re-subscribes someone who
 *   unsubscribed unless that record says so. New contacts whose record does not state it get the import's default.
 * - A record Postgres could not store is a row error naming the field, never a failed import: U+0000 in a string
 *   or key (a raw 0x00 byte in a CSV cell), nesting deeper than {@link MAX_JSON_DEPTH} (the record is depth 0, so
 *   `data` values get 31 levels), or a lone UTF-16 surrogate (`"\ud800"` in JSON), which `jsonb` refuses. A key
 *   `__proto__`, `constructor` or `prototype` anywhere in a record is a row error naming it (`data.__proto__`), as
 *   in a request body; a CSV column so named refuses the file at its header.
 *
 * @module
 */
import { splitPatch } from '@mailroom/db/queries/data-patch';
import type { ImportFormat } from '@mailroom/db/schema/import-format';
import { Readable } from 'node:stream';
import { createInterface } from 'node:readline';
import { parse as parseCsv, type CsvError, type Options as CsvOptions } from 'csv-parse';
import { normalizeEmail, emailKey } from '@mailroom/platform/address';
import { ContactInput } from './contacts';
import type { FieldError } from '@mailroom/platform/errors';
import { findJsonProblem, LONE_SURROGATE, MAX_JSON_DEPTH } from '@mailroom/platform/json-guard';
import { csvColumns, type CsvColumns } from './import-head';
import { findReservedKeys, markProtoKey } from '@mailroom/platform/reserved-keys';
import { dataValidator } from '@mailroom/platform/validation';

/** One valid record, normalised. */
export interface ImportRecord {
  /** 1-based record number in the file (the CSV header is not a record). */
  row: number;
  email: string;
  emailKey: string;
  /** Stated subscription; `undefined` keeps an existing contact's value. */
  subscribed?: boolean;
  /** `data` keys to set. */
  set: Record<string, unknown>;
  /** `data` keys to remove. */
  removed: string[];
  /** Topic choices by lower-cased topic name (CSV `topic:<name>` columns); absent or empty: none. */
  topics?: Record<string, boolean>;
}

/** A record that cannot be applied, with the reasons. */
export interface ImportRowError {
  row: number;
  email: string | null;
  errors: FieldError[];
}

/** What the parser yields: a record or a row error. */
export type ImportItem = { ok: true; record: ImportRecord } | { ok: false; error: ImportRowError };

/** The file cannot be read on (the import fails with this message; rows before it stay imported). */
export class ImportFileError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ImportFileError';
  }
}

export {
  checkImportHead,
  csvColumns,
  importFormatOf,
  readImportHead,
  TOPIC_COLUMN_PREFIX,
  type CsvColumns,
} from './import-head';
import { errorMessage } from '@mailroom/platform/errors';

/** Largest CSV record or NDJSON line (bytes); a runaway quote cannot make the parser buffer the file. */
export const IMPORT_MAX_RECORD_BYTES = 1024 * 1024;

const validateContact = dataValidator(ContactInput);

const TRUE = new Set(['true', 'yes', 'y', '1']);
const FALSE = new Set(['false', 'no', 'n', '0']);

const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** Longest text kept of a rejected record's address, field or message in its stored row error (characters). */
export const IMPORT_ERROR_TEXT_MAX = 500;

/**
 * Makes text from a rejected record storable in Postgres `text`/`jsonb`: U+0000 becomes the six characters
 * `\u0000`, a lone surrogate becomes U+FFFD, and text over `max` characters is cut (ending in `…`).
 */
export function storableText(s: string, max = Number.POSITIVE_INFINITY): string {
  let out = s.replace(/\u0000/g, '\\u0000').replace(LONE_SURROGATES, '\uFFFD');
  if (out.length > max) out = out.slice(0, max - 1).replace(/[\uD800-\uDBFF]$/, '') + '…';
  return out;
}

/**
 * A row error whose every string can be stored (see {@link storableText}; each cut to
 * {@link IMPORT_ERROR_TEXT_MAX} characters): a rejected record's address and the messages quoting its content
 * (a parser's, a driver's) may hold the very bytes that made it unstorable.
 */
export function storableRowError(e: ImportRowError): ImportRowError {
  const t = (s: string) => storableText(s, IMPORT_ERROR_TEXT_MAX);
  return {
    row: e.row,
    email: e.email === null ? null : t(e.email),
    errors: e.errors.map((f) => ({ field: t(f.field), message: t(f.message), code: f.code })),
  };
}

/**
 * The first reason a record cannot be stored at all, before its shape is checked: U+0000 or nesting deeper than
 * {@link MAX_JSON_DEPTH} ({@link findJsonProblem}), or a lone surrogate.
 */
export function findUnstorable(value: unknown): FieldError | undefined {
  return findJsonProblem(value, '', MAX_JSON_DEPTH);
}

/**
 * Validates and normalises one record (the `POST /contacts` body shape).
 *
 * @param row - the record's 1-based number in the file.
 * @returns the record, or a row error: first what Postgres could not store ({@link findUnstorable}), else the
 *   schema's field errors. Never throws for any JSON value (the walks are iterative).
 */
export function importRecord(row: number, value: unknown): ImportItem {
  const email =
    value && typeof value === 'object' && typeof (value as { email?: unknown }).email === 'string'
      ? (value as { email: string }).email
      : null;
  const unstorable = findUnstorable(value);
  if (unstorable) return { ok: false, error: { row, email, errors: [unstorable] } };
  const reservedKeys = findReservedKeys(value);
  if (reservedKeys.length > 0) return { ok: false, error: { row, email, errors: reservedKeys } };
  const checked = validateContact(value);
  if (!checked.ok) return { ok: false, error: { row, email, errors: checked.errors } };
  const v = checked.value;
  const { set, removed } = splitPatch(v.data);
  const normalized = normalizeEmail(v.email);
  return {
    ok: true,
    record: { row, email: normalized, emailKey: emailKey(normalized), subscribed: v.subscribed, set, removed },
  };
}

function csvRecord(row: number, cells: string[], cols: CsvColumns): ImportItem {
  const email = cells[cols.email] ?? '';
  if (cells.length > cols.count) {
    return {
      ok: false,
      error: {
        row,
        email: email || null,
        errors: [
          { field: '(row)', message: `has ${cells.length} fields, the header has ${cols.count}`, code: 'custom' },
        ],
      },
    };
  }
  const value: { email: string; subscribed?: boolean; data: Record<string, string> } = { email, data: {} };
  const badFlag = (field: string): ImportItem => ({
    ok: false,
    error: {
      row,
      email: email || null,
      errors: [{ field, message: 'must be true/false, yes/no or 1/0 (or empty)', code: 'invalid_type' }],
    },
  });
  if (cols.subscribed !== undefined) {
    const flag = csvFlag(cells[cols.subscribed]);
    if (flag === 'bad') return badFlag('subscribed');
    value.subscribed = flag;
  }
  let topics: Record<string, boolean> | undefined;
  for (const [i, name, column] of cols.topics) {
    const flag = csvFlag(cells[i]);
    if (flag === 'bad') return badFlag(column);
    if (flag !== undefined) (topics ??= {})[name] = flag;
  }
  for (const [i, key] of cols.data) {
    const cell = cells[i];
    if (cell !== undefined && cell !== '') value.data[key] = cell;
  }
  const item = importRecord(row, value);
  if (item.ok && topics) item.record.topics = topics;
  return item;
}

/** A CSV yes/no cell: `undefined` when empty, `'bad'` when it is neither. */
function csvFlag(cell: string | undefined): boolean | undefined | 'bad' {
  const raw = (cell ?? '').toLowerCase();
  if (TRUE.has(raw)) return true;
  if (FALSE.has(raw)) return false;
  return raw === '' ? undefined : 'bad';
}

/** A source of the file's bytes, in order. */
export type ByteSource = AsyncIterable<Buffer>;

/**
 * Parses an import file as a stream of records and row errors, in file order. Malformed CSV records (bad
 * quoting, a record over 1 MiB) and invalid records are row errors, never fatal.
 *
 * @throws {@link ImportFileError} when the file cannot be read on: a CSV header without `email`, or JSON that is
 *   not a well-formed array (JSON cannot resynchronise after a syntax error). Records yielded before stay valid.
 *   Errors of `source` propagate as they are.
 */
export async function* parseImportFile(format: ImportFormat, source: ByteSource): AsyncGenerator<ImportItem> {
  if (format === 'csv') yield* parseCsvFile(source);
  else if (format === 'ndjson') yield* parseNdjson(source);
  else yield* parseJsonArray(source);
}

async function* parseCsvFile(source: ByteSource): AsyncGenerator<ImportItem> {
  // csv-parse reports skipped (malformed) records through `on_skip` and good ones through `on_record`, both
  // synchronously and in file order; one sequence number over both keeps the row numbers in file order.
  let seq = 0;
  const skipped: { seq: number; err: CsvError }[] = [];
  const options: CsvOptions<{ seq: number; cells: string[] }, string[]> = {
    bom: true,
    trim: true,
    skip_empty_lines: true,
    relax_column_count: true,
    skip_records_with_error: true,
    max_record_size: IMPORT_MAX_RECORD_BYTES,
    on_skip: (err: CsvError | undefined) => {
      if (err) skipped.push({ seq: seq++, err });
      return undefined;
    },
    on_record: (cells: string[]) => ({ seq: seq++, cells }),
  };
  const parser = parseCsv(options as unknown as CsvOptions);
  const input = Readable.from(source, { highWaterMark: 1 });
  input.on('error', (err) => parser.destroy(err));
  input.pipe(parser);
  let cols: CsvColumns | undefined;
  const skipItem = (s: { seq: number; err: CsvError }): ImportItem => ({
    ok: false,
    error: {
      row: s.seq,
      email: null,
      errors: [{ field: '(row)', message: `malformed CSV: ${s.err.message}`, code: 'custom' }],
    },
  });
  for await (const rec of parser as AsyncIterable<{ seq: number; cells: string[] }>) {
    while (skipped.length && skipped[0].seq < rec.seq) yield skipItem(skipped.shift()!);
    if (!cols) {
      const c = csvColumns(rec.cells);
      if (!c.ok) throw new ImportFileError(c.error.message);
      cols = c.columns;
      continue;
    }
    yield csvRecord(rec.seq, rec.cells, cols);
  }
  for (const s of skipped.splice(0)) yield skipItem(s);
}

async function* parseNdjson(source: ByteSource): AsyncGenerator<ImportItem> {
  const lines = createInterface({ input: Readable.from(source, { highWaterMark: 1 }), crlfDelay: Infinity });
  let row = 0;
  for await (const line of lines) {
    if (line.trim() === '') continue;
    row++;
    if (Buffer.byteLength(line) > IMPORT_MAX_RECORD_BYTES) {
      yield {
        ok: false,
        error: {
          row,
          email: null,
          errors: [{ field: '(row)', message: 'line is longer than 1 MiB', code: 'too_big' }],
        },
      };
      continue;
    }
    let value: unknown;
    try {
      value = JSON.parse(line.replace(/^\uFEFF/, ''));
    } catch (err) {
      yield {
        ok: false,
        error: {
          row,
          email: null,
          errors: [{ field: '(row)', message: `invalid JSON: ${errorMessage(err)}`, code: 'invalid_type' }],
        },
      };
      continue;
    }
    yield importRecord(row, value);
  }
}

async function* parseJsonArray(source: ByteSource): AsyncGenerator<ImportItem> {
  // stream-json 1.x (CommonJS): a SAX-style tokenizer plus a streamer that assembles one array element at a time.
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- CommonJS, loaded when a JSON file is parsed
  const { parser } = require('stream-json') as typeof import('stream-json');
  const { streamArray } =
    // eslint-disable-next-line @typescript-eslint/no-require-imports -- as above
    require('stream-json/streamers/StreamArray') as typeof import('stream-json/streamers/StreamArray');
  const input = Readable.from(source, { highWaterMark: 1 });
  const tokens = parser();
  // stream-json assigns keys: a `__proto__` key would set the element's prototype, or vanish; marked, it is reported.
  // (StreamBase hands its options to its Assembler, whose `reviver` the streamer's typings leave out.)
  const options: Parameters<typeof streamArray>[0] & { reviver: typeof markProtoKey } = { reviver: markProtoKey };
  const elements = streamArray(options);
  let sourceError: Error | undefined;
  let syntaxError: Error | undefined;
  input.on('error', (err) => {
    sourceError = err;
    tokens.destroy(err);
  });
  // On a syntax error, end the element stream gracefully so the elements parsed before it still come out.
  tokens.on('error', (err) => {
    syntaxError ??= err;
    input.unpipe(tokens);
    tokens.unpipe(elements);
    elements.end();
  });
  input.pipe(tokens).pipe(elements);
  try {
    for await (const { key, value } of elements as AsyncIterable<{ key: number; value: unknown }>) {
      yield importRecord(key + 1, value);
    }
  } catch (err) {
    if (sourceError) throw sourceError;
    throw new ImportFileError(`invalid JSON: ${errorMessage(err)}`);
  }
  if (sourceError) throw sourceError;
  if (syntaxError) throw new ImportFileError(`invalid JSON: ${syntaxError.message}`);
}
