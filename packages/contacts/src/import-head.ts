/**
 * What is read of an import before its records: the format of an upload, the CSV header's columns (`email`,
 * `subscribed`, `topic:<name>`, data keys) and the check of a file's first bytes that the API makes before storing
 * it (`storeImport`). Re-exported by `./imports`.
 *
 * @module
 */
import type { ImportFormat } from '@mailroom/db/schema/import-format';
import { parse as parseCsvSync } from 'csv-parse/sync';
import type { FieldError } from '@mailroom/platform/errors';
import { hasNul } from '@mailroom/platform/json-guard';
import { RESERVED_KEYS } from '@mailroom/platform/reserved-keys';
import { errorMessage } from '@mailroom/platform/errors';

/**
 * The format of an upload from its media type, then its file name.
 *
 * @returns `undefined` when neither says (the caller asks for `format`).
 */
export function importFormatOf(mediaType: string | undefined, filename?: string | null): ImportFormat | undefined {
  const type = (mediaType ?? '').split(';')[0].trim().toLowerCase();
  if (type === 'text/csv' || type === 'application/csv') return 'csv';
  if (
    [
      'application/x-ndjson',
      'application/ndjson',
      'application/jsonl',
      'application/x-jsonlines',
      'application/jsonlines',
    ].includes(type)
  ) {
    return 'ndjson';
  }
  if (type === 'application/json') return 'json';
  const ext = (filename ?? '').toLowerCase().split('.').pop();
  if (ext === 'csv') return 'csv';
  if (ext === 'ndjson' || ext === 'jsonl') return 'ndjson';
  if (ext === 'json') return 'json';
  return undefined;
}

/** The prefix of a topic column (`topic:<name>`), matched case-insensitively. */
export const TOPIC_COLUMN_PREFIX = 'topic:';

/** The columns of a CSV header: where `email` and `subscribed` are, and the `data` key of every other column. */
export interface CsvColumns {
  email: number;
  subscribed: number | undefined;
  /** `[index, lower-cased topic name, column header]` of the `topic:<name>` columns. */
  topics: [number, string, string][];
  /** `[index, key]` of the data columns. */
  data: [number, string][];
  count: number;
}

/**
 * Reads a CSV header row.
 *
 * @returns the columns, or the problem (field `file`): no `email` column, a column named twice, or a column named
 *   as a reserved data key (`__proto__`, `constructor`, `prototype`: `@mailroom/platform/reserved-keys`).
 */
export function csvColumns(header: string[]): { ok: true; columns: CsvColumns } | { ok: false; error: FieldError } {
  const names = header.map((h) => h.trim());
  const nul = names.findIndex(hasNul);
  if (nul >= 0) {
    return {
      ok: false,
      error: {
        field: 'file',
        message: `the CSV header's column ${nul + 1} contains the NUL character (\\u0000)`,
        code: 'invalid_string',
      },
    };
  }
  const seen = new Map<string, number>();
  for (const name of names) {
    if (!name) continue;
    const k = name.toLowerCase();
    if (seen.has(k))
      return {
        ok: false,
        error: { field: 'file', message: `the CSV header names the column "${name}" twice`, code: 'custom' },
      };
    seen.set(k, 1);
  }
  const email = names.findIndex((n) => n.toLowerCase() === 'email');
  if (email < 0) {
    const found = names.filter(Boolean).slice(0, 20).join(', ') || '(none)';
    return {
      ok: false,
      error: { field: 'file', message: `the CSV header has no "email" column (found: ${found})`, code: 'custom' },
    };
  }
  const sub = names.findIndex((n) => n.toLowerCase() === 'subscribed');
  const reservedAt = names.findIndex((n) => RESERVED_KEYS.has(n));
  if (reservedAt >= 0) {
    const name = names[reservedAt];
    return {
      ok: false,
      error: {
        field: 'file',
        message: `the CSV header's column ${reservedAt + 1} is named "${name}", a reserved data key (__proto__, constructor, prototype)`,
        code: 'unrecognized_keys',
      },
    };
  }
  const data: [number, string][] = [];
  const topics: [number, string, string][] = [];
  const topicSeen = new Set<string>();
  for (let i = 0; i < names.length; i++) {
    const n = names[i];
    if (!n || i === email || i === sub) continue;
    if (n.toLowerCase().startsWith(TOPIC_COLUMN_PREFIX)) {
      const topic = n.slice(TOPIC_COLUMN_PREFIX.length).trim().toLowerCase();
      if (!topic)
        return {
          ok: false,
          error: {
            field: 'file',
            message: `the CSV header's column ${i + 1} ("${n}") names no topic (write topic:<topic name>)`,
            code: 'custom',
          },
        };
      if (topicSeen.has(topic))
        return {
          ok: false,
          error: { field: 'file', message: `the CSV header names the topic "${topic}" twice`, code: 'custom' },
        };
      topicSeen.add(topic);
      topics.push([i, topic, n]);
    } else data.push([i, n]);
  }
  return { ok: true, columns: { email, subscribed: sub < 0 ? undefined : sub, topics, data, count: names.length } };
}

/**
 * Checks the start of an upload before anything is stored, so a wrong file is refused at once (422) instead of
 * failing later in the worker.
 *
 * @param head - the first bytes of the file (up to 64 KiB, or all of it when shorter).
 * @param complete - whether `head` is the whole file.
 * @returns `undefined` when the file may be imported, else the problem on field `file`.
 */
export function checkImportHead(format: ImportFormat, head: Buffer, complete: boolean): FieldError | undefined {
  const read = readImportHead(format, head, complete);
  return read.ok ? undefined : read.error;
}

/**
 * {@link checkImportHead}, also answering the topic columns of a CSV header (`topic:<name>`), which the upload
 * checks against the project's topics.
 *
 * @returns the topic columns (`name` lower-cased, `column` as written; none for NDJSON/JSON), or the problem.
 */
export function readImportHead(
  format: ImportFormat,
  head: Buffer,
  complete: boolean,
): { ok: true; topics: { name: string; column: string }[] } | { ok: false; error: FieldError } {
  const problem = checkHeadShape(format, head, complete);
  if (problem && 'field' in problem) return { ok: false, error: problem };
  return { ok: true, topics: problem ? problem.topics.map(([, name, column]) => ({ name, column })) : [] };
}

function checkHeadShape(format: ImportFormat, head: Buffer, complete: boolean): FieldError | CsvColumns | undefined {
  const text = head.toString('utf8').replace(/^\uFEFF/, '');
  if (text.trim().length === 0) {
    return {
      field: 'file',
      message: complete ? 'is empty' : 'starts with 64 KiB of blank space',
      code: complete ? 'too_small' : 'custom',
    };
  }
  if (format === 'json') {
    return text.trimStart().startsWith('[')
      ? undefined
      : { field: 'file', message: 'must be a JSON array of contacts', code: 'invalid_type' };
  }
  const firstLine = text.trimStart().split(/\r?\n/)[0];
  const lineComplete = complete || /\r?\n/.test(text.trimStart());
  if (format === 'ndjson') {
    if (!lineComplete) return undefined;
    try {
      const v: unknown = JSON.parse(firstLine);
      if (v && typeof v === 'object' && !Array.isArray(v)) return undefined;
    } catch {
      // reported below
    }
    return {
      field: 'file',
      message: 'line 1 is not a JSON object (NDJSON: one contact object per line)',
      code: 'invalid_type',
    };
  }
  if (!lineComplete) return { field: 'file', message: 'the CSV header row is longer than 64 KiB', code: 'too_big' };
  let header: string[];
  try {
    header = parseCsvSync(firstLine, { bom: true, relax_column_count: true })[0] ?? [];
  } catch (err) {
    return { field: 'file', message: `the CSV header row is malformed: ${errorMessage(err)}`, code: 'custom' };
  }
  const cols = csvColumns(header);
  return cols.ok ? cols.columns : cols.error;
}
