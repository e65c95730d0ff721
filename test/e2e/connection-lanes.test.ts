/**
 * Each delivery connection has its own lanes, end to end through the API and a worker, against two SES emulators:
 * `default` (the single-connection variables, at 2 emails/s) and `backup` (`SES_CONNECTIONS`, at 20/s).
 *
 * - A send whose connection's rate gate is saturated gives its worker slot back (its job waits in the queue,
 *   delayed) instead of holding it: mail bound to `backup` goes out at `backup`'s pace while a burst bound to the
 *   slow `default` fills the queue ahead of it; every email is still accepted exactly once.
 * - The per-project fair share (`SEND_FAIR_SHARE_PER_MINUTE`) is counted per connection: a project's mail on one
 *   connection does not use up its share on the other.
 */
import { inArray } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema';
import { addDomain } from '@mailroom/projects/queries/projects';
import { setDomainConnection, setProjectConnection } from '@mailroom/projects/queries/delivery-connections';
import { client, createTestProject, recipient, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startSesStack, type SesStack } from '../support/services';
import { acceptedAt } from '../support/failing-ses';

const BACKUP = process.env.TEST_SES_ENDPOINT!;

let stack: SesStack;
const e2e = useE2e({
  env: async () => {
    stack = await startSesStack();
    e2e.onTeardown(() => stack.stop());
    return {
      SES_ENDPOINT: stack.endpoint,
      SES_CONNECTIONS: JSON.stringify([{ name: 'backup', region: 'eu-west-1', endpoint: BACKUP, maxSendRate: 20 }]),
      // The default connection is the slow one: 2 emails/s.
      SES_MAX_SEND_RATE: '2',
      WORKER_CONCURRENCY: '4',
      SEND_FAIR_SHARE_PER_MINUTE: '5',
    };
  },
  worker: { healthPort: 0 },
});

/** Sends one email to each of `to` from `from` in one request; @returns the email ids. */
async function send(p: TestProject, to: string[], from = `hello@${p.domain}`): Promise<string[]> {
  const res = await client(e2e.api.app, p).post('/v1/send', { to, from, subject: 'Hi', body: '<p>hi</p>' });
  expect(res.status).toBe(202);
  return (res.body.data.emails as { email: string }[]).map((e) => e.email);
}

type Row = { id: string; status: string; toEmail: string; sesConnection: string | null };
const rows = async (ids: string[]): Promise<Row[]> =>
  e2e.api.database.db
    .select({ id: emails.id, status: emails.status, toEmail: emails.toEmail, sesConnection: emails.sesConnection })
    .from(emails)
    .where(inArray(emails.id, ids));
const sentCount = async (ids: string[]) => (await rows(ids)).filter((r) => r.status === 'sent').length;

test('mail bound to a healthy connection goes out at its own pace while a slow connection is saturated; each email accepted once', async () => {
  const slow = await createTestProject(e2e.api.database);
  const fast = await createTestProject(e2e.api.database);
  expect(await setProjectConnection(e2e.api.database.db, fast.id, 'backup')).toBe(true);

  // 30 emails on `default` (15 s of sending at 2/s) enqueued first, at the same priority; then 20 on `backup`.
  const slowTo = Array.from({ length: 30 }, () => recipient('l-slow'));
  const slowIds = await send(slow, slowTo);
  await waitFor(async () => (await sentCount(slowIds)) >= 1, 20_000, 'the slow connection sending');
  const fastTo = Array.from({ length: 20 }, () => recipient('l-fast'));
  const startedAt = Date.now();
  const fastIds = await send(fast, fastTo);
  const fastRows = await waitFor(
    async () => {
      const r = await rows(fastIds);
      return r.length === fastIds.length && r.every((e) => e.status === 'sent') && r;
    },
    30_000,
    'the backup mail sent',
  );
  const fastMs = Date.now() - startedAt;
  const slowSentMeanwhile = await sentCount(slowIds);
  expect(fastRows.every((r) => r.sesConnection === 'backup')).toBe(true);
  // Held behind the slow connection's burst (every worker slot waiting at its gate, as before), the backup mail
  // would go out only once nearly all 30 had (about 13 s). It went out while most of the burst still waited.
  expect(slowSentMeanwhile).toBeLessThan(24);

  // The slow connection's mail all goes out in the end, through it, each email accepted exactly once.
  const slowRows = await waitFor(
    async () => {
      const r = await rows(slowIds);
      return r.every((e) => e.status === 'sent') && r;
    },
    60_000,
    "the slow connection's mail sent",
  );
  expect(slowRows.every((r) => r.sesConnection === 'default')).toBe(true);
  const [atDefault, atBackup] = await Promise.all([
    acceptedAt(stack.endpoint, [...slowTo, ...fastTo]),
    acceptedAt(BACKUP, [...slowTo, ...fastTo]),
  ]);
  const count = (sends: { to: string[] }[], t: string) => sends.filter((s) => s.to.includes(t)).length;
  for (const t of slowTo) expect([t, count(atDefault, t), count(atBackup, t)]).toEqual([t, 1, 0]);
  for (const t of fastTo) expect([t, count(atDefault, t), count(atBackup, t)]).toEqual([t, 0, 1]);
  console.log(
    `connection lanes: 20 emails on backup sent in ${fastMs} ms while default (2/s) had sent ${slowSentMeanwhile} of its 30`,
  );
}, 120_000);

test("the fair share is counted per connection: a project's mail on default does not use up its share on backup", async () => {
  const p = await createTestProject(e2e.api.database);
  const second = `b${p.domain}`;
  await addDomain(e2e.api.database.db, p.id, second, true);
  expect(await setDomainConnection(e2e.api.database.db, second, 'backup')).toBe(true);
  // Clear of a minute boundary: the share is counted per minute.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 5_000) await new Promise((r) => setTimeout(r, left + 10));
  const minute = Math.floor(Date.now() / 60_000);

  const onDefault = await send(
    p,
    Array.from({ length: 6 }, () => recipient('s-default')),
  );
  const onBackup = await send(
    p,
    Array.from({ length: 4 }, () => recipient('s-backup')),
    `hello@${second}`,
  );
  const key = `${e2e.api.config.queuePrefix}:lane:transactional:${p.id}:${minute}`;
  await waitFor(async () => (await e2e.api.redis.get(`${key}:backup`)) === '4', 10_000, 'the backup count');
  // Each connection has its own count: 6 on default (over its share of 5), 4 on backup (within its own).
  expect(await e2e.api.redis.get(key)).toBe('6');
  const sent = await waitFor(
    async () => {
      const r = await rows([...onDefault, ...onBackup]);
      return r.every((e) => e.status === 'sent') && r;
    },
    30_000,
    'all sent',
  );
  expect(sent.filter((r) => r.sesConnection === 'backup').length).toBe(4);
});

test("workflow mail's fair share is counted per connection too: the From's binding, as for /v1/send", async () => {
  const p = await createTestProject(e2e.api.database);
  const second = `w${p.domain}`;
  await addDomain(e2e.api.database.db, p.id, second, true);
  expect(await setDomainConnection(e2e.api.database.db, second, 'backup')).toBe(true);
  const c = client(e2e.api.app, p);
  const tpl = await c.post('/templates', {
    name: 't',
    subject: 'Hi',
    body: '<p>hi</p>',
    type: 'TRANSACTIONAL',
    from: `wf@${second}`,
  });
  expect(tpl.status).toBe(201);
  const created = await c.post('/workflows', { name: 'wf', trigger: { type: 'EVENT', event: 'signup' } });
  expect(created.status).toBe(201);
  const graph = {
    steps: [
      { key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl.body.data.id } },
      { key: 'end', type: 'EXIT', config: { reason: 'done' } },
    ],
    transitions: [
      { from: null, to: 'send' },
      { from: 'send', to: 'end' },
    ],
  };
  expect((await c.put(`/workflows/${created.body.data.id}/graph`, graph)).status).toBe(200);
  expect((await c.patch(`/workflows/${created.body.data.id}`, { enabled: true })).status).toBe(200);
  // Clear of a minute boundary: the share is counted per minute.
  const left = 60_000 - (Date.now() % 60_000);
  if (left < 15_000) await new Promise((r) => setTimeout(r, left + 10));
  const minute = Math.floor(Date.now() / 60_000);

  const to = [recipient('wf-a'), recipient('wf-b')];
  for (const email of to) expect((await c.post('/v1/track', { email, event: 'signup' })).status).toBe(200);
  const key = `${e2e.api.config.queuePrefix}:lane:workflow:${p.id}:${minute}`;
  await waitFor(
    async () => (await e2e.api.redis.get(`${key}:backup`)) === '2',
    15_000,
    'the backup count of the workflow lane',
  );
  expect(await e2e.api.redis.get(key)).toBeNull();
  const sent = await waitFor(
    async () => {
      const r = await e2e.api.database.db
        .select({ status: emails.status, sesConnection: emails.sesConnection })
        .from(emails)
        .where(inArray(emails.toEmail, to));
      return r.length === 2 && r.every((e) => e.status === 'sent') && r;
    },
    30_000,
    'both workflow emails sent',
  );
  expect(sent.map((r) => r.sesConnection)).toEqual(['backup', 'backup']);
});
