/**
 * The queue dashboard's API while Redis is down: 503 `SERVICE_UNAVAILABLE` with the standard error body and
 * `Retry-After`, like every other route, and back to 200 once Redis is back. The test runs a redis-server of its
 * own on a free port (Debian's redis-server), which it stops and starts again.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import request from 'supertest';
import { QUEUE_KEYS, queueCatalog } from '@mailroom/queues/catalog';
import { ADMIN_TOKEN, exited, startTestApi, testConfig, waitFor, type TestApi } from '../support/harness';
import { freePort } from '../support/services';

let port: number;
let redis: ChildProcess | undefined;
let api: TestApi;

async function startRedis(): Promise<void> {
  redis = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const ping = () =>
    spawnSync('redis-cli', ['-p', String(port), 'ping'], { encoding: 'utf8', timeout: 5_000 }).stdout?.trim() ===
    'PONG';
  await waitFor(
    async () => ping(),
    10_000,
    `redis-server on port ${port} (this test needs Debian's redis-server and redis-cli)`,
  );
}

async function stopRedis(): Promise<void> {
  if (!redis) return;
  redis.kill('SIGKILL');
  await exited(redis);
  redis = undefined;
}

beforeAll(async () => {
  port = await freePort();
  await startRedis();
  api = await startTestApi(testConfig({ REDIS_URL: `redis://127.0.0.1:${port}` }));
});
afterAll(async () => {
  await api?.close();
  await stopRedis();
});

const queues = () =>
  request(api.app)
    .get('/admin/queues/api/queues')
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .set('Accept', 'application/json');

test('503 SERVICE_UNAVAILABLE with the standard body while Redis is down, 200 again once it is back', async () => {
  const up = await queues();
  expect(up.status).toBe(200);
  expect(up.body.queues.map((q: { name: string }) => q.name).sort()).toEqual(
    QUEUE_KEYS.map((k) => queueCatalog[k].name).sort(),
  );

  await stopRedis();
  await waitFor(async () => api.redis.status !== 'ready', 10_000, 'the API to notice Redis is gone');
  const down = await queues();
  expect(down.status).toBe(503);
  expect(down.body).toMatchObject({
    success: false,
    code: 'SERVICE_UNAVAILABLE',
    error: { code: 'SERVICE_UNAVAILABLE', statusCode: 503, requestId: expect.any(String) },
    timestamp: expect.any(String),
  });
  expect(down.body.error.message).not.toMatch(/ECONNREFUSED|127\.0\.0\.1|stack/i);
  expect(Number(down.headers['retry-after'])).toBeGreaterThanOrEqual(1);
  // Another API call of the dashboard, and still 401 without the token: auth comes first.
  expect(
    (await request(api.app).get('/admin/queues/api/redis/stats').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).status,
  ).toBe(503);
  expect((await request(api.app).get('/admin/queues/api/queues').set('Accept', 'application/json')).status).toBe(401);

  await startRedis();
  await waitFor(async () => (await queues()).status === 200, 20_000, 'the dashboard API to answer again');
}, 60_000);
