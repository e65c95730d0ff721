/**
 * Bulk contact import end to end: upload (multipart or raw body) → Postgres chunks → `contact-import` job →
 * worker → contacts; progress, counts and row errors; bad input; resuming after a crash; tenant isolation.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import type { Job } from 'bullmq';
import { createLogger, loadConfig } from '@mailroom/core';
import { contactImports, createDatabase } from '@mailroom/db';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { createImportProcessor } from '../../apps/worker/src/processors/import';
import { createTestProject, startTestApi, testEnv, waitFor, type TestApi, type TestProject } from '../support/harness';

const MAX = 200_000;
const config = loadConfig(testEnv({ IMPORT_MAX_BYTES: String(MAX), IMPORT_BATCH_SIZE: '40' }));
let api: TestApi;
let worker: RunningWorker;
let p: TestProject;

beforeAll(async () => {
  api = await startTestApi(config);
  worker = await startWorker(config, { healthPort: null });
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
});

const upload = (project: TestProject, content: string | Buffer, filename = 'contacts.csv', query = '') =>
  request(api.app).post(`/contacts/import${query}`).set('Authorization', project.auth).attach('file', Buffer.from(content), filename);
const raw = (project: TestProject, content: string, type: string, query = '') =>
  request(api.app).post(`/contacts/import${query}`).set('Authorization', project.auth).set('Content-Type', type).send(content);
const getImport = (project: TestProject, id: string) => request(api.app).get(`/contacts/import/${id}`).set('Authorization', project.auth);

async function finished(project: TestProject, id: string) {
  return waitFor(async () => {
    const res = await getImport(project, id);
    return ['completed', 'failed'].includes(res.body.data.status) ? res.body.data : undefined;
  }, 30_000, `import ${id}`);
}

async function contactsOf(project: TestProject): Promise<Map<string, { subscribed: boolean; data: Record<string, unknown> }>> {
  const rows = await api.database.db.execute<{ email: string; subscribed: boolean; data: Record<string, unknown> }>(
    sql`select email, subscribed, data from contacts where project_id = ${project.id}::uuid`,
  );
  return new Map(rows.rows.map((r) => [r.email, { subscribed: r.subscribed, data: r.data }]));
}

describe('happy path', () => {
  test('a CSV upload: created, updated, skipped and failed counts; row errors; subscription rules', async () => {
    const q = await createTestProject(api.database);
    // Existing contacts: one unsubscribed (must stay so), one unsubscribed that the file re-subscribes, one unchanged.
    const post = (body: object) => request(api.app).post('/contacts').set('Authorization', q.auth).send(body);
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
    expect(res.body.data).toMatchObject({ id: expect.any(String), status: 'queued', format: 'csv', filename: 'contacts.csv', defaultSubscribed: true });
    const done = await finished(q, res.body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts).toEqual({ created: 100, updated: 3, skipped: 1, failed: 2 });
    expect(done.progress).toMatchObject({ rowsProcessed: 106, percent: 100 });
    expect(done.progress.bytesProcessed).toBe(done.progress.bytesTotal);
    expect(done.errors).toEqual([
      { row: 101, email: 'not-an-email', errors: [expect.objectContaining({ field: 'email', code: 'invalid_string' })] },
      { row: 106, email: 'u2@x.test', errors: [expect.objectContaining({ field: 'subscribed' })] },
    ]);
    const all = await contactsOf(q);
    expect(all.size).toBe(103);
    expect(all.get('u0@x.test')).toEqual({ subscribed: true, data: { First_Name: 'User 0' } });
    expect(all.get('u1@x.test')?.data).toEqual({ First_Name: 'Again' });
    expect(all.get('stay@x.test')).toEqual({ subscribed: false, data: { first_name: 'Old', First_Name: 'New' } });
    expect(all.get('back@x.test')?.subscribed).toBe(true);
    const list = await request(api.app).get('/contacts').set('Authorization', q.auth);
    expect(list.body.data.total).toBe(103);

    // The same file again changes nothing, except u1, which its two rows set in turn.
    const again = await finished(q, (await upload(q, lines.join('\n'))).body.data.id);
    expect(again.counts).toEqual({ created: 0, updated: 2, skipped: 102, failed: 2 });
  });

  test('raw bodies: NDJSON and a JSON array, with data merge and null removal; ?subscribed=false', async () => {
    const q = await createTestProject(api.database);
    const nd = ['{"email":"a@x.test","data":{"plan":"pro","tmp":1}}', '', '{"email":"b@x.test","subscribed":true}', 'not json', '{"email":"c@x.test","extra":1}'].join('\n');
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
    const q = await createTestProject(api.database);
    const csv = 'email,name\ngood1@x.test,One\n"broken@x.test,"Two"x\ngood2@x.test,Three\n';
    const done = await finished(q, (await raw(q, csv, 'text/csv')).body.data.id);
    expect(done.status).toBe('completed');
    expect(done.counts.created).toBeGreaterThanOrEqual(1);
    expect(done.counts.failed).toBeGreaterThanOrEqual(1);
    expect(done.errors[0]).toMatchObject({ row: 2, errors: [expect.objectContaining({ message: expect.stringContaining('malformed CSV') })] });
    expect((await contactsOf(q)).has('good1@x.test')).toBe(true);
  });

  test('a JSON array broken mid-file fails the import with the reason; records before it stay', async () => {
    const q = await createTestProject(api.database);
    const done = await finished(q, (await raw(q, '[{"email":"ok@x.test"}, {"email": "x@x.test" oops', 'application/json')).body.data.id);
    expect(done.status).toBe('failed');
    expect(done.error).toMatch(/invalid JSON/);
    expect((await contactsOf(q)).has('ok@x.test')).toBe(true);
  });
});

describe('bad input is refused before anything is stored', () => {
  const importCount = async (projectId: string) =>
    (await api.database.db.select().from(contactImports).where(eq(contactImports.projectId, projectId))).length;

  test.each([
    ['a 0-byte file', '', 'empty.csv', 'is empty'],
    ['wrong column names', 'mail,name\na@x.test,A\n', 'c.csv', 'no "email" column (found: mail, name)'],
    ['a column named twice', 'email,Email\na@x.test,b\n', 'c.csv', 'twice'],
    ['an NDJSON file whose first line is not an object', '[1,2]\n', 'c.ndjson', 'line 1 is not a JSON object'],
    ['a JSON file that is not an array', '{"email":"a@x.test"}', 'c.json', 'JSON array'],
  ])('422 for %s', async (_label, content, filename, message) => {
    const q = await createTestProject(api.database);
    const res = await upload(q, content, filename);
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'file', message: expect.stringContaining(message) });
    expect(await importCount(q.id)).toBe(0);
  });

  test('413 for a file over IMPORT_MAX_BYTES, with nothing stored (multipart and raw)', async () => {
    const q = await createTestProject(api.database);
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

  test('422 when the format cannot be told or the file field is missing; ?format= decides', async () => {
    const q = await createTestProject(api.database);
    const unknown = await upload(q, 'email\na@x.test\n', 'contacts.txt');
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.errors[0].field).toBe('format');
    const told = await upload(q, 'email\na@x.test\n', 'contacts.txt', '?format=csv');
    expect(told.status).toBe(202);
    const noFile = await request(api.app).post('/contacts/import').set('Authorization', q.auth).field('other', 'x');
    expect(noFile.status).toBe(422);
    expect(noFile.body.error.errors[0].field).toBe('file');
    expect((await raw(q, 'email\n', 'text/plain')).status).toBe(422);
    expect((await upload(q, 'email\n', 'c.csv', '?format=xml')).status).toBe(400);
  });
});

describe('security', () => {
  test('another project’s import is 404; unknown and malformed ids; public key 403', async () => {
    const res = await upload(p, 'email\nsec@x.test\n');
    const other = await createTestProject(api.database);
    expect((await getImport(other, res.body.data.id)).status).toBe(404);
    expect((await getImport(p, '0190a8c0-0000-7000-8000-000000000000')).status).toBe(404);
    expect((await getImport(p, 'nope')).status).toBe(400);
    const pk = await request(api.app).post('/contacts/import').set('Authorization', `Bearer ${p.publicKey}`).set('Content-Type', 'text/csv').send('email\na@x.test\n');
    expect(pk.status).toBe(403);
    await finished(p, res.body.data.id);
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

  const job = (importId: string, projectId: string) => ({ id: importId, data: { importId, projectId }, opts: { attempts: 5 }, attemptsMade: 0 }) as unknown as Job;

  test('an import that fails mid-way is resumed from the last batch: no row applied or counted twice', async () => {
    const q = await createTestProject(idleApi.database);
    const total = 2000;
    const csv = 'email,n\n' + Array.from({ length: total }, (_, i) => `r${i}@x.test,${i}`).join('\n');
    const res = await request(idleApi.app).post('/contacts/import').set('Authorization', q.auth).set('Content-Type', 'text/csv').send(csv);
    expect(res.status).toBe(202);
    const id = res.body.data.id;

    // Row 1500's contact exists and is locked by another transaction; the first worker's lock_timeout turns that
    // into a failed batch in the middle of the file.
    await request(idleApi.app).post('/contacts').set('Authorization', q.auth).send({ email: 'r1499@x.test', data: { n: 'old' } });
    const blocker = await idleApi.database.pool.connect();
    await blocker.query('begin');
    await blocker.query(`select 1 from contacts where project_id = $1 and email_key = 'r1499@x.test' for update`, [q.id]);
    const impatient = createDatabase({ url: `${idle.databaseUrl}?options=-c%20lock_timeout%3D300`, poolSize: 2, applicationName: 'impatient' });
    const logger = createLogger(idle, 'worker');
    try {
      await expect(createImportProcessor({ config: idle, database: impatient, logger })(job(id, q.id))).rejects.toThrow('canceling statement due to lock timeout');
    } finally {
      await blocker.query('rollback');
      blocker.release();
      await impatient.close();
    }
    const progress = async () => (await idleApi.database.db.select().from(contactImports).where(eq(contactImports.id, id)))[0]!;
    const cut = await progress();
    expect(cut).toMatchObject({ status: 'running', rowsProcessed: 1475, created: 1475 });

    // Two workers race for the rest: the progress guard lets one apply each batch.
    const [a, b] = await Promise.allSettled([
      createImportProcessor({ config: idle, database: idleApi.database, logger })(job(id, q.id)),
      createImportProcessor({ config: idle, database: idleApi.database, logger })(job(id, q.id)),
    ]);
    expect([a.status, b.status]).toContain('fulfilled');
    const done = await progress();
    expect(done).toMatchObject({ status: 'completed', rowsProcessed: total, created: total - 1, updated: 1, skipped: 0, failed: 0 });
    expect((await contactsOf(q)).size).toBe(total);
    const chunks = await idleApi.database.db.execute<{ n: number }>(sql`select count(*)::int as n from contact_import_chunks where import_id = ${id}::uuid`);
    expect(chunks.rows[0]!.n).toBe(0);
  });
});
