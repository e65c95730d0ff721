/**
 * Several SES delivery connections, end to end through the API and a worker, against two SES emulators:
 *
 * - `default` (the single-connection variables): a second emulator and its recorder, behind a proxy the test
 *   makes fail (503 to everything, `GetAccount` included);
 * - `backup` (`SES_CONNECTIONS`): the run's emulator and recorder.
 *
 * A domain (or a project) bound to `backup` sends there, the rest through `default`; each email row records the
 * connection whose SES accepted it; when `default` fails for longer than `SES_FAILOVER_WINDOW_MS` its mail fails
 * over to `backup` (the domain is verified there: local identities), and comes back once the probe finds it
 * answering; across all of it no recipient gets a message accepted twice; `/metrics` labels every figure with its
 * connection.
 */
import { eq, inArray, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema';
import { setDomainConnection, setProjectConnection } from '@mailroom/projects/queries/delivery-connections';
import { client, createTestProject, recipient, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startSesStack, type SesStack } from '../support/services';
import { acceptedAt, FailingSes } from '../support/failing-ses';

const BACKUP = process.env.TEST_SES_ENDPOINT!;
const WINDOW_MS = 1_000;

let stack: SesStack;
let primary: FailingSes;
const e2e = useE2e({
  env: async () => {
    stack = await startSesStack();
    e2e.onTeardown(() => stack.stop());
    primary = await new FailingSes(new URL(stack.endpoint)).listen();
    e2e.onTeardown(() => primary.close());
    return {
      SES_ENDPOINT: primary.url,
      SES_CONNECTIONS: JSON.stringify([{ name: 'backup', region: 'eu-west-1', endpoint: BACKUP, maxSendRate: 30 }]),
      SES_FAILOVER_WINDOW_MS: String(WINDOW_MS),
      SES_FAILOVER_PROBE_MS: '300',
      SES_TIMEOUT_MS: '3000',
      SES_MAX_SEND_RATE: '30',
      SEND_BACKOFF_MS: '100',
      SEND_MAX_ATTEMPTS: '20',
    };
  },
  worker: { healthPort: 0 },
});

/** Sends one email per recipient from `p`'s domain; @returns the email ids. */
async function send(p: TestProject, to: string[]): Promise<string[]> {
  const ids: string[] = [];
  for (const t of to) {
    const res = await client(e2e.api.app, p).post('/v1/send', {
      to: t,
      from: `hello@${p.domain}`,
      subject: 'Hi',
      body: '<p>hi</p>',
    });
    expect(res.status).toBe(202);
    ids.push(res.body.data.emails[0].email as string);
  }
  return ids;
}

type Row = { id: string; status: string; toEmail: string; sesConnection: string | null };
const rows = async (ids: string[]): Promise<Row[]> =>
  e2e.api.database.db
    .select({ id: emails.id, status: emails.status, toEmail: emails.toEmail, sesConnection: emails.sesConnection })
    .from(emails)
    .where(inArray(emails.id, ids));
const allSent = (ids: string[], what: string) =>
  waitFor(
    async () => {
      const r = await rows(ids);
      return r.length === ids.length && r.every((e) => e.status === 'sent') && r;
    },
    45_000,
    what,
  );

const scrape = async () => (await fetch(`http://127.0.0.1:${e2e.worker.healthPort}/metrics`)).text();
const series = (text: string, line: string) =>
  Number(new RegExp(`^${line.replace(/[{}"()+.]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);

/** Each recipient's accepted sends across both connections: `[at default, at backup]`. */
async function acceptedCounts(to: string[]): Promise<Map<string, [number, number]>> {
  const [a, b] = await Promise.all([acceptedAt(stack.endpoint, to), acceptedAt(BACKUP, to)]);
  const m = new Map<string, [number, number]>(to.map((t) => [t, [0, 0]]));
  for (const s of a) for (const t of s.to) m.get(t)![0]++;
  for (const s of b) for (const t of s.to) m.get(t)![1]++;
  return m;
}

test('a domain or a project bound to a connection sends there; the rest go through the default; the row records which', async () => {
  const unbound = await createTestProject(e2e.api.database);
  const domainBound = await createTestProject(e2e.api.database);
  const projectBound = await createTestProject(e2e.api.database);
  expect(await setDomainConnection(e2e.api.database.db, domainBound.domain, 'backup')).toBe(true);
  expect(await setProjectConnection(e2e.api.database.db, projectBound.id, 'backup')).toBe(true);

  const [u, d, p] = [[recipient('c-unbound')], [recipient('c-domain')], [recipient('c-project')]];
  const ids = [...(await send(unbound, u)), ...(await send(domainBound, d)), ...(await send(projectBound, p))];
  const sent = await allSent(ids, 'three emails sent');
  const via = new Map(sent.map((r) => [r.toEmail, r.sesConnection]));
  expect(via.get(u[0])).toBe('default');
  expect(via.get(d[0])).toBe('backup');
  expect(via.get(p[0])).toBe('backup');
  const counts = await acceptedCounts([...u, ...d, ...p]);
  expect(counts.get(u[0])).toEqual([1, 0]);
  expect(counts.get(d[0])).toEqual([0, 1]);
  expect(counts.get(p[0])).toEqual([0, 1]);

  const text = await scrape();
  expect(
    series(text, 'mailroom_ses_send_duration_seconds_count{connection="default",outcome="ok"}'),
  ).toBeGreaterThanOrEqual(1);
  expect(
    series(text, 'mailroom_ses_send_duration_seconds_count{connection="backup",outcome="ok"}'),
  ).toBeGreaterThanOrEqual(2);
  expect(series(text, 'mailroom_send_rate{connection="default"}')).toBe(30);
  expect(series(text, 'mailroom_send_rate{connection="backup"}')).toBe(30);
  expect(series(text, 'mailroom_ses_account_read_ok{connection="backup"}')).toBe(1);
  expect(series(text, 'mailroom_ses_connection_healthy{connection="default"}')).toBe(1);
  expect(series(text, 'mailroom_ses_connection_healthy{connection="backup"}')).toBe(1);
});

test('the default failing mid-send fails over to backup after the window, comes back once it recovers, and no email is sent twice', async () => {
  const p = await createTestProject(e2e.api.database);
  const healthKey = e2e.worker.connections.health.key('default');

  // 1. Healthy: mail goes through the default.
  const before = Array.from({ length: 5 }, () => recipient('f-before'));
  const beforeIds = await send(p, before);
  const sentBefore = await allSent(beforeIds, 'the first five sent');
  expect(sentBefore.every((r) => r.sesConnection === 'default')).toBe(true);

  // 2. The default's SES fails (503 to everything) while a stream of mail is sent.
  primary.mode = '5xx';
  const failedAt = Date.now();
  const during = Array.from({ length: 10 }, () => recipient('f-during'));
  const duringIds: string[] = [];
  for (const chunk of [during.slice(0, 5), during.slice(5)]) {
    duringIds.push(...(await send(p, chunk)));
    await waitFor(async () => primary.sends('5xx') > 0, 20_000, 'the default failing a send');
  }
  const unhealthyAt = await waitFor(
    async () => (await e2e.api.redis.hget(healthKey, 'unhealthy')) !== null && Date.now(),
    20_000,
    'the default marked unhealthy',
  );
  // Not before the window: one failure does not fail over.
  expect(unhealthyAt - failedAt).toBeGreaterThanOrEqual(WINDOW_MS - 100);
  const sentDuring = await allSent(duringIds, 'the stream sent through backup');
  expect(sentDuring.every((r) => r.sesConnection === 'backup')).toBe(true);
  expect(primary.sends('5xx')).toBeGreaterThanOrEqual(1);
  const metricsDown = await waitFor(
    async () => {
      const t = await scrape();
      return series(t, 'mailroom_ses_connection_healthy{connection="default"}') === 0 && t;
    },
    10_000,
    'the health gauge at 0',
  );
  expect(
    series(metricsDown, 'mailroom_ses_send_duration_seconds_count{connection="default",outcome="error"}'),
  ).toBeGreaterThanOrEqual(1);

  // 3. The default recovers: the probe marks it healthy and the domain's mail comes back to it.
  primary.mode = 'healthy';
  const healthyFrom = Date.now();
  await waitFor(async () => (await e2e.api.redis.exists(healthKey)) === 0, 20_000, 'the default healthy again');
  await waitFor(
    async () => (await scrape()).includes('mailroom_ses_connection_healthy{connection="default"} 1'),
    10_000,
    'the health gauge back at 1',
  );
  const after = Array.from({ length: 5 }, () => recipient('f-after'));
  const recoveredAt = Date.now();
  const sentAfter = await allSent(await send(p, after), 'the last five sent');
  expect(sentAfter.every((r) => r.sesConnection === 'default')).toBe(true);

  // Every email accepted exactly once, by the connection its row names.
  const all = [...sentBefore, ...sentDuring, ...sentAfter];
  const counts = await acceptedCounts(all.map((r) => r.toEmail));
  for (const r of all)
    expect([r.toEmail, counts.get(r.toEmail)]).toEqual([r.toEmail, r.sesConnection === 'default' ? [1, 0] : [0, 1]]);
  console.log(
    `failover: default marked unhealthy ${unhealthyAt - failedAt} ms after its first 503 (window ${WINDOW_MS} ms), ${primary.sends('5xx')} sends refused, ` +
      `the stream of 10 sent through backup; back ${recoveredAt - healthyFrom} ms after it answered again (probe every 300 ms); each of ${all.length} accepted once`,
  );
});

test('an unknown binding falls back to the default connection', async () => {
  const p = await createTestProject(e2e.api.database);
  await e2e.api.database.db.execute(sql`update projects set ses_connection = 'gone' where id = ${p.id}::uuid`);
  const to = [recipient('c-gone')];
  const [row] = await allSent(await send(p, to), 'sent');
  expect(row.sesConnection).toBe('default');
  expect(
    (await e2e.api.database.db.select({ c: emails.sesConnection }).from(emails).where(eq(emails.id, row.id)))[0].c,
  ).toBe('default');
});
