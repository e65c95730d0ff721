/**
 * Import record rules without a database: what Postgres could not store is a row error naming the field, and
 * what is kept about a rejected row is itself storable.
 */
import {
  csvColumns,
  importRecord,
  parseImportFile,
  readImportHead,
  storableRowError,
  storableText,
  IMPORT_ERROR_TEXT_MAX,
  type ImportItem,
} from './imports';
import { findJsonProblem } from '@mailroom/platform/json-guard';

async function collect(format: 'csv' | 'ndjson' | 'json', text: string | Buffer): Promise<ImportItem[]> {
  const items: ImportItem[] = [];
  async function* source() {
    yield Buffer.from(text);
  }
  for await (const item of parseImportFile(format, source())) items.push(item);
  return items;
}

const rowErrorFields = (items: ImportItem[]) =>
  items.flatMap((i) => (i.ok ? [] : [[i.error.row, i.error.errors.map((e) => e.field)] as const]));

describe('importRecord refuses what Postgres could not store, naming the field', () => {
  test.each([
    ['NUL in a data value', { email: 'a@x.test', data: { note: 'a\u0000b' } }, 'data.note', 'invalid_string'],
    ['NUL in a data key', { email: 'a@x.test', data: { ['k\u0000']: 1 } }, 'data.k\\u0000', 'invalid_string'],
    ['NUL in the email', { email: 'a\u0000@x.test' }, 'email', 'invalid_string'],
    ['a lone high surrogate', { email: 'a@x.test', data: { s: 'x\ud800' } }, 'data.s', 'invalid_string'],
    [
      'a lone low surrogate in an array',
      { email: 'a@x.test', data: { l: ['ok', '\udc00'] } },
      'data.l.1',
      'invalid_string',
    ],
    ['a lone surrogate in a key', { email: 'a@x.test', data: { ['k\ud800']: 1 } }, 'data.k\ufffd', 'invalid_string'],
    ['an over-long email', { email: `${'l'.repeat(330)}@x.test` }, 'email', undefined],
  ])('%s', (_label, value, field, code) => {
    const item = importRecord(7, value);
    expect(item.ok).toBe(false);
    if (item.ok) return;
    expect(item.error.row).toBe(7);
    expect(item.error.errors[0].field).toBe(field);
    if (code) expect(item.error.errors[0].code).toBe(code);
  });

  test('a value nested 100,000 deep is one row error (no stack overflow); 31 levels inside data are accepted', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    const refused = importRecord(1, { email: 'a@x.test', data: { x: deep } });
    expect(refused).toMatchObject({
      ok: false,
      error: { errors: [{ code: 'too_big', message: expect.stringContaining('nested too deeply') }] },
    });
    let ok: unknown = 1;
    for (let i = 0; i < 30; i++) ok = [ok];
    expect(importRecord(1, { email: 'a@x.test', data: { x: ok } }).ok).toBe(true);
  });

  test('a valid surrogate pair (an emoji) is accepted', () => {
    expect(findJsonProblem({ s: 'ok 😀', '😀': 'key' })).toBeUndefined();
    expect(importRecord(1, { email: 'a@x.test', data: { s: '😀' } }).ok).toBe(true);
  });
});

describe('storable row errors', () => {
  test('storableText shows NUL as \\u0000, replaces lone surrogates and cuts long text', () => {
    expect(storableText('a\u0000b')).toBe('a\\u0000b');
    expect(storableText('x\ud800y')).toBe('x\ufffdy');
    expect(storableText('😀')).toBe('😀');
    const cut = storableText('z'.repeat(1000), 10);
    expect(cut).toHaveLength(10);
    expect(cut.endsWith('…')).toBe(true);
  });

  test('storableRowError leaves nothing Postgres refuses in email, field or message', () => {
    const safe = storableRowError({
      row: 3,
      email: 'a\u0000@x.test' + 'x'.repeat(2000),
      errors: [{ field: 'data.k\u0000', message: `Unexpected token '\u0000' \ud800`, code: 'custom' }],
    });
    expect(findJsonProblem(safe)).toBeUndefined();
    expect(safe.email!.length).toBe(IMPORT_ERROR_TEXT_MAX);
    expect(safe.errors[0]).toEqual({
      field: 'data.k\\u0000',
      message: "Unexpected token '\\u0000' \ufffd",
      code: 'custom',
    });
  });
});

describe('parseImportFile', () => {
  test('CSV: a raw 0x00 byte in a cell is a row error; the rows around it are records', async () => {
    const items = await collect('csv', Buffer.from('email,name\na@x.test,A\nb@x.test,B\u0000\nc@x.test,C\n'));
    expect(items.map((i) => i.ok)).toEqual([true, false, true]);
    expect(rowErrorFields(items)).toEqual([[2, ['data.name']]]);
  });

  test('CSV: a header with a NUL byte is refused (field file)', () => {
    expect(csvColumns(['email', 'na\u0000me'])).toMatchObject({
      ok: false,
      error: { field: 'file', code: 'invalid_string' },
    });
  });

  test('JSON array: a NUL key, a lone surrogate escape and 5,000-deep data are row errors between records', async () => {
    const deep = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    const text = `[{"email":"a@x.test"},{"email":"b@x.test","data":{"k\\u0000":1}},{"email":"c@x.test","data":{"s":"\\ud800"}},{"email":"d@x.test","data":{"x":${deep}}},{"email":"e@x.test"}]`;
    const items = await collect('json', text);
    expect(items.map((i) => i.ok)).toEqual([true, false, false, false, true]);
    expect(rowErrorFields(items).map(([row, fields]) => [row, fields[0].split('.').slice(0, 2).join('.')])).toEqual([
      [2, 'data.k\\u0000'],
      [3, 'data.s'],
      [4, 'data.x'],
    ]);
  });
});

describe('topic columns (topic:<name>)', () => {
  test('CSV: topic cells become choices by lower-cased name; empty is no choice; a bad value names the column', async () => {
    const items = await collect(
      'csv',
      'email,Topic:Product News,topic: newsletter,plan\na@x.test,yes,0,pro\nb@x.test,,,\nc@x.test,maybe,1,\n',
    );
    expect(items[0]).toMatchObject({
      ok: true,
      record: { set: { plan: 'pro' }, topics: { 'product news': true, newsletter: false } },
    });
    expect(items[1]).toMatchObject({ ok: true, record: { set: {} } });
    expect(items[1].ok && items[1].record.topics).toBeUndefined();
    expect(rowErrorFields(items)).toEqual([[3, ['Topic:Product News']]]);
  });

  test('the head names the topic columns; a nameless or repeated topic column is refused (field file)', () => {
    expect(readImportHead('csv', Buffer.from('email,TOPIC:Deals,x\n'), true)).toEqual({
      ok: true,
      topics: [{ name: 'deals', column: 'TOPIC:Deals' }],
    });
    expect(readImportHead('ndjson', Buffer.from('{"email":"a@x.test"}\n'), true)).toEqual({ ok: true, topics: [] });
    expect(csvColumns(['email', 'topic:'])).toMatchObject({
      ok: false,
      error: { field: 'file', message: expect.stringContaining('names no topic') },
    });
    expect(csvColumns(['email', 'topic:Deals', 'topic: deals'])).toMatchObject({
      ok: false,
      error: { field: 'file', message: expect.stringContaining('"deals" twice') },
    });
  });
});
