/**
 * Reserved data keys in import files (no database): a `__proto__`, `constructor` or `prototype` key anywhere in
 * an NDJSON or JSON-array record is a row error naming it, even where the JSON-array parser (stream-json, which
 * assigns keys) would have turned `__proto__` into a prototype or lost it; a CSV column so named refuses the
 * header. The other records of the file are imported as usual.
 */
import { csvColumns, parseImportFile, type ImportItem } from './imports';

async function collect(format: 'csv' | 'ndjson' | 'json', text: string): Promise<ImportItem[]> {
  const items: ImportItem[] = [];
  async function* source() {
    yield Buffer.from(text);
  }
  for await (const item of parseImportFile(format, source())) items.push(item);
  return items;
}

const summary = (items: ImportItem[]) =>
  items.map((i) =>
    i.ok ? ['ok', i.record.row, i.record.set] : ['error', i.error.row, i.error.errors.map((e) => e.field)],
  );

const records = [
  '{"email":"a@x.test","data":{"plan":"pro"}}',
  '{"email":"b@x.test","data":{"__proto__":"a string","plan":"pro"}}',
  '{"email":"c@x.test","data":{"__proto__":{"isAdmin":true}}}',
  '{"email":"d@x.test","data":{"n":{"constructor":1},"prototype":2}}',
  '{"email":"e@x.test","__proto__":{"data":{"x":1}}}',
  '{"email":"f@x.test","data":{"note":"__proto__","Constructor":1}}',
];
const expected = [
  ['ok', 1, { plan: 'pro' }],
  ['error', 2, ['data.__proto__']],
  ['error', 3, ['data.__proto__']],
  ['error', 4, ['data.n.constructor', 'data.prototype']],
  ['error', 5, ['__proto__']],
  ['ok', 6, { note: '__proto__', Constructor: 1 }],
];

test('NDJSON: reserved keys are row errors naming them; other rows pass', async () => {
  expect(summary(await collect('ndjson', records.join('\n')))).toEqual(expected);
});

test('JSON array: the same, though the streaming parser assigns keys (a __proto__ key with a string or object value)', async () => {
  expect(summary(await collect('json', `[${records.join(',\n')}]`))).toEqual(expected);
  expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
});

test('CSV: a column named __proto__, constructor or prototype refuses the header, naming it', () => {
  for (const key of ['__proto__', 'constructor', 'prototype']) {
    const cols = csvColumns(['email', 'plan', key]);
    expect(cols.ok).toBe(false);
    if (!cols.ok)
      expect(cols.error).toMatchObject({
        field: 'file',
        code: 'unrecognized_keys',
        message: expect.stringContaining(`column 3 is named "${key}"`),
      });
  }
  expect(csvColumns(['email', 'Constructor', 'proto']).ok).toBe(true);
});
