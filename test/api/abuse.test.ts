/**
 * Abuse of the unauthenticated surface: the negative key cache, the per-IP failed-authentication limit (keys and
 * admin tokens, across processes), and the per-IP limits of `POST /admin/login` and `POST /unsubscribe/{token}`.
 * Each scenario runs its own API (its own QUEUE_PREFIX, so its own Redis counters), all from 127.0.0.1.
 */
import request from 'supertest';
import { generateKey, hashKey } from '@mailroom/core';
import { apiKeys, createProject } from '@mailroom/db';
import { ADMIN_TOKEN, recipient, startTestApi, testConfig, waitFor, type TestApi } from '../support/harness';

const started: TestApi[] = [];
async function apiWith(env: Record<string, string>): Promise<TestApi> {
  const api = await startTestApi(testConfig(env));
  started.push(api);
  return api;
}
afterAll(async () => {
  await Promise.all(started.map((a) => a.close()));
});

const templatesAs = (api: TestApi, key: string) => request(api.app).get('/templates').set('Authorization', `Bearer ${key}`);

/** Stores `key` as a key of `projectId`, as another process issuing it would. */
async function storeKey(api: TestApi, projectId: string, key: string): Promise<void> {
  await api.database.db.insert(apiKeys).values({ projectId, kind: 'secret', keyHash: hashKey(key), keyPrefix: key.slice(0, 10) });
}

function expectRateLimited(res: request.Response): void {
  expect(res.status).toBe(429);
  expect(res.body).toMatchObject({ success: false, code: 'RATE_LIMITED', error: { code: 'RATE_LIMITED', statusCode: 429, requestId: expect.any(String) } });
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
    const created = await request(issuer.app).post('/admin/projects').set('Authorization', `Bearer ${ADMIN_TOKEN}`).send({ name: 'clears' });
    expect(created.status).toBe(201);
    expect((await templatesAs(issuer, key)).status).toBe(200);
    // Another process forgets it within its short TTL.
    const t0 = Date.now();
    await waitFor(async () => (await templatesAs(other, key)).status === 200, 15_000, 'the other process to accept the new key');
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
    expectRateLimited(await request(api.app).post('/v1/track').set('Authorization', `Bearer ${generateKey('public')}`).send({ email: recipient(), event: 'x' }));
    // The legitimate client on the same address is not locked out.
    expect((await templatesAs(api, good.secretKey)).status).toBe(200);
  });

  test('wrong admin tokens count too (admin API, metrics, dashboard); the right token still works', async () => {
    const api = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '3' });
    const wrong = (path: string) => request(api.app).get(path).set('Authorization', 'Bearer not-the-admin-token-at-all');
    expect((await wrong('/admin/stats')).status).toBe(401);
    expect((await wrong('/metrics')).status).toBe(401);
    const dash = await wrong('/admin/queues/api/queues').set('Accept', 'application/json');
    expect(dash.status).toBe(401);
    expect(dash.body.error.code).toBe('UNAUTHORIZED');
    expectRateLimited(await wrong('/admin/stats'));
    expectRateLimited(await wrong('/admin/queues/api/queues').set('Accept', 'application/json'));
    // The same address is now refused for made-up API keys as well: one counter per IP.
    expectRateLimited(await templatesAs(api, generateKey('secret')));
    const right = await request(api.app).get('/admin/stats').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(right.status).toBe(200);
  });

  test('the count is shared by every API process (Redis); a blocked address costs the other process no lookup', async () => {
    const a = await apiWith({ AUTH_FAILURE_LIMIT_PER_MINUTE: '4' });
    const b = await startTestApi(testConfig({ AUTH_FAILURE_LIMIT_PER_MINUTE: '4', QUEUE_PREFIX: a.config.queuePrefix }));
    started.push(b);
    for (let i = 0; i < 2; i++) expect((await templatesAs(a, generateKey('secret'))).status).toBe(401);
    for (let i = 0; i < 2; i++) expect((await templatesAs(b, generateKey('secret'))).status).toBe(401);
    expectRateLimited(await templatesAs(a, generateKey('secret')));
    // b refuses before looking anything up: even with its database gone, the answer is 429, not 5xx.
    await b.database.close();
    expectRateLimited(await templatesAs(b, generateKey('secret')));
  });
});

describe('POST /admin/login limit', () => {
  test('per IP: attempts beyond the limit get 429 with Retry-After (login page for a browser, error body otherwise)', async () => {
    const api = await apiWith({ ADMIN_LOGIN_LIMIT_PER_MINUTE: '3', AUTH_FAILURE_LIMIT_PER_MINUTE: '100' });
    const login = (token: string, accept = 'text/html') => request(api.app).post('/admin/login').set('Accept', accept).type('form').send({ token });
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
    const login = (token: string) => request(api.app).post('/admin/login').set('Accept', 'application/json').type('form').send({ token });
    expect((await login('wrong-token-xxxxxxxxxx')).status).toBe(401);
    expect((await login('wrong-token-yyyyyyyyyy')).status).toBe(401);
    expectRateLimited(await login('wrong-token-zzzzzzzzzz'));
    expect((await login(ADMIN_TOKEN)).status).toBe(303);
  });
});

describe('POST /unsubscribe/{token} limit', () => {
  test('per IP: beyond the limit 429 with Retry-After; the page (GET) is not counted', async () => {
    const api = await apiWith({ UNSUBSCRIBE_LIMIT_PER_MINUTE: '3' });
    const token = 'A'.repeat(43);
    for (let i = 0; i < 3; i++) {
      const res = await request(api.app).post(`/unsubscribe/${token}`).set('Accept', 'application/json').type('form').send({ 'List-Unsubscribe': 'One-Click' });
      expect(res.status).toBe(404);
    }
    expectRateLimited(await request(api.app).post(`/unsubscribe/${token}`).set('Accept', 'application/json').type('form').send({ 'List-Unsubscribe': 'One-Click' }));
    expect((await request(api.app).get(`/unsubscribe/${token}`)).status).toBe(404);
  });
});
