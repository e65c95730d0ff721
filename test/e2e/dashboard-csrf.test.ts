/**
 * The queue dashboard against cross-site requests: every state-changing call (login, logout, the dashboard's
 * API) from another site is refused with 403 before anything happens, by Fetch Metadata (`Sec-Fetch-Site`) or,
 * without it, by `Origin`; same-origin calls and non-browser clients (no such headers) keep working; reads are not
 * affected. The session cookie is `Secure` whenever PUBLIC_URL is https.
 */
import request from 'supertest';
import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName } from '@mailroom/queues/catalog';
import { createRedis, queueOptions } from '@mailroom/queues/connection';
import { ADMIN_TOKEN, startTestApi, testConfig, waitFor, type TestApi } from '../support/harness';
import { useE2e } from '../support/e2e';

let api: TestApi;
let cookie: string;
let producer: Redis;
let q: Queue;
const e2e = useE2e({ env: { PUBLIC_URL: 'http://mail.example.com' }, worker: false });
beforeAll(async () => {
  api = e2e.api;
  producer = createRedis(api.config, 'producer');
  q = new Queue(QueueName.webhook, queueOptions(api.config, producer));
  const login = await request(api.app)
    .post('/admin/login')
    .set('Sec-Fetch-Site', 'same-origin')
    .type('form')
    .send({ token: ADMIN_TOKEN });
  expect(login.status).toBe(303);
  cookie = (login.headers['set-cookie'] as unknown as string[])[0].split(';')[0];
});
afterAll(async () => {
  await q.close();
  producer.disconnect();
});

/** A webhook job failed by a worker of its own (then closed, so a retried job stays waiting). */
async function failedJob(id: string): Promise<void> {
  const connection = createRedis(api.config, 'worker');
  const failing = new Worker(
    QueueName.webhook,
    async () => {
      throw new Error('upstream exploded');
    },
    { ...queueOptions(api.config, connection), autorun: true },
  );
  await q.add(
    'webhook',
    {
      deliveryId: '00000000-0000-7000-8000-000000000001',
      projectId: '00000000-0000-7000-8000-000000000002',
      generation: 0,
    },
    { jobId: id, attempts: 1 },
  );
  await waitFor(async () => (await q.getJobState(id)) === 'failed', 10_000, `job ${id} failed`);
  await failing.close();
  connection.disconnect();
}

const retry = (id: string) =>
  request(api.app)
    .put(`/admin/queues/api/queues/webhook/${id}/retry`)
    .set('Accept', 'application/json')
    .set('Cookie', cookie);

test('a cross-site or same-site retry with the session cookie is refused with 403 and the job stays failed', async () => {
  await failedJob('csrf-1');
  const refused = [
    await retry('csrf-1').set('Sec-Fetch-Site', 'cross-site'),
    await retry('csrf-1').set('Sec-Fetch-Site', 'same-site'),
    await retry('csrf-1').set('Origin', 'https://evil.example'),
    await retry('csrf-1').set('Origin', 'null'),
    // Fetch Metadata wins over a forged-looking Origin either way.
    await retry('csrf-1').set('Sec-Fetch-Site', 'cross-site').set('Origin', 'http://mail.example.com'),
  ];
  for (const res of refused) {
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ success: false, error: { code: 'FORBIDDEN' } });
  }
  expect(await q.getJobState('csrf-1')).toBe('failed');
  // Also when the cookie is replaced by the bearer token: the check comes first.
  expect(
    (
      await request(api.app)
        .delete('/admin/queues/api/queues/webhook/csrf-1')
        .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
        .set('Sec-Fetch-Site', 'cross-site')
    ).status,
  ).toBe(403);
  expect(await q.getJobState('csrf-1')).toBe('failed');
});

test('same-origin calls (Sec-Fetch-Site same-origin, or Origin of the public URL or of the request) and header-less clients pass', async () => {
  await failedJob('csrf-2');
  expect((await retry('csrf-2').set('Sec-Fetch-Site', 'same-origin')).status).toBe(204);
  expect(await q.getJobState('csrf-2')).toBe('waiting');
  await q.remove('csrf-2');

  await failedJob('csrf-3');
  expect((await retry('csrf-3').set('Origin', 'http://mail.example.com')).status).toBe(204);
  await q.remove('csrf-3');

  await failedJob('csrf-4');
  // An operator on an internal name: the request's own origin (its Host) is this server too.
  expect(
    (await retry('csrf-4').set('Host', 'mailroom.internal:8080').set('Origin', 'http://mailroom.internal:8080')).status,
  ).toBe(204);
  expect(await q.getJobState('csrf-4')).toBe('waiting');
  await q.remove('csrf-4');

  await failedJob('csrf-5');
  expect(
    (
      await request(api.app)
        .put('/admin/queues/api/queues/webhook/csrf-5/retry')
        .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    ).status,
  ).toBe(204);
  expect(await q.getJobState('csrf-5')).toBe('waiting');
  await q.remove('csrf-5');
});

test('reads are not affected: a cross-site GET of the dashboard API still answers (SameSite keeps the cookie home)', async () => {
  const res = await request(api.app)
    .get('/admin/queues/api/queues')
    .set('Accept', 'application/json')
    .set('Cookie', cookie)
    .set('Sec-Fetch-Site', 'cross-site');
  expect(res.status).toBe(200);
});

test('login and logout from another site are refused (login CSRF), with no cookie set', async () => {
  const login = await request(api.app)
    .post('/admin/login')
    .set('Accept', 'application/json')
    .set('Sec-Fetch-Site', 'cross-site')
    .type('form')
    .send({ token: ADMIN_TOKEN });
  expect(login.status).toBe(403);
  expect(login.headers['set-cookie']).toBeUndefined();
  const viaOrigin = await request(api.app)
    .post('/admin/login')
    .set('Accept', 'application/json')
    .set('Origin', 'https://evil.example')
    .type('form')
    .send({ token: ADMIN_TOKEN });
  expect(viaOrigin.status).toBe(403);
  const logout = await request(api.app).post('/admin/logout').set('Cookie', cookie).set('Sec-Fetch-Site', 'cross-site');
  expect(logout.status).toBe(403);
  expect(logout.headers['set-cookie']).toBeUndefined();
  const ok = await request(api.app).post('/admin/logout').set('Cookie', cookie).set('Sec-Fetch-Site', 'same-origin');
  expect(ok.status).toBe(303);
});

test('the session cookie is Secure when PUBLIC_URL is https (any case), not when it is http', async () => {
  const plain = await request(api.app).post('/admin/login').type('form').send({ token: ADMIN_TOKEN });
  const plainCookie = (plain.headers['set-cookie'] as unknown as string[])[0];
  expect(plainCookie).toMatch(/HttpOnly/);
  expect(plainCookie).toMatch(/SameSite=Strict/);
  expect(plainCookie).not.toMatch(/;\s*Secure/i);
  for (const publicUrl of ['https://mail.example.com', 'HTTPS://Mail.Example.com/']) {
    const tls = await startTestApi(testConfig({ PUBLIC_URL: publicUrl, QUEUE_PREFIX: api.config.queuePrefix }));
    try {
      const res = await request(tls.app).post('/admin/login').type('form').send({ token: ADMIN_TOKEN });
      expect(res.status).toBe(303);
      const set = (res.headers['set-cookie'] as unknown as string[])[0];
      expect(set).toMatch(/;\s*Secure/);
      expect(set).toMatch(/SameSite=Strict/);
      expect(set).toMatch(/HttpOnly/);
      const out = await request(tls.app).post('/admin/logout').set('Origin', 'https://mail.example.com');
      expect(out.status).toBe(303);
      expect((out.headers['set-cookie'] as unknown as string[])[0]).toMatch(/;\s*Secure/);
    } finally {
      await tls.close();
    }
  }
});
