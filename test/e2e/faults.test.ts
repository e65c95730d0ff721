/**
 * Faults: a worker killed mid-batch, Redis losing every job after acceptance, concurrent sends to one new
 * address. Postgres is the source of truth; the claim and the reconciler make these safe.
 */
import request from 'supertest';
import type { ChildProcess } from 'node:child_process';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { loadConfig, type Config } from '@mailroom/config/config';
import { contacts } from '@mailroom/db/schema/contacts';
import { emails } from '@mailroom/db/schema/emails';
import { startWorker } from '../../apps/worker/src/main';
import {
  createTestProject,
  deletePrefix,
  exited,
  isolatedDatabase,
  recipient,
  sesEmailIds,
  sesSendsTo,
  sentEmailId,
  spawnWorker,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
} from '../support/harness';

async function statuses(api: TestApi, ids: string[]) {
  return api.database.db.select({ id: emails.id, status: emails.status }).from(emails).where(inArray(emails.id, ids));
}

describe('a worker killed in the middle of a batch', () => {
  const env = testEnv({
    SES_MAX_SEND_RATE: '20',
    WORKER_CONCURRENCY: '4',
    WORKER_LOCK_MS: '3000',
    SEND_LEASE_MS: '3000',
  });
  let api: TestApi;
  const children: ChildProcess[] = [];
  beforeAll(async () => {
    api = await startTestApi(loadConfig(env));
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
    await api.close();
  });

  test('loses no email, and re-sends only a message SES may have taken at the moment of the kill', async () => {
    const p = await createTestProject(api.database);
    const to = Array.from({ length: 40 }, () => recipient('kill'));
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `k@${p.domain}`, subject: 'k', body: '<p>k</p>' });
    expect(res.status).toBe(202);
    const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);

    const first = spawnWorker(env);
    children.push(first);
    await waitFor(async () => (await sesSendsTo(to)).length >= 10 || undefined, 30_000, '10 sends');
    const killedAt = Date.now();
    first.kill('SIGKILL');
    await exited(first);
    const sentBeforeKill = (await sesSendsTo(to)).length;
    const heldByDeadWorker = (await statuses(api, ids)).filter((r) => r.status === 'sending').length;
    expect(sentBeforeKill).toBeLessThan(40);

    const respawnedAt = Date.now();
    children.push(spawnWorker(env));
    await waitFor(
      async () => (await statuses(api, ids)).every((r) => r.status === 'sent') || undefined,
      60_000,
      'all 40 sent',
    );

    const atSes = await sesEmailIds(to);
    expect(new Set(atSes)).toEqual(new Set(ids));
    const counts = new Map<string, number>();
    for (const id of atSes) counts.set(id, (counts.get(id) ?? 0) + 1);
    const twice = [...counts].filter(([, n]) => n > 1);
    // SES has no idempotency key: only a message in flight when the process died can be sent again, with the
    // same Message-ID; with one send in flight at a time that is at most one message.
    expect(twice.length).toBeLessThanOrEqual(1);
    // The first copy came from the dead worker: it was on its way when the kill was sent (its bytes may reach the
    // recorder a few ms after the signal), and before the second worker existed; the copy is the second worker's.
    for (const [id] of twice) {
      const all = await sesSendsTo(to);
      const of = await Promise.all(all.map(sentEmailId));
      const sends = all.filter((_, k) => of[k] === id);
      expect(sends[0].at).toBeGreaterThan(killedAt - 1000);
      expect(sends[0].at).toBeLessThan(respawnedAt);
      expect(sends[1].at).toBeGreaterThan(respawnedAt);
    }
    console.log(
      `kill: ${sentBeforeKill} sent before SIGKILL, ${heldByDeadWorker} claimed by the dead worker, 40 delivered after, duplicates: ${twice.length}`,
    );
  }, 90_000);
});

describe('Redis loses every job after acceptance', () => {
  let config: Config;
  let api: TestApi;
  let db: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    // Its own database: an eager reconciler adopts every pending email of the database it watches.
    db = await isolatedDatabase();
    config = loadConfig(
      testEnv({
        DATABASE_URL: db.url,
        RECONCILE_INTERVAL_MS: '300',
        RECONCILE_AFTER_MS: '0',
        SES_MAX_SEND_RATE: '100',
      }),
    );
    api = await startTestApi(config);
  });
  afterAll(async () => {
    await api.close();
    await db.drop();
  });

  test('the reconciler re-enqueues and delivers every email exactly once', async () => {
    const p = await createTestProject(api.database);
    const to = Array.from({ length: 20 }, () => recipient('flush'));
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `f@${p.domain}`, subject: 'f', body: '<p>f</p>' });
    expect(res.status).toBe(202);
    const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);
    const jobsBefore = await api.redis.keys(`${config.queuePrefix}:send:*`);
    expect(jobsBefore.length).toBeGreaterThan(0);
    expect(await deletePrefix(api.redis, config.queuePrefix)).toBeGreaterThan(0);

    const worker = await startWorker(config, { healthPort: null });
    try {
      await waitFor(
        async () => (await statuses(api, ids)).every((r) => r.status === 'sent') || undefined,
        30_000,
        'all sent',
      );
    } finally {
      await worker.stop();
    }
    const atSes = await sesEmailIds(to);
    expect(atSes.sort()).toEqual([...ids].sort());
  });
});

describe('concurrent sends to one new address', () => {
  let api: TestApi;
  beforeAll(async () => {
    api = await startTestApi(loadConfig(testEnv()));
  });
  afterAll(async () => {
    await api.close();
  });

  test('50 concurrent sends create one contact and 50 emails', async () => {
    const p = await createTestProject(api.database);
    const to = recipient('race');
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        request(api.app)
          .post('/v1/send')
          .set('Authorization', p.auth)
          .send({ to, from: `r@${p.domain}`, subject: `n${i}`, body: '<p>x</p>', data: { [`k${i}`]: i } }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(50).fill(202));
    const rows = await api.database.db
      .select()
      .from(contacts)
      .where(and(eq(contacts.projectId, p.id), eq(contacts.emailKey, to)));
    expect(rows).toHaveLength(1);
    // Every request's data key survived: the merge happens in SQL, not read-modify-write.
    expect(Object.keys(rows[0].data).sort()).toEqual(Array.from({ length: 50 }, (_, i) => `k${i}`).sort());
    const contactIds = new Set(results.map((r) => r.body.data.emails[0].contact.id));
    expect([...contactIds]).toEqual([rows[0].id]);
    const [{ n }] = (
      await api.database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where contact_id = ${rows[0].id}`,
      )
    ).rows as [{ n: number }];
    expect(n).toBe(50);
  });
});
