/**
 * Bulk contact import end to end: upload (multipart or raw body) → Postgres chunks → `contact-import` job →
 * worker → contacts; progress, counts and row errors; bad input; resuming after a crash; tenant isolation.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import type { Job } from 'bullmq';
import { createImportQueue } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { findJsonProblem } from '@mailroom/platform/json-guard';
import { loadConfig } from '@mailroom/config/config';
import { type ImportRecord } from '@mailroom/contacts/imports';
import { createImport, getImportErrors, markImportQueued, startImport } from '@mailroom/contacts/queries/imports';
import { commitImportBatch, isRowDataError } from '@mailroom/contacts/queries/import-batch';
import { contactImports } from '@mailroom/db/schema/imports';
import { createDatabase } from '@mailroom/db/client';
import { createImportProcessor } from '../../apps/worker/src/processors/import';
import { createTestProject, startTestApi, testEnv, waitFor, type TestApi, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';

const MAX = 200_000;
const e2e = useE2e({ env: { IMPORT_MAX_BYTES: String(MAX), IMPORT_BATCH_SIZE: '40' }, project: true });

const upload = (project: TestProject, content: string | Buffer, filename = 'contacts.csv', query = '') =>
  request(e2e.api.app)
    .post(`/contacts/import${query}`)
    .set('Authorization', project.auth)
    .attach('file', Buffer.from(content), filename);
const raw = (project: TestProject, content: string, type: string, query = '') =>
  request(e2e.api.app)
    .post(`/contacts/import${query}`)
    .set('Authorization', project.auth)
    .set('Content-Type', type)
    .send(content);
const getImport = (project: TestProject, id: string) =>
  request(e2e.api.app).get(`/contacts/import/${id}`).set('Authorization', project.auth);

async function finished(project: TestProject, id: string) {
  return waitFor(
    async () => {
      const res = await getImport(project, id);
      return ['completed', 'failed'].includes(res.body.data.status) ? res.body.data : undefined;
    },
    30_000,
    `import ${id}`,
  );
}

async function contactsOf(
  project: TestProject,
): Promise<Map<string, { subscribed: boolean; data: Record<string, unknown> }>> {
  const rows = await e2e.api.database.db.execute<{ email: string; subscribed: boolean; data: Record<string, unknown> }>(
    sql`select email, subscribed, data from contacts where project_id = ${project.id}::uuid`,
  );
  return new Map(rows.rows.map((r) => [r.email, { subscribed: r.subscribed, data: r.data }]));
}

describe('happy path', () => {
  test('a CSV upload: created, updated, skipped and failed counts; row errors; subscription rules', async () => {
    const q = await createTestProject(e2e.api.database);
    // Existing contacts: one unsubscribed (must stay so), one unsubscribed that the file re-subscribes, one unchanged.
    const post = (body: object) => request(e2e.api.app).post('/contacts').set('Authorization', q.auth).send(body);
    await post({ email: 'stay@x.test', subscribed: false, data: { first_name: 'Old' } });
    await post({ email: 'back@x.test', subscribed: false });
    await post({ email: 'same@x.test', subscribed: true, data: { First_Name: 'Sam' } });
    const lines = ['Email,First_Name,subscribed,'];
    for (let i = 0; i < 100; i++) lines.push(`u${i}@x.test,User ${i},,`);
    lines.push('not-an-email,Bad,,');
    lines.push('stay@x.test,New,,');
    lines.push('back@x.test,,yes,');
    lines.push('same@x.test,Sam,true,');
    lines.push('u1@x.test,Again,,');
    lines.push('u2@x.test,"Quoted, name",maybe,');
    const res = await upload(q, lines.join('\r\n') + '\r\n');
    expect(res.status).toBe(202);
    expect(res.body.data).toMatchObject({
      id: expect.any(String),
      status: 'queued',
      format: 'csv',
      filename: 'contacts.csv',
      defaultSubscribed: true,
    });
    const done = await finished(q, res.body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts).toEqual({ created: 100, updated: 3, skipped: 1, failed: 2 });
    expect(done.progress).toMatchObject({ rowsProcessed: 106, percent: 100 });
    expect(done.progress.bytesProcessed).toBe(done.progress.bytesTotal);
    expect(done.errors).toEqual([
      {
        row: 101,
        email: 'not-an-email',
        errors: [expect.objectContaining({ field: 'email', code: 'invalid_string' })],
      },
      { row: 106, email: 'u2@x.test', errors: [expect.objectContaining({ field: 'subscribed' })] },
    ]);
    const all = await contactsOf(q);
    expect(all.size).toBe(103);
    expect(all.get('u0@x.test')).toEqual({ subscribed: true, data: { First_Name: 'User 0' } });
    expect(all.get('u1@x.test')?.data).toEqual({ First_Name: 'Again' });
    expect(all.get('stay@x.test')).toEqual({ subscribed: false, data: { first_name: 'Old', First_Name: 'New' } });
    expect(all.get('back@x.test')?.subscribed).toBe(true);
    const list = await request(e2e.api.app).get('/contacts').set('Authorization', q.auth);
    expect(list.body.data.total).toBe(103);

    // The same file again changes nothing, except u1, which its two rows set in turn.
    const again = await finished(q, (await upload(q, lines.join('\n'))).body.data.id);
    expect(again.counts).toEqual({ created: 0, updated: 2, skipped: 102, failed: 2 });
  });

  test('raw bodies: NDJSON and a JSON array, with data merge and null removal; ?subscribed=false', async () => {
    const q = await createTestProject(e2e.api.database);
    const nd = [
      '{"email":"a@x.test","data":{"plan":"pro","tmp":1}}',
      '',
      '{"email":"b@x.test","subscribed":true}',
      'not json',
      '{"email":"c@x.test","extra":1}',
    ].join('\n');
    const r1 = await raw(q, nd, 'application/x-ndjson', '?subscribed=false');
    expect(r1.status).toBe(202);
    const d1 = await finished(q, r1.body.data.id);
    expect(d1.counts).toEqual({ created: 2, updated: 0, skipped: 0, failed: 2 });
    expect(d1.errors.map((e: { row: number }) => e.row)).toEqual([3, 4]);
    const json = JSON.stringify([{ email: 'A@x.test', data: { tmp: null, seats: 3 } }, { email: 'd@x.test' }]);
    const r2 = await raw(q, json, 'application/json');
    const d2 = await finished(q, r2.body.data.id);
    expect(d2.counts).toEqual({ created: 1, updated: 1, skipped: 0, failed: 0 });
    const all = await contactsOf(q);
    expect(all.get('a@x.test')).toEqual({ subscribed: false, data: { plan: 'pro', seats: 3 } });
    expect(all.get('b@x.test')?.subscribed).toBe(true);
    expect(all.get('d@x.test')?.subscribed).toBe(true);
  });

  test('a malformed CSV row is reported and the good rows around it are imported', async () => {
    const q = await createTestProject(e2e.api.database);
    const csv = 'email,name\ngood1@x.test,One\n"broken@x.test,"Two"x\ngood2@x.test,Three\n';
    const done = await finished(q, (await raw(q, csv, 'text/csv')).body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts.created).toBeGreaterThanOrEqual(1);
    expect(done.counts.failed).toBeGreaterThanOrEqual(1);
    expect(done.errors[0]).toMatchObject({
      row: 2,
      errors: [expect.objectContaining({ message: expect.stringContaining('malformed CSV') })],
    });
    expect((await contactsOf(q)).has('good1@x.test')).toBe(true);
  });

  test('a JSON array broken mid-file fails the import with the reason; records before it stay', async () => {
    const q = await createTestProject(e2e.api.database);
    const done = await finished(
      q,
      (await raw(q, '[{"email":"ok@x.test"}, {"email": "x@x.test" oops', 'application/json')).body.data.id,
    );
    expect(done.status).toBe('failed');
    expect(done.error).toMatch(/invalid JSON/);
    expect((await contactsOf(q)).has('ok@x.test')).toBe(true);
  });
});

describe('a bad row is a row error, never fatal', () => {
  /** The BullMQ job of an import: it must have run once, with no failed attempt before it. */
  async function jobOf(id: string) {
    const queue = createImportQueue(e2e.config, e2e.api.redis);
    try {
      return (await queue.getJob(id))!;
    } finally {
      await queue.close();
    }
  }
  const deep = (levels: number) => '{"a":'.repeat(levels) + '1' + '}'.repeat(levels);
  type RowError = { row: number; email: string | null; errors: { field: string; message: string; code: string }[] };
  const fieldsByRow = (errors: RowError[]) =>
    Object.fromEntries(errors.map((e) => [e.row, [...new Set(e.errors.map((f) => f.field))]]));

  test('JSON array: NUL in a value, NUL in a data key, 5,000-deep data, a lone surrogate, a bad email; the rows around them are imported', async () => {
    const q = await createTestProject(e2e.api.database);
    // Raw JSON text: JSON.stringify would not keep "\ud800" a lone surrogate escape, and a 5,000-deep value is built by hand.
    const rows = [
      '{"email":"g1@x.test","data":{"plan":"pro"}}',
      '{"email":"nul-value@x.test","data":{"note":"a\\u0000b"}}',
      '{"email":"g2@x.test"}',
      '{"email":"nul-key@x.test","data":{"k\\u0000":1}}',
      `{"email":"deep@x.test","data":{"x":${deep(5000)}}}`,
      '{"email":"g3@x.test","data":{"ok":{"nested":[1,2,{"three":3}]}}}',
      '{"email":"lone@x.test","data":{"s":"\\ud800"}}',
      `{"email":"${'l'.repeat(330)}@x.test"}`,
      '{"email":"nul\\u0000mail@x.test"}',
      '{"email":"unknown-key@x.test","x\\u0000y":1}',
      '{"email":"g4@x.test"}',
    ];
    const res = await raw(q, `[${rows.join(',\n')}]`, 'application/json');
    expect(res.status).toBe(202);
    const done = await finished(q, res.body.data.id);
    expect(done.status).toBe('completed');
    expect(done.error).toBeNull();
    expect(done.counts).toEqual({ created: 4, updated: 0, skipped: 0, failed: 7 });
    expect(fieldsByRow(done.errors)).toEqual({
      2: ['data.note'],
      4: ['data.k\\u0000'],
      5: [expect.stringMatching(/^data\.x(\.a)+$/)],
      7: ['data.s'],
      8: ['email'],
      9: ['email'],
      10: ['x\\u0000y'],
    });
    expect(done.errors[0].errors[0]).toMatchObject({ message: expect.stringContaining('NUL'), code: 'invalid_string' });
    expect(done.errors[2].errors[0]).toMatchObject({
      message: expect.stringContaining('nested too deeply'),
      code: 'too_big',
    });
    expect(done.errors[3].errors[0]).toMatchObject({
      message: expect.stringContaining('surrogate'),
      code: 'invalid_string',
    });
    // What is stored about a bad row is itself storable: NUL shown as the text \u0000.
    expect(done.errors[5].email).toBe('nul\\u0000mail@x.test');
    expect(findJsonProblem(done.errors, 'errors', 1000)).toBeUndefined();
    const all = await contactsOf(q);
    expect([...all.keys()].sort()).toEqual(['g1@x.test', 'g2@x.test', 'g3@x.test', 'g4@x.test']);
    expect(all.get('g3@x.test')?.data).toEqual({ ok: { nested: [1, 2, { three: 3 }] } });
    const job = await jobOf(res.body.data.id);
    expect(job.returnvalue).toMatchObject({ outcome: 'completed', failed: 7 });
    expect(job.stacktrace).toEqual([]);
    expect(job.attemptsMade).toBeLessThanOrEqual(1);
  });

  test('NDJSON: NUL, 5,000- and 50,000-deep rows and a line of raw 0x00 bytes are row errors between good lines', async () => {
    const q = await createTestProject(e2e.api.database);
    const lines = [
      '{"email":"n1@x.test"}',
      '{"email":"n-nul@x.test","data":{"v":"\\u0000"}}',
      `{"email":"n-deep@x.test","data":{"x":${deep(5000)}}}`,
      `{"email":"n-deeper@x.test","data":{"x":${'['.repeat(50_000)}${']'.repeat(50_000)}}}`,
      // JSON.parse quotes the NUL bytes in its message: the stored row error must not hold them.
      '\u0000\u0000{}',
      '{"email":"n2@x.test"}',
    ];
    const res = await raw(q, lines.join('\n'), 'application/x-ndjson');
    const done = await finished(q, res.body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts).toEqual({ created: 2, updated: 0, skipped: 0, failed: 4 });
    expect(fieldsByRow(done.errors)).toEqual({
      2: ['data.v'],
      3: [expect.stringMatching(/^data\.x(\.a)+$/)],
      4: [expect.stringMatching(/^data\.x(\.0)+$/)],
      5: ['(row)'],
    });
    expect(done.errors[3].errors[0]).toMatchObject({
      message: expect.stringContaining('invalid JSON'),
      code: 'invalid_type',
    });
    expect(findJsonProblem(done.errors, 'errors', 1000)).toBeUndefined();
    expect([...(await contactsOf(q)).keys()].sort()).toEqual(['n1@x.test', 'n2@x.test']);
    expect((await jobOf(res.body.data.id)).stacktrace).toEqual([]);
  });

  test('CSV: a raw 0x00 byte in a data cell and in an email cell are row errors; good rows in the same batch are imported', async () => {
    const q = await createTestProject(e2e.api.database);
    const lines = ['email,name,city'];
    for (let i = 0; i < 30; i++) lines.push(`c${i}@x.test,Name ${i},Paris`);
    lines.push('zero-name@x.test,Bad\u0000Name,Paris');
    lines.push('zero\u0000mail@x.test,Zero,Paris');
    lines.push('"quoted@x.test","in \u0000 quotes",Rome');
    for (let i = 30; i < 60; i++) lines.push(`c${i}@x.test,Name ${i},Paris`);
    const file = Buffer.from(lines.join('\n') + '\n', 'utf8');
    expect(file.includes(0)).toBe(true);
    const res = await upload(q, file, 'zero.csv');
    expect(res.status).toBe(202);
    const done = await finished(q, res.body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts).toEqual({ created: 60, updated: 0, skipped: 0, failed: 3 });
    expect(fieldsByRow(done.errors)).toEqual({ 31: ['data.name'], 32: ['email'], 33: ['data.name'] });
    expect(done.errors[0]).toMatchObject({
      email: 'zero-name@x.test',
      errors: [expect.objectContaining({ message: expect.stringContaining('NUL') })],
    });
    expect(done.errors[1].email).toBe('zero\\u0000mail@x.test');
    const all = await contactsOf(q);
    expect(all.size).toBe(60);
    expect(all.get('c59@x.test')?.data).toEqual({ name: 'Name 59', city: 'Paris' });
    expect((await jobOf(res.body.data.id)).stacktrace).toEqual([]);
  });
});

describe('a batch Postgres refuses for its data is split, never failed whole', () => {
  // Records built by hand, past the parser's guard, stand for anything the guard does not know yet.
  const rec = (row: number, email: string, set: Record<string, unknown> = {}): ImportRecord => ({
    row,
    email,
    emailKey: email.toLowerCase(),
    set,
    removed: [],
  });
  async function runningImport(projectId: string) {
    const { db } = e2e.api.database;
    const imp = await createImport(db, projectId, { format: 'json', filename: null, defaultSubscribed: true });
    await markImportQueued(db, imp.id, 0, 0);
    return (await startImport(db, imp.id))!;
  }

  test('only the refused rows become row errors (22P05, 22021, 22P02); the others are applied; messages are storable', async () => {
    const q = await createTestProject(e2e.api.database);
    const imp = await runningImport(q.id);
    const records = [
      rec(1, 'b1@x.test'),
      rec(2, 'b2@x.test', { ok: 1 }),
      rec(3, 'nul-json@x.test', { note: 'a\u0000b' }),
      rec(4, 'b4@x.test'),
      rec(6, 'b6@x.test'),
      rec(7, 'nul\u0000text@x.test'),
      rec(8, 'b8@x.test'),
      rec(9, 'lone@x.test', { s: '\ud800' }),
      rec(10, 'b10@x.test'),
    ];
    const parserError = {
      row: 5,
      email: null,
      errors: [{ field: '(row)', message: 'invalid JSON: \u0000 quoted', code: 'custom' as const }],
    };
    const counts = await commitImportBatch(e2e.api.database.db, imp, {
      records,
      errors: [parserError],
      fromRow: 0,
      toRow: 10,
      bytesProcessed: 0,
    });
    expect(counts).toEqual({ created: 6, updated: 0, skipped: 0, failed: 4 });
    const errors = await getImportErrors(e2e.api.database.db, q.id, imp.id);
    expect(errors.map((e) => [e.row, e.email, e.errors[0].field])).toEqual([
      [3, 'nul-json@x.test', 'data.note'],
      [5, null, '(row)'],
      [7, 'nul\\u0000text@x.test', 'email'],
      [9, 'lone@x.test', 'data.s'],
    ]);
    expect(errors[0].errors[0].message).toMatch(/could not be stored \(22P05\)/);
    expect(errors[1].errors[0].message).toBe('invalid JSON: \\u0000 quoted');
    expect(errors[2].errors[0].message).toMatch(/could not be stored \(22021\)/);
    expect(errors[3].errors[0].message).toMatch(/could not be stored \(22P02\)/);
    expect([...(await contactsOf(q)).keys()].sort()).toEqual([
      'b10@x.test',
      'b1@x.test',
      'b2@x.test',
      'b4@x.test',
      'b6@x.test',
      'b8@x.test',
    ]);
    const [row] = await e2e.api.database.db.select().from(contactImports).where(eq(contactImports.id, imp.id));
    expect(row).toMatchObject({ rowsProcessed: 10, created: 6, failed: 4 });
  });

  test('an error that is not about the data (lock timeout, lost connection) still fails the batch whole, for a retry', async () => {
    const q = await createTestProject(e2e.api.database);
    const imp = await runningImport(q.id);
    await request(e2e.api.app).post('/contacts').set('Authorization', q.auth).send({ email: 'locked@x.test' });
    const blocker = await e2e.api.database.pool.connect();
    const impatient = createDatabase({
      url: `${e2e.config.databaseUrl}?options=-c%20lock_timeout%3D300`,
      poolSize: 1,
      applicationName: 'impatient',
    });
    try {
      await blocker.query('begin');
      await blocker.query(`select 1 from contacts where project_id = $1 and email_key = 'locked@x.test' for update`, [
        q.id,
      ]);
      const records = [
        rec(1, 'fresh@x.test'),
        rec(2, 'bad@x.test', { v: '\u0000' }),
        rec(3, 'locked@x.test', { n: 1 }),
      ];
      const attempt = commitImportBatch(impatient.db, imp, {
        records,
        errors: [],
        fromRow: 0,
        toRow: 3,
        bytesProcessed: 0,
      });
      await expect(attempt).rejects.toThrow();
      expect(isRowDataError(await attempt.catch((e: unknown) => e))).toBe(false);
    } finally {
      await blocker.query('rollback');
      blocker.release();
      await impatient.close();
    }
    // Nothing of the batch was kept: no contact, no error, no progress.
    expect((await contactsOf(q)).has('fresh@x.test')).toBe(false);
    expect(await getImportErrors(e2e.api.database.db, q.id, imp.id)).toEqual([]);
    const [row] = await e2e.api.database.db.select().from(contactImports).where(eq(contactImports.id, imp.id));
    expect(row).toMatchObject({ rowsProcessed: 0, created: 0, failed: 0 });
  });

  test('isRowDataError: a data exception is, a terminated connection is not', async () => {
    const client = await e2e.api.database.pool.connect();
    try {
      const bad = await client.query(`select $1::jsonb`, ['{"a":"\\u0000"}']).catch((e: unknown) => e);
      expect(isRowDataError(bad)).toBe(true);
      const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
      await e2e.api.database.pool.query('select pg_terminate_backend($1)', [rows[0].pid]);
      const lost = await waitFor(
        async () =>
          client.query('select 1').then(
            () => undefined,
            (e: unknown) => e as object,
          ),
        10_000,
        'the terminated connection to fail',
      );
      expect(isRowDataError(lost)).toBe(false);
    } finally {
      client.release(true);
    }
  });
});

describe('bad input is refused before anything is stored', () => {
  const importCount = async (projectId: string) =>
    (await e2e.api.database.db.select().from(contactImports).where(eq(contactImports.projectId, projectId))).length;

  test.each([
    ['a 0-byte file', '', 'empty.csv', 'is empty'],
    ['wrong column names', 'mail,name\na@x.test,A\n', 'c.csv', 'no "email" column (found: mail, name)'],
    ['a column named twice', 'email,Email\na@x.test,b\n', 'c.csv', 'twice'],
    ['a CSV header with a 0x00 byte', 'email,na\u0000me\na@x.test,b\n', 'c.csv', 'column 2 contains the NUL character'],
    ['an NDJSON file whose first line is not an object', '[1,2]\n', 'c.ndjson', 'line 1 is not a JSON object'],
    ['a JSON file that is not an array', '{"email":"a@x.test"}', 'c.json', 'JSON array'],
  ])('422 for %s', async (_label, content, filename, message) => {
    const q = await createTestProject(e2e.api.database);
    const res = await upload(q, content, filename);
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'file', message: expect.stringContaining(message) });
    expect(await importCount(q.id)).toBe(0);
  });

  test('413 for a file over IMPORT_MAX_BYTES, with nothing stored (multipart and raw)', async () => {
    const q = await createTestProject(e2e.api.database);
    const big = 'email,name\n' + Array.from({ length: 12_000 }, (_, i) => `big${i}@x.test,Name ${i}`).join('\n');
    expect(big.length).toBeGreaterThan(MAX);
    const viaForm = await upload(q, big);
    expect(viaForm.status).toBe(413);
    expect(viaForm.body.error.code).toBe('PAYLOAD_TOO_LARGE');
    const viaBody = await raw(q, big, 'text/csv');
    expect(viaBody.status).toBe(413);
    expect(await importCount(q.id)).toBe(0);
    expect((await contactsOf(q)).size).toBe(0);
  });

  test('4xx for a multipart file name with a NUL byte, raw or percent-encoded (RFC 5987); nothing stored', async () => {
    const q = await createTestProject(e2e.api.database);
    const rawName = await upload(q, 'email\na@x.test\n', 'con\u0000tacts.csv');
    expect(rawName.status).toBe(400);
    const body = [
      '--b0undary',
      `Content-Disposition: form-data; name="file"; filename*=UTF-8''con%00tacts.csv`,
      'Content-Type: text/csv',
      '',
      'email\na@x.test',
      '--b0undary--',
      '',
    ].join('\r\n');
    const encoded = await request(e2e.api.app)
      .post('/contacts/import')
      .set('Authorization', q.auth)
      .set('Content-Type', 'multipart/form-data; boundary=b0undary')
      .send(body);
    expect(encoded.status).toBe(422);
    expect(encoded.body.error.errors[0]).toMatchObject({ field: 'file', message: expect.stringContaining('NUL') });
    expect(await importCount(q.id)).toBe(0);
  });

  test('422 when the format cannot be told or the file field is missing; ?format= decides', async () => {
    const q = await createTestProject(e2e.api.database);
    const unknown = await upload(q, 'email\na@x.test\n', 'contacts.txt');
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.errors[0].field).toBe('format');
    const told = await upload(q, 'email\na@x.test\n', 'contacts.txt', '?format=csv');
    expect(told.status).toBe(202);
    const noFile = await request(e2e.api.app).post('/contacts/import').set('Authorization', q.auth).field('other', 'x');
    expect(noFile.status).toBe(422);
    expect(noFile.body.error.errors[0].field).toBe('file');
    expect((await raw(q, 'email\n', 'text/plain')).status).toBe(422);
    expect((await upload(q, 'email\n', 'c.csv', '?format=xml')).status).toBe(400);
  });
});

describe('security', () => {
  test('another project’s import is 404; unknown and malformed ids; public key 403', async () => {
    const res = await upload(e2e.p, 'email\nsec@x.test\n');
    const other = await createTestProject(e2e.api.database);
    expect((await getImport(other, res.body.data.id)).status).toBe(404);
    expect((await getImport(e2e.p, '0190a8c0-0000-7000-8000-000000000000')).status).toBe(404);
    expect((await getImport(e2e.p, 'nope')).status).toBe(400);
    const pk = await request(e2e.api.app)
      .post('/contacts/import')
      .set('Authorization', `Bearer ${e2e.p.publicKey}`)
      .set('Content-Type', 'text/csv')
      .send('email\na@x.test\n');
    expect(pk.status).toBe(403);
    await finished(e2e.p, res.body.data.id);
    expect((await contactsOf(other)).size).toBe(0);
  });
});

describe('resuming', () => {
  // An API whose queue no worker drains: the processor is driven by hand.
  const idle = loadConfig(testEnv({ IMPORT_BATCH_SIZE: '25' }));
  let idleApi: TestApi;
  beforeAll(async () => {
    idleApi = await startTestApi(idle);
  });
  afterAll(async () => idleApi?.close());

  const job = (importId: string, projectId: string) =>
    ({ id: importId, data: { importId, projectId }, opts: { attempts: 5 }, attemptsMade: 0 }) as unknown as Job;

  test('an import that fails mid-way is resumed from the last batch: no row applied or counted twice', async () => {
    const q = await createTestProject(idleApi.database);
    const total = 2000;
    const csv = 'email,n\n' + Array.from({ length: total }, (_, i) => `r${i}@x.test,${i}`).join('\n');
    const res = await request(idleApi.app)
      .post('/contacts/import')
      .set('Authorization', q.auth)
      .set('Content-Type', 'text/csv')
      .send(csv);
    expect(res.status).toBe(202);
    const id = res.body.data.id;

    // Row 1500's contact exists and is locked by another transaction; the first worker's lock_timeout turns that
    // into a failed batch in the middle of the file (2 s: with two batches in flight, each waits for the one before
    // under the same lock_timeout, which must not run out on a busy machine).
    await request(idleApi.app)
      .post('/contacts')
      .set('Authorization', q.auth)
      .send({ email: 'r1499@x.test', data: { n: 'old' } });
    const blocker = await idleApi.database.pool.connect();
    await blocker.query('begin');
    await blocker.query(`select 1 from contacts where project_id = $1 and email_key = 'r1499@x.test' for update`, [
      q.id,
    ]);
    const impatient = createDatabase({
      url: `${idle.databaseUrl}?options=-c%20lock_timeout%3D2000`,
      poolSize: 2,
      applicationName: 'impatient',
    });
    const logger = createLogger(idle, 'worker');
    try {
      await expect(createImportProcessor({ config: idle, database: impatient, logger })(job(id, q.id))).rejects.toThrow(
        'canceling statement due to lock timeout',
      );
    } finally {
      await blocker.query('rollback');
      blocker.release();
      await impatient.close();
    }
    const progress = async () =>
      (await idleApi.database.db.select().from(contactImports).where(eq(contactImports.id, id)))[0];
    const cut = await progress();
    expect(cut).toMatchObject({ status: 'running', rowsProcessed: 1475, created: 1475 });

    // Two workers race for the rest: the progress guard lets one apply each batch.
    const [a, b] = await Promise.allSettled([
      createImportProcessor({ config: idle, database: idleApi.database, logger })(job(id, q.id)),
      createImportProcessor({ config: idle, database: idleApi.database, logger })(job(id, q.id)),
    ]);
    expect([a.status, b.status]).toContain('fulfilled');
    const done = await progress();
    expect(done).toMatchObject({
      status: 'completed',
      rowsProcessed: total,
      created: total - 1,
      updated: 1,
      skipped: 0,
      failed: 0,
    });
    expect((await contactsOf(q)).size).toBe(total);
    const chunks = await idleApi.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from contact_import_chunks where import_id = ${id}::uuid`,
    );
    expect(chunks.rows[0].n).toBe(0);
  });
});
