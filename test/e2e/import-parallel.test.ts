/**
 * Imports with batches applied two at once (`IMPORT_PARALLEL=2`): file order and exact counts across batch
 * boundaries, row errors at the boundaries, the batch after a failed one never kept, resuming after a failure
 * with two batches in flight, and /v1/track writing the same contacts meanwhile (no lost update, no deadlock).
 * The processor is driven by hand (no worker), so each test decides when a run happens.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import type { Job } from 'bullmq';
import { createLogger } from '@mailroom/platform/logger';
import type { Config } from '@mailroom/config/config';
import { type ImportRecord } from '@mailroom/contacts/imports';
import { createImport, getImportErrors, markImportQueued, startImport } from '@mailroom/contacts/queries/imports';
import { commitImportBatch } from '@mailroom/contacts/queries/import-batch';
import { contactImports } from '@mailroom/db/schema/imports';
import { createDatabase } from '@mailroom/db/client';
import { createImportProcessor } from '../../apps/worker/src/processors/import';
import { createTestProject, waitFor, type TestApi, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({ env: { IMPORT_BATCH_SIZE: '10', IMPORT_PARALLEL: '2' }, worker: false });
let config: Config;
let api: TestApi;

beforeAll(() => {
  ({ config, api } = e2e);
});

const logger = () => createLogger(config, 'worker');
const job = (importId: string, projectId: string) =>
  ({ id: importId, data: { importId, projectId }, opts: { attempts: 5 }, attemptsMade: 0 }) as unknown as Job;
const run = (p: TestProject, id: string, database = api.database) =>
  createImportProcessor({ config, database, logger: logger() })(job(id, p.id));
const progress = async (id: string) =>
  (await api.database.db.select().from(contactImports).where(eq(contactImports.id, id)))[0];

async function uploadCsv(p: TestProject, csv: string): Promise<string> {
  const res = await request(api.app)
    .post('/contacts/import')
    .set('Authorization', p.auth)
    .set('Content-Type', 'text/csv')
    .send(csv);
  expect(res.status).toBe(202);
  return res.body.data.id as string;
}

async function contactsOf(
  p: TestProject,
): Promise<Map<string, { subscribed: boolean; data: Record<string, unknown> }>> {
  const rows = await api.database.db.execute<{ email: string; subscribed: boolean; data: Record<string, unknown> }>(
    sql`select email, subscribed, data from contacts where project_id = ${p.id}::uuid`,
  );
  return new Map(rows.rows.map((r) => [r.email, { subscribed: r.subscribed, data: r.data }]));
}

const stats = async (p: TestProject) =>
  (
    await api.database.db.execute<{ total: number; subscribed: number }>(
      sql`select total::int, subscribed::int from contact_stats_now where project_id = ${p.id}::uuid`,
    )
  ).rows[0];

test('an address repeated in nearby batches ends with its last row; bad rows at batch edges are row errors; counts and counters exact', async () => {
  const p = await createTestProject(api.database);
  // Rows 1–60 (batches of 10: rows 1–10, 11–20, …). "same@x.test" is in four batches, two of them adjacent
  // (applied at once unless the runner serialises them); bad rows sit on the first and last row of batches.
  const lines: string[] = [];
  for (let row = 1; row <= 60; row++) {
    if (row === 10 || row === 11 || row === 30 || row === 31) lines.push(`not-an-address-${row},${row},`);
    else if (row === 5 || row === 15 || row === 25 || row === 45)
      lines.push(`Same@X.test,${row},${row === 15 ? 'false' : ''}`);
    else if (row === 20) lines.push(`nul@x.test,a\u0000b,`);
    else lines.push(`r${row}@x.test,${row},`);
  }
  const id = await uploadCsv(p, 'email,n,subscribed\n' + lines.join('\n'));
  await expect(run(p, id)).resolves.toMatchObject({ outcome: 'completed' });

  const done = await progress(id);
  // 60 rows: 5 bad; "same" created once and changed by its 3 later rows; 51 other addresses created.
  expect(done).toMatchObject({
    status: 'completed',
    rowsProcessed: 60,
    created: 52,
    updated: 3,
    skipped: 0,
    failed: 5,
  });
  const errors = await getImportErrors(api.database.db, p.id, id);
  expect(errors.map((e) => [e.row, e.errors[0].field])).toEqual([
    [10, 'email'],
    [11, 'email'],
    [20, 'data.n'],
    [30, 'email'],
    [31, 'email'],
  ]);
  const contacts = await contactsOf(p);
  expect(contacts.size).toBe(52);
  // Row 45 is the last: its n; row 15 unsubscribed it and no later row says otherwise.
  expect(contacts.get('Same@x.test')).toEqual({ subscribed: false, data: { n: '45' } });
  expect(await stats(p)).toEqual({ total: 52, subscribed: 51 });
});

test('a batch waits for the batch before it; if that one rolls back, nothing of this one is kept', async () => {
  const p = await createTestProject(api.database);
  const { db } = api.database;
  const created = await createImport(db, p.id, { format: 'json', filename: null, defaultSubscribed: true });
  await markImportQueued(db, created.id, 0, 0);
  const imp = (await startImport(db, created.id))!;
  const rec = (row: number): ImportRecord => ({
    row,
    email: `w${row}@x.test`,
    emailKey: `w${row}@x.test`,
    set: { row },
    removed: [],
  });

  // Another transaction stands for the batch of rows 1–10, still being applied: it holds that batch's lock.
  const first = await api.database.pool.connect();
  try {
    await first.query('begin');
    const importKey = Number.parseInt(imp.id.replace(/-/g, '').slice(-8), 16) | 0;
    await first.query(`select pg_advisory_xact_lock($1::int, 0)`, [importKey]);
    const second = commitImportBatch(
      db,
      imp,
      { records: [rec(11), rec(12)], errors: [], fromRow: 10, toRow: 12, bytesProcessed: 0 },
      { after: 0 },
    );
    second.catch(() => undefined);
    // It wrote its contacts and waits at the end of its statement, before its counter trigger and its commit.
    await waitFor(
      async () => {
        const r = await api.database.pool.query(
          `select 1 from pg_locks where locktype = 'advisory' and not granted and mode = 'ShareLock'
           and classid::bigint = ($1::bigint & 4294967295) and objid = 0 and objsubid = 2`,
          [importKey],
        );
        return r.rowCount! > 0;
      },
      10_000,
      'the second batch to wait for the first',
    );
    expect((await contactsOf(p)).size).toBe(0);
    // Its rows are already written (the heavy part overlaps with the batch before): inserting one of its addresses
    // from elsewhere waits for its transaction.
    const other = await api.database.pool.connect();
    try {
      const pid = (await other.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      const racing = other.query(
        `insert into contacts (id, project_id, email, email_key, subscribed) values (gen_random_uuid(), $1, 'w11@x.test', 'w11@x.test', true)
         on conflict (project_id, email_key) do nothing`,
        [p.id],
      );
      await waitFor(
        async () => {
          const r = await api.database.pool.query(
            `select 1 from pg_locks where pid = $1 and locktype = 'transactionid' and not granted`,
            [pid],
          );
          return r.rowCount! > 0;
        },
        10_000,
        'an insert of the same address to wait for the second batch',
      );
      await first.query('rollback');
      await expect(second).rejects.toThrow(`import ${imp.id} is no longer at row 10`);
      await racing;
      await other.query(`delete from contacts where project_id = $1`, [p.id]);
    } finally {
      other.release();
    }
  } finally {
    first.release();
  }
  expect((await contactsOf(p)).size).toBe(0);
  expect(await progress(imp.id)).toMatchObject({ rowsProcessed: 0, created: 0, failed: 0 });

  // When the batch before commits, the next one goes through.
  await commitImportBatch(db, imp, { records: [rec(1)], errors: [], fromRow: 0, toRow: 10, bytesProcessed: 0 });
  await expect(
    commitImportBatch(
      db,
      imp,
      { records: [rec(11), rec(12)], errors: [], fromRow: 10, toRow: 12, bytesProcessed: 0 },
      { after: 0 },
    ),
  ).resolves.toEqual({ created: 2, updated: 0, skipped: 0, failed: 0 });
  expect(await progress(imp.id)).toMatchObject({ rowsProcessed: 12, created: 3 });
  expect(await stats(p)).toEqual({ total: 3, subscribed: 3 });
});

test('a failure with two batches in flight: the import stops at the last batch committed in order; the resumed run applies each row once', async () => {
  const p = await createTestProject(api.database);
  const total = 300;
  const id = await uploadCsv(p, 'email,n\n' + Array.from({ length: total }, (_, i) => `f${i}@x.test,${i}`).join('\n'));
  // Row 155's contact exists and is locked: the batch of rows 151–160 times out (lock_timeout 2 s, long enough
  // that the batches before it never time out waiting for each other on a busy machine); the batch after it may
  // be in flight by then, and must not be kept.
  await request(api.app)
    .post('/contacts')
    .set('Authorization', p.auth)
    .send({ email: 'f154@x.test', data: { n: 'old' } });
  const blocker = await api.database.pool.connect();
  const impatient = createDatabase({
    url: `${config.databaseUrl}?options=-c%20lock_timeout%3D2000`,
    poolSize: 3,
    applicationName: 'impatient',
  });
  try {
    await blocker.query('begin');
    await blocker.query(`select 1 from contacts where project_id = $1 and email_key = 'f154@x.test' for update`, [
      p.id,
    ]);
    await expect(run(p, id, impatient)).rejects.toThrow('canceling statement due to lock timeout');
  } finally {
    await blocker.query('rollback');
    blocker.release();
    await impatient.close();
  }
  const cut = await progress(id);
  expect(cut).toMatchObject({ status: 'running', rowsProcessed: 150, created: 150, failed: 0 });
  expect((await contactsOf(p)).size).toBe(151);

  await expect(run(p, id)).resolves.toMatchObject({ outcome: 'completed', created: total - 1, updated: 1 });
  expect(await progress(id)).toMatchObject({
    status: 'completed',
    rowsProcessed: total,
    created: total - 1,
    updated: 1,
    skipped: 0,
    failed: 0,
  });
  const contacts = await contactsOf(p);
  expect(contacts.size).toBe(total);
  expect(contacts.get('f154@x.test')?.data).toEqual({ n: '154' });
  expect(await stats(p)).toEqual({ total, subscribed: total });
});

test('/v1/track writing the same contacts during an import: every write kept, no deadlock, counts exact', async () => {
  const p = await createTestProject(api.database);
  const total = 400;
  const id = await uploadCsv(
    p,
    'email,plan\n' + Array.from({ length: total }, (_, i) => `t${i}@x.test,pro`).join('\n'),
  );
  // Tracks for the same addresses, from the last to the first, 8 at a time, while the import runs.
  const tracked: number[] = [];
  const track = async (lane: number) => {
    for (let i = total - 1 - lane; i >= 0; i -= 8) {
      const res = await request(api.app)
        .post('/v1/track')
        .set('Authorization', `Bearer ${p.publicKey}`)
        .send({ email: `t${i}@x.test`, event: 'visited', data: { seen: i } });
      expect(res.status).toBe(200);
      tracked.push(i);
    }
  };
  const [result] = await Promise.all([run(p, id), ...Array.from({ length: 8 }, (_, lane) => track(lane))]);
  expect(result).toMatchObject({ outcome: 'completed' });
  expect(tracked).toHaveLength(total);

  const contacts = await contactsOf(p);
  expect(contacts.size).toBe(total);
  for (let i = 0; i < total; i++) expect(contacts.get(`t${i}@x.test`)?.data).toEqual({ plan: 'pro', seen: i });
  // Each address was created once, by the import or by a track; the import counts what it did.
  const done = await progress(id);
  expect(done.created + done.updated).toBe(total);
  expect(done).toMatchObject({ status: 'completed', rowsProcessed: total, skipped: 0, failed: 0 });
  expect(await stats(p)).toEqual({ total, subscribed: total });
});
