/**
 * Read replicas against a REAL streaming replica: a throwaway primary (`initdb`) and a replica of it
 * (`pg_basebackup -R`), each on a free port (test/support/pg-replica.ts; the shared test cluster is not touched).
 *
 * - lists, searches, stats, `/reputation` and segment previews run on the replica; writes, idempotent writes and
 *   single-item reads run on the primary (seen in each server's `pg_stat_statements` and `pg_stat_activity`);
 * - a replica whose replay is paused while the primary writes is measured lagging and skipped: the answers are the
 *   primary's; a quiet spell on the primary before that write is not taken for lag;
 * - a stopped replica changes no answer and gives no 5xx (each failed read is retried on the primary), and reads
 *   return to it once it is back;
 * - a server that is not in recovery is never used as a replica.
 */
import { randomBytes } from 'node:crypto';
import type { Express } from 'express';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues, type Queues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createReadReplicas, type ReadReplicas } from '@mailroom/db/replicas';
import type { Redis } from 'ioredis';
import { createApp } from '../../apps/api/src/app';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  testConfig,
  waitFor,
  waitReady,
  type TestProject,
} from '../support/harness';
import { startReplicaPair, type ReplicaPair } from '../support/pg-replica';

jest.setTimeout(240_000);

const MAX_LAG_MS = 1_500;
let pair: ReplicaPair;
let database: Database;
let replicas: ReadReplicas;
let redis: Redis;
let queues: Queues;
let app: Express;
let p: TestProject;

beforeAll(async () => {
  pair = await startReplicaPair();
  const config = testConfig({
    DATABASE_URL: pair.primaryUrl,
    DATABASE_REPLICA_URLS: pair.replicaUrl,
    DATABASE_REPLICA_MAX_LAG_MS: String(MAX_LAG_MS),
    DATABASE_REPLICA_CHECK_INTERVAL_MS: '200',
  });
  database = createDatabase({ url: config.databaseUrl, poolSize: 5, applicationName: 'test-api-primary' });
  replicas = createReadReplicas({
    primary: database,
    urls: config.databaseReplicaUrls,
    poolSize: 5,
    applicationName: 'test-api-replica',
    maxLagMs: config.databaseReplicaMaxLagMs,
    checkIntervalMs: config.databaseReplicaCheckIntervalMs,
  });
  redis = createRedis(config, 'producer');
  await waitReady(redis);
  queues = createQueues(config, redis);
  app = createApp({ config, database, replicas, redis, queues, logger: createLogger(config, 'api') }).app;
  p = await createTestProject(database);
}, 300_000);

afterAll(async () => {
  await queues?.closeAll();
  redis?.disconnect();
  await replicas?.close();
  await database?.close();
  pair?.close();
}, 120_000);

const state = () => replicas.status()[0].state;
const waitState = (want: string, what = `replica ${want}`) => waitFor(async () => state() === want, 60_000, what);
/** Waits until the replica has replayed the primary's current WAL position. */
async function replicaCaughtUp(): Promise<void> {
  const [{ lsn }] = await pair.onPrimary<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn');
  await waitFor(
    async () =>
      (await pair.onReplica<{ ok: boolean }>('select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn]))[0]?.ok,
    60_000,
    'the replica to catch up',
  );
}
const statements = async (on: 'primary' | 'replica', like: string) =>
  (on === 'primary' ? pair.onPrimary : pair.onReplica)<{ query: string; calls: string }>(
    'select query, calls::text from pg_stat_statements where query ilike $1 and query not ilike $2',
    [like, '%pg_stat_statements%'],
  );
const resetStatements = () =>
  Promise.all([
    pair.onPrimary('select pg_stat_statements_reset()'),
    pair.onReplica('select pg_stat_statements_reset()'),
  ]);
const metrics = async () => (await client(app, p).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).text;
const series = (text: string, name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
const address = () => `rr.${randomBytes(5).toString('hex')}@inbox.test`;

async function createContact(email: string, idempotencyKey?: string): Promise<string> {
  const req = client(app, p).post('/contacts', { email, data: { plan: 'pro' } });
  const res = idempotencyKey ? await req.set('Idempotency-Key', idempotencyKey) : await req;
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}
async function searchFinds(email: string): Promise<boolean> {
  const res = await client(app, p).get(`/contacts?search=${encodeURIComponent(email)}`);
  expect(res.status).toBe(200);
  return (res.body.data.items as { email: string }[]).some((c) => c.email === email);
}

test('lists, search, stats, /reputation and previews run on the replica; writes and single reads on the primary', async () => {
  await waitState('ok');
  const email = address();
  const id = await createContact(email, `k-${randomBytes(4).toString('hex')}`);
  await replicaCaughtUp();
  await resetStatements();

  const as = client(app, p);
  expect(await searchFinds(email)).toBe(true);
  expect((await as.get('/contacts')).status).toBe(200);
  expect((await as.get('/reputation')).status).toBe(200);
  const preview = await as.post('/segments/preview', {
    filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }],
  });
  expect(preview.status).toBe(200);
  expect(preview.body.data.count).toBe(1);
  expect((await as.get('/campaigns')).status).toBe(200);
  expect((await as.get('/events')).status).toBe(200);
  // A single-item read stays on the primary (a client reads what it just created).
  expect((await as.get(`/contacts/${id}`)).body.data.email).toBe(email);

  // The replica ran the reads: contact lists and searches, the reputation rollup, the preview's count.
  expect(await statements('replica', '%from "contacts"%')).not.toHaveLength(0);
  expect(await statements('replica', '%reputation_counts%')).not.toHaveLength(0);
  expect(await statements('replica', '%from "campaigns"%')).not.toHaveLength(0);
  // The primary did not: only the single-item read and authentication touched it.
  expect(await statements('primary', '%reputation_counts%')).toHaveLength(0);
  expect(await statements('primary', '%from "campaigns"%')).toHaveLength(0);
  expect(await statements('primary', '%"contacts"%')).not.toHaveLength(0);
  // Connections as each server sees them: the API's replica pool only on the replica, its primary pool only on the primary.
  const names = async (on: ReplicaPair['onReplica']) =>
    (
      await on<{ a: string }>(
        `select distinct application_name as a from pg_stat_activity where application_name like 'test-api%'`,
      )
    ).map((r) => r.a);
  expect(await names(pair.onReplica)).toEqual(expect.arrayContaining(['test-api-replica', 'test-api-replica-check']));
  expect(await names(pair.onReplica)).not.toContain('test-api-primary');
  expect(await names(pair.onPrimary)).toEqual(['test-api-primary']);

  // Writes while a replica takes reads: the upsert (idempotent and not) lands on the primary.
  await createContact(address());
  expect((await as.patch(`/contacts/${id}`, { data: { seats: 3 } })).status).toBe(200);
  expect(await statements('replica', 'insert%')).toHaveLength(0);

  const text = await metrics();
  expect(
    series(
      text,
      'mailroom_db_reads_total',
      `connection="replica",replica="127\\.0\\.0\\.1:${pair.replicaPort}/mailroom_replicas"`,
    ),
  ).toBeGreaterThanOrEqual(6);
  expect(
    series(text, 'mailroom_db_replica_up', `replica="127\\.0\\.0\\.1:${pair.replicaPort}/mailroom_replicas"`),
  ).toBe(1);
  expect(
    series(text, 'mailroom_db_replica_lag_seconds', `replica="127\\.0\\.0\\.1:${pair.replicaPort}/mailroom_replicas"`),
  ).toBeLessThan(MAX_LAG_MS / 1000);
});

test("a replica lagging beyond DATABASE_REPLICA_MAX_LAG_MS is skipped: the answer is the primary's", async () => {
  await waitState('ok');
  // A quiet spell longer than the limit first: the last replayed commit is then older than the limit.
  await waitFor(
    async () =>
      (
        await pair.onReplica<{ age: number }>(
          'select extract(epoch from now() - pg_last_xact_replay_timestamp()) * 1000 as age',
        )
      )[0].age > MAX_LAG_MS,
    60_000,
    'a quiet spell',
  );
  await pair.onReplica('select pg_wal_replay_pause()');
  try {
    const email = address();
    const wroteAt = Date.now();
    await createContact(email);
    // The first check after the write: WAL waits, yet the lag is the time since the replica was last caught up,
    // not the age of its last replayed commit (the quiet spell).
    await waitFor(async () => replicas.status()[0].checkedAt > wroteAt + 100, 60_000, 'a check after the write');
    const early = replicas.status()[0];
    if (early.state === 'ok') expect(early.lagMs).toBeLessThan(MAX_LAG_MS);
    else expect(Date.now() - wroteAt).toBeGreaterThan(MAX_LAG_MS); // only a machine stalled past the limit gets here
    // Lag is measured by the periodic check, not per query: wait until it has seen the replica fall behind.
    await waitState('lagging', 'the paused replica to be measured lagging');
    expect(replicas.status()[0].lagMs).toBeGreaterThan(MAX_LAG_MS);
    // The replica really is stale; the API's answer is not.
    expect(await pair.onReplica('select 1 from contacts where email = $1', [email])).toHaveLength(0);
    expect(await searchFinds(email)).toBe(true);
    const preview = await client(app, p).post('/segments/preview', {
      filter: [{ field: 'email', operator: 'equals', value: email }],
    });
    expect(preview.body.data.count).toBe(1);
    expect(
      series(
        await metrics(),
        'mailroom_db_replica_up',
        `replica="127\\.0\\.0\\.1:${pair.replicaPort}/mailroom_replicas"`,
      ),
    ).toBe(0);
  } finally {
    await pair.onReplica('select pg_wal_replay_resume()');
  }
  await waitState('ok', 'the resumed replica to catch up');
});

test('a stopped replica changes no answer and gives no 5xx; reads return to it once it is back', async () => {
  // An API whose replica is checked once at start only: no check can notice the stop before the reads do, so each
  // read below meets the dead replica (pooled connections, then refused ones) and must be retried on the primary.
  const unchecked = createReadReplicas({
    primary: database,
    urls: [pair.replicaUrl],
    poolSize: 5,
    applicationName: 'test-api-replica',
    maxLagMs: MAX_LAG_MS,
    checkIntervalMs: 60_000,
  });
  try {
    const api = createApp({
      config: testConfig({ DATABASE_URL: pair.primaryUrl }),
      database,
      replicas: unchecked,
      redis,
      queues,
      logger: createLogger(testConfig(), 'api'),
    }).app;
    await waitFor(async () => unchecked.status()[0].state === 'ok', 60_000, 'the first check');
    const email = address();
    await createContact(email);
    await replicaCaughtUp();
    const reads = async (find: string) => {
      const res = await client(api, p).get(`/contacts?search=${encodeURIComponent(find)}`);
      expect(res.status).toBe(200);
      const preview = await client(api, p).post('/segments/preview', {
        filter: [{ field: 'email', operator: 'equals', value: find }],
      });
      expect(preview.status).toBe(200);
      expect(preview.body.data.count).toBe(1);
      return (res.body.data.items as { email: string }[]).some((c) => c.email === find);
    };
    const count = (connection: string) => unchecked.readCounts().find((c) => c.connection === connection)?.count ?? 0;
    // Opens replica connections, so the stop breaks pooled ones too, not only new ones.
    expect(await reads(email)).toBe(true);
    const onReplicaBefore = count('replica');
    expect(onReplicaBefore).toBeGreaterThanOrEqual(3);
    const onPrimaryBefore = count('primary');

    pair.stopReplica();
    expect(unchecked.status()[0].state).toBe('ok');
    for (let i = 0; i < 3; i++) {
      expect(await reads(email)).toBe(true);
      expect((await client(api, p).get('/reputation')).status).toBe(200);
    }
    // The first failure marked it down at once; the reads after it went straight to the primary.
    expect(unchecked.status()[0].state).toBe('down');
    expect(count('primary') - onPrimaryBefore).toBeGreaterThanOrEqual(9);
    const other = address();
    await createContact(other);
    expect(await reads(other)).toBe(true);

    pair.startReplica();
    await waitFor(
      async () => {
        await unchecked.checkNow();
        return unchecked.status()[0].state === 'ok';
      },
      60_000,
      'the restarted replica to be found usable',
    );
    await replicaCaughtUp();
    const was = count('replica');
    expect(await reads(other)).toBe(true);
    expect(count('replica')).toBeGreaterThan(was);
  } finally {
    await unchecked.close();
  }
});

test('a server that is not in recovery is never used as a replica', async () => {
  const notReplica = createReadReplicas({
    primary: database,
    urls: [pair.primaryUrl],
    poolSize: 1,
    applicationName: 'test-not-replica',
    maxLagMs: MAX_LAG_MS,
    checkIntervalMs: 60_000,
  });
  try {
    await notReplica.checkNow();
    expect(notReplica.status()[0]).toMatchObject({ state: 'not-replica', lagMs: null });
    await notReplica.readDb().execute('select 1');
    expect(notReplica.readCounts()).toEqual([{ connection: 'primary', replica: '', count: 1 }]);
  } finally {
    await notReplica.close();
  }
});
