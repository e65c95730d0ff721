/**
 * Abuse of the unauthenticated surface: the negative key cache, the per-IP failed-authentication limit (keys and
 * admin tokens, across processes; counted before the lookup, so parallel bursts cannot pass it; a trickle of
 * lookups for a blocked address), the client IP (TRUST_PROXY, IPv6 /64), and the per-IP limits of
 * `POST /admin/login` and of failed unsubscribe lookups. Each scenario runs its own API (its own QUEUE_PREFIX, so
 * its own Redis counters), all from 127.0.0.1 unless a trusted proxy says otherwise.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { generateKey, hashKey } from '@mailroom/projects/keys';
import { apiKeys, projects } from '@mailroom/db/schema/projects';
import { createProject } from '@mailroom/projects/queries/projects';
import { ipKey } from '../../apps/api/src/http/rate-limit';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  recipient,
  startTestApi,
  testConfig,
  waitFor,
  type TestApi,
} from '../support/harness';
import { expressServerOptions } from '../../apps/api/src/http/server-classes';

const started: TestApi[] = [];
async function apiWith(env: Record<string, string>): Promise<TestApi> {
  const api = await startTestApi(testConfig(env));
  started.push(api);
  return api;
}
const servers: Server[] = [];
afterAll(async () => {
  await Promise.all(servers.map((srv) => new Promise((resolve) => srv.close(resolve))));
  await Promise.all(started.map((a) => a.close()));
});

/** One listening server for a burst (supertest would start one per request otherwise). */
async function listening(api: TestApi): Promise<string> {
  const srv = createServer(expressServerOptions(api.app), api.app);
  servers.push(srv);
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
}

/** Status codes of `n` requests made at once, counted by status. */
async function burst(n: number, send: (i: number) => Promise<request.Response>): Promise<Record<number, number>> {
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => send(i)));
  const counts: Record<number, number> = {};
  for (const a of answers) counts[a.status] = (counts[a.status] ?? 0) + 1;
  return counts;
}

const templatesAs = (api: TestApi, key: string) =>
  request(api.app).get('/templates').set('Authorization', `Bearer ${key}`);

/** Stores `key` as a key of `projectId`, as another process issuing it would. */
async function storeKey(api: TestApi, projectId: string, key: string): Promise<void> {
  await api.database.db
    .insert(apiKeys)
    .values({ projectId, kind: 'secret', keyHash: hashKey(key), keyPrefix: key.slice(0, 10) });
}

function expectRateLimited(res: request.Response): void {
  expect(res.status).toBe(429);
  expect(res.body).toMatchObject({
    success: false,
    code: 'RATE_LIMITED',
    error: { code: 'RATE_LIMITED', statusCode: 429, requestId: expect.any(String) },
  });
  const retryAfter = Number(res.headers['retry-after']);
  expect(Number.isInteger(retryAfter)).toBe(true);
  expect(retryAfter).toBeGreaterThanOrEqual(1);
  expect(retryAfter).toBeLessThanOrEqual(60);
}

describe('negative cache', () => {
  test('a key found unknown is answered from memory: no database lookup while it is remembered', async () => {
    const api = await apiWith({ AUTH_NEGATIVE_CACHE_TTL_MS: '60000' });
    const tried = generateKey('secret');
    expect((await templatesAs(api, tried)).status).toBe(401);
    // With its database gone, the process can only answer the remembered key from memory.
    await api.database.close();
    const again = await templatesAs(api, tried);
    expect(again.status).toBe(401);
    expect(again.body.error.code).toBe('UNAUTHORIZED');
    // A key it has not seen needs the database, which is not there: proof that the 401 above came from memory.
    expect((await templatesAs(api, generateKey('secret'))).status).toBeGreaterThanOrEqual(500);
  });

  test('a key issued just now is not refused because it was tried before: cleared in the issuing process, short-lived elsewhere', async () => {
    const issuer = await apiWith({ AUTH_NEGATIVE_CACHE_TTL_MS: '60000' });
    const other = await apiWith({ AUTH_NEGATIVE_CACHE_TTL_MS: '1000' });
    const project = await createProject(issuer.database.db, 'neg');
    const key = generateKey('secret');
    expect((await templatesAs(issuer, key)).status).toBe(401);
    expect((await templatesAs(other, key)).status).toBe(401);
    await storeKey(issuer, project.id, key);
    // Still remembered as unknown in the issuing process (60 s TTL)...
    expect((await templatesAs(issuer, key)).status).toBe(401);
    // ...until an admin change there (creating a project, rotating or revoking keys) clears it.
    const created = await request(issuer.app)
      .post('/admin/projects')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ name: 'clears' });
    expect(created.status).toBe(201);
    expect((await templatesAs(issuer, key)).status).toBe(200);
    // Another process forgets it within its short TTL.
    const t0 = Date.now();
    await waitFor(
      async () => (await templatesAs(other, key)).status === 200,
      15_000,
      'the other process to accept the new key',
    );
    expect(Date.now() - t0).toBeLessThan(15_000);
  });
});

describe('per-IP failed-authentication limit', () => {
  test('unknown and malformed keys: 401 up to the limit, then 429 with Retry-After; a client with a good key keeps working', async () => {
    // No positive cache: the good key is looked up each time, and still passes once the address is blocked.
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '5', AUTH_CACHE_TTL_MS: '0' });
    const good = await createProject(api.database.db, 'good');
    // Successes never count.
    for (let i = 0; i < 8; i++) expect((await templatesAs(api, good.secretKey)).status).toBe(200);
    // Nor do requests without a key (they guess nothing).
    for (let i = 0; i < 6; i++) expect((await request(api.app).get('/templates')).status).toBe(401);
    const attempts = [generateKey('secret'), generateKey('public'), 'sk_tooshort', 'garbage', generateKey('secret')];
    for (const key of attempts) {
      const res = await templatesAs(api, key);
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
    expectRateLimited(await templatesAs(api, generateKey('secret')));
    expectRateLimited(await templatesAs(api, 'garbage'));
    expectRateLimited(
      await request(api.app)
        .post('/v1/track')
        .set('Authorization', `Bearer ${generateKey('public')}`)
        .send({ email: recipient(), event: 'x' }),
    );
    // The legitimate client on the same address is not locked out.
    expect((await templatesAs(api, good.secretKey)).status).toBe(200);
  });

  test('wrong admin tokens count too (admin API, metrics, dashboard); once blocked, a bearer token gets 429 even when right; a session cookie still works', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '3' });
    const as = (path: string, token: string) =>
      request(api.app).get(path).set('Accept', 'application/json').set('Authorization', `Bearer ${token}`);
    // The right token never counts.
    for (let i = 0; i < 5; i++) expect((await as('/admin/stats', ADMIN_TOKEN)).status).toBe(200);
    const wrong = 'not-the-admin-token-at-all';
    expect((await as('/admin/stats', wrong)).status).toBe(401);
    expect((await as('/metrics', wrong)).status).toBe(401);
    const dash = await as('/admin/queues/api/queues', wrong);
    expect(dash.status).toBe(401);
    expect(dash.body.error.code).toBe('UNAUTHORIZED');
    expectRateLimited(await as('/admin/stats', wrong));
    expectRateLimited(await as('/admin/queues/api/queues', wrong));
    // A blocked address learns nothing about the token: the right one is refused the same way, everywhere.
    expectRateLimited(await as('/admin/stats', ADMIN_TOKEN));
    expectRateLimited(await as('/metrics', ADMIN_TOKEN));
    expectRateLimited(await as('/admin/queues/api/queues', ADMIN_TOKEN));
    // The same address is now refused for made-up API keys as well: one counter per IP.
    expectRateLimited(await templatesAs(api, generateKey('secret')));
    // An operator signs in through the form (its own, slow limit) and works on with the session cookie.
    const login = await request(api.app).post('/admin/login').type('form').send({ token: ADMIN_TOKEN });
    expect(login.status).toBe(303);
    const cookie = login.headers['set-cookie'][0].split(';')[0];
    const board = await request(api.app)
      .get('/admin/queues/api/queues')
      .set('Accept', 'application/json')
      .set('Cookie', cookie);
    expect(board.status).toBe(200);
    // A cookie with a right bearer token is let in on the cookie; a forged cookie is not.
    expect((await as('/admin/queues/api/queues', ADMIN_TOKEN).set('Cookie', cookie)).status).toBe(200);
    expectRateLimited(
      await as('/admin/queues/api/queues', ADMIN_TOKEN).set('Cookie', `mailroom_admin=${Date.now()}.forged`),
    );
  });

  test('parallel guesses cannot pass the admin limit: at most the limit of wrong tokens get an answer other than 429', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '5' });
    const base = await listening(api);
    const counts = await burst(30, (i) =>
      request(base).get('/admin/stats').set('Authorization', `Bearer wrong-admin-token-${i}-xxxxxxxx`),
    );
    expect(counts).toEqual({ 401: 5, 429: 25 });
  });

  test('the count is shared by every API process (Redis); a blocked address costs the other process no lookup', async () => {
    // One trickle lookup a minute: a's refusal below spends it, so b has none left.
    const a = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '4', BLOCKED_LOOKUP_INTERVAL_S: '60' });
    const b = await startTestApi(
      testConfig({
        AUTH_FAILURE_LIMIT_PER_MINUTE: '4',
        BLOCKED_LOOKUP_INTERVAL_S: '60',
        QUEUE_PREFIX: a.config.queuePrefix,
      }),
    );
    started.push(b);
    for (let i = 0; i < 2; i++) expect((await templatesAs(a, generateKey('secret'))).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await templatesAs(b, generateKey('secret'))).status).toBe(401);
    expectRateLimited(await templatesAs(a, generateKey('secret')));
    // b refuses before looking anything up: even with its database gone, the answer is 429, not 5xx.
    await b.database.close();
    expectRateLimited(await templatesAs(b, generateKey('secret')));
  });

  test('a parallel burst of made-up keys is counted before the lookup: at most the limit (plus one trickle lookup) reach the database', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '20', AUTH_NEGATIVE_CACHE_TTL_MS: '0' });
    const base = await listening(api);
    const open = await burst(50, () =>
      request(base)
        .get('/templates')
        .set('Authorization', `Bearer ${generateKey('secret')}`),
    );
    // Each 401 is a distinct key looked up in the database; everything else was refused before any lookup.
    expect((open[401] ?? 0) + (open[429] ?? 0)).toBe(50);
    expect(open[401]).toBeGreaterThanOrEqual(20);
    expect(open[401]).toBeLessThanOrEqual(21);

    // The proof without counting: with the database gone, a request that reaches a lookup fails 5xx, one refused
    // before it gets 429. A fresh address budget (another prefix) makes the whole limit available again.
    const closed = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '20', AUTH_NEGATIVE_CACHE_TTL_MS: '0' });
    const closedBase = await listening(closed);
    await closed.database.close();
    const counts = await burst(50, () =>
      request(closedBase)
        .get('/templates')
        .set('Authorization', `Bearer ${generateKey('secret')}`),
    );
    const lookups = Object.entries(counts)
      .filter(([status]) => Number(status) >= 500)
      .reduce((n, [, c]) => n + c, 0);
    expect(counts[429]).toBeGreaterThanOrEqual(29);
    expect(lookups).toBeLessThanOrEqual(21);
    expect(lookups + counts[429]).toBe(50);
  });

  test('a valid key is never counted: parallel first requests of one key share one lookup, and pass even far beyond the limit', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '3' });
    const p = await createProject(api.database.db, 'burst');
    const base = await listening(api);
    expect(
      await burst(40, () => request(base).get('/templates').set('Authorization', `Bearer ${p.secretKey}`)),
    ).toEqual({ 200: 40 });
    // The whole failure budget is still there.
    for (let i = 0; i < 3; i++) expect((await templatesAs(api, generateKey('secret'))).status).toBe(401);
    expectRateLimited(await templatesAs(api, generateKey('secret')));
  });

  test('a blocked address still gets one lookup per BLOCKED_LOOKUP_INTERVAL_S: a valid key unseen by a (restarted) process gets through within seconds, then keeps working', async () => {
    const offender = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '3', BLOCKED_LOOKUP_INTERVAL_S: '2' });
    const good = await createProject(offender.database.db, 'shares-an-ip');
    for (let i = 0; i < 3; i++) expect((await templatesAs(offender, generateKey('secret'))).status).toBe(401);
    expectRateLimited(await templatesAs(offender, generateKey('secret')));
    // A process that has never seen the good key (a restart), sharing the Redis counters.
    const restarted = await startTestApi(
      testConfig({
        AUTH_FAILURE_LIMIT_PER_MINUTE: '3',
        BLOCKED_LOOKUP_INTERVAL_S: '2',
        QUEUE_PREFIX: offender.config.queuePrefix,
      }),
    );
    started.push(restarted);
    const t0 = Date.now();
    const statuses = new Set<number>();
    await waitFor(
      async () => {
        const res = await templatesAs(restarted, good.secretKey);
        statuses.add(res.status);
        return res.status === 200;
      },
      10_000,
      'the valid key to get its trickle lookup',
    );
    // Within one trickle interval (plus slack for a slow machine), and only 200s or 429s on the way.
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect([...statuses].every((st) => st === 200 || st === 429)).toBe(true);
    // Now known good there: no Redis, no refusal.
    for (let i = 0; i < 10; i++) expect((await templatesAs(restarted, good.secretKey)).status).toBe(200);
    // Everything else from the address is still refused, a trickle lookup that finds nothing included.
    for (let i = 0; i < 5; i++) expectRateLimited(await templatesAs(restarted, generateKey('secret')));
    expectRateLimited(await templatesAs(restarted, 'garbage'));
  });
});

describe('client IP', () => {
  test('ipKey: IPv4 by address, IPv4-mapped IPv6 as IPv4, other IPv6 by its /64', () => {
    expect(ipKey('203.0.113.5')).toBe('203.0.113.5');
    expect(ipKey('::ffff:203.0.113.5')).toBe('203.0.113.5');
    expect(ipKey('::FFFF:cb00:7105')).toBe('203.0.113.5');
    expect(ipKey('0:0:0:0:0:ffff:1.2.3.4')).toBe('1.2.3.4');
    expect(ipKey('2001:db8:1:2::1')).toBe('2001:db8:1:2::/64');
    expect(ipKey('2001:0DB8:0001:0002:ffff:ffff:ffff:ffff')).toBe('2001:db8:1:2::/64');
    expect(ipKey('2001:db8:1:2:3:4:1.2.3.4')).toBe('2001:db8:1:2::/64');
    expect(ipKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(ipKey('2001:db8::1')).toBe('2001:db8::/64');
    expect(ipKey('2001:db8:0:1::5')).toBe('2001:db8:0:1::/64');
    expect(ipKey('2001:0:0:1::')).toBe('2001:0:0:1::/64');
    expect(ipKey('64:ff9b::192.0.2.1')).toBe('64:ff9b::/64');
    expect(ipKey('fe80::1%eth0')).toBe('fe80::/64');
    expect(ipKey('::1')).toBe('::/64');
    expect(ipKey('::')).toBe('::/64');
    expect(ipKey('unknown')).toBe('unknown');
  });

  const fromIp = (api: TestApi, ip: string, key = generateKey('secret')) =>
    templatesAs(api, key).set('X-Forwarded-For', ip);

  test('TRUST_PROXY unset: X-Forwarded-For is ignored, every request counts against the TCP peer', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '2' });
    expect((await fromIp(api, '198.51.100.1')).status).toBe(401);
    expect((await fromIp(api, '198.51.100.2')).status).toBe(401);
    expectRateLimited(await fromIp(api, '198.51.100.3'));
  });

  test('TRUST_PROXY=loopback: the client behind the proxy is counted; IPv6 clients by /64, IPv4-mapped as IPv4', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '2', TRUST_PROXY: 'loopback' });
    expect((await fromIp(api, '203.0.113.5')).status).toBe(401);
    expect((await fromIp(api, '198.51.100.9, 203.0.113.5')).status).toBe(401);
    expectRateLimited(await fromIp(api, '203.0.113.5'));
    expectRateLimited(await fromIp(api, '::ffff:203.0.113.5'));
    // Another client behind the same proxy is not locked out.
    expect((await fromIp(api, '203.0.113.6')).status).toBe(401);
    expect((await fromIp(api, '2001:db8:1:2::1')).status).toBe(401);
    expect((await fromIp(api, '2001:db8:1:2:aaaa:bbbb:cccc:dddd')).status).toBe(401);
    expectRateLimited(await fromIp(api, '2001:db8:1:2::ffff'));
    expect((await fromIp(api, '2001:db8:1:3::1')).status).toBe(401);
    // The same keying for the other per-IP limits (here: failed unsubscribe lookups).
    const unsub = await apiWith({ UNSUBSCRIBE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: '127.0.0.1/8' });
    const get = (ip: string) =>
      request(unsub.app)
        .get(`/unsubscribe/${'B'.repeat(43)}`)
        .set('X-Forwarded-For', ip);
    expect((await get('2001:db8:9:9::1')).status).toBe(404);
    expectRateLimited(await get('2001:db8:9:9::2'));
    expect((await get('2001:db8:9:8::1')).status).toBe(404);
  });

  test('TRUST_PROXY=1 (one hop) takes the address the proxy appended, not what the client wrote before it', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '1', TRUST_PROXY: '1' });
    expect((await fromIp(api, '10.9.9.9, 192.0.2.1')).status).toBe(401);
    // The client forging another left-most entry is still 192.0.2.1.
    expectRateLimited(await fromIp(api, '10.9.9.8, 192.0.2.1'));
    expect((await fromIp(api, '192.0.2.2')).status).toBe(401);
  });
});

describe('POST /admin/login limit', () => {
  test('per IP: attempts beyond the limit get 429 with Retry-After (login page for a browser, error body otherwise)', async () => {
    const api = await apiWith({ ADMIN_LOGIN_LIMIT_PER_MINUTE: '3', AUTH_FAILURE_LIMIT_PER_MINUTE: '100' });
    const login = (token: string, accept = 'text/html') =>
      request(api.app).post('/admin/login').set('Accept', accept).type('form').send({ token });
    const wrong = await login('wrong-token-xxxxxxxxxx');
    expect(wrong.status).toBe(401);
    expect(wrong.text).toContain('not right');
    const ok = await login(ADMIN_TOKEN);
    expect(ok.status).toBe(303);
    expect(ok.headers['set-cookie']?.[0]).toMatch(/^mailroom_admin=/);
    expect((await login('wrong-token-xxxxxxxxxx')).status).toBe(401);
    const page = await login(ADMIN_TOKEN);
    expect(page.status).toBe(429);
    expect(page.type).toBe('text/html');
    expect(page.text).toContain('Too many attempts');
    expect(Number(page.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    expect(page.headers['set-cookie']).toBeUndefined();
    expectRateLimited(await login('wrong-token-xxxxxxxxxx', 'application/json'));
  });

  test('wrong tokens at the login form count as failed authentications', async () => {
    const api = await apiWith({ ADMIN_LOGIN_LIMIT_PER_MINUTE: '100', AUTH_FAILURE_LIMIT_PER_MINUTE: '2' });
    const login = (token: string) =>
      request(api.app).post('/admin/login').set('Accept', 'application/json').type('form').send({ token });
    expect((await login('wrong-token-xxxxxxxxxx')).status).toBe(401);
    expect((await login('wrong-token-yyyyyyyyyy')).status).toBe(401);
    expectRateLimited(await login('wrong-token-zzzzzzzzzz'));
    expect((await login(ADMIN_TOKEN)).status).toBe(303);
  });
});

describe('unsubscribe: failed lookups limited per IP, valid tokens never counted', () => {
  /** Emails of a fresh project and their unsubscribe tokens. */
  async function validTokens(api: TestApi, n: number): Promise<string[]> {
    const p = await createTestProject(api.database);
    const sent = await client(api.app, p).post('/v1/send', {
      to: Array.from({ length: n }, () => recipient('u')),
      from: `n@${p.domain}`,
      subject: 'S',
      body: 'B',
    });
    expect(sent.status).toBe(202);
    const [row] = await api.database.db
      .select({ key: projects.signingKey })
      .from(projects)
      .where(eq(projects.id, p.id));
    return sent.body.data.emails.map((e: { email: string }) => createUnsubscribeToken(e.email, row.key));
  }
  const post = (api: TestApi, token: string) =>
    request(api.app)
      .post(`/unsubscribe/${token}`)
      .set('Accept', 'application/json')
      .type('form')
      .send({ 'List-Unsubscribe': 'One-Click' });
  const get = (api: TestApi, token: string) => request(api.app).get(`/unsubscribe/${token}`);
  const madeUp = () =>
    Buffer.from(`${Math.random()}${Date.now()}made-up-token-bytes`).toString('base64url').slice(0, 43);

  test('valid tokens (POST and GET) never count; unknown ones (POST and GET) get 404 up to the limit, then 429 with Retry-After', async () => {
    const api = await apiWith({ UNSUBSCRIBE_LIMIT_PER_MINUTE: '3' });
    const tokens = await validTokens(api, 3);
    // Far more valid requests than the limit, one-click POSTs and page views.
    for (let i = 0; i < 4; i++) {
      for (const token of tokens) {
        expect((await post(api, token)).status).toBe(200);
        expect((await get(api, token)).status).toBe(200);
      }
    }
    expect((await post(api, madeUp())).status).toBe(404);
    expect((await get(api, madeUp())).status).toBe(404);
    // Valid tokens between failures change nothing.
    for (const token of tokens) expect((await post(api, token)).status).toBe(200);
    expect((await get(api, 'not-a-token')).status).toBe(404);
    expectRateLimited(await post(api, madeUp()));
    expectRateLimited(await get(api, madeUp()));
    expectRateLimited(await get(api, 'not-a-token'));
    // A valid token from the blocked address still gets through within seconds (one lookup per interval).
    await waitFor(
      async () => (await post(api, tokens[0])).status === 200,
      10_000,
      'the trickle lookup of a valid token',
    );
  });

  test('a parallel burst of made-up tokens is counted before the lookup; parallel valid one-click POSTs within the limit all succeed', async () => {
    const api = await apiWith({ UNSUBSCRIBE_LIMIT_PER_MINUTE: '10' });
    const tokens = await validTokens(api, 10);
    const base = await listening(api);
    const unsubscribe = (token: string) =>
      request(base)
        .post(`/unsubscribe/${token}`)
        .set('Accept', 'application/json')
        .type('form')
        .send({ 'List-Unsubscribe': 'One-Click' });
    // As many lookups at once as the limit, each given back, and again: none counts.
    for (let round = 0; round < 2; round++) expect(await burst(10, (i) => unsubscribe(tokens[i]))).toEqual({ 200: 10 });
    const counts = await burst(40, () => unsubscribe(madeUp()));
    expect(counts[404]).toBeGreaterThanOrEqual(10);
    expect(counts[404]).toBeLessThanOrEqual(11);
    expect(counts[404] + counts[429]).toBe(40);
  });
});
