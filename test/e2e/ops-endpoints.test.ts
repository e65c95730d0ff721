/**
 * The operator endpoints a cluster relies on:
 * - `METRICS_TOKEN`: the worker's `/metrics` requires it once set (its probes stay open), and the API's `/metrics`
 *   takes it beside `ADMIN_TOKEN`, through the one bearer check both share;
 * - the metrics the alert rules and the dashboard need that had no series before: the oldest waiting job's age per
 *   queue, PAUSED campaigns by reason, SES events received through SNS;
 * - Redis's `maxmemory-policy`: against a redis-server of the test's own set to `allkeys-lru`, the worker logs an
 *   error at start and exports the policy, and both readiness bodies say so while staying ready (200).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import pino from 'pino';
import { sql } from 'drizzle-orm';
import request from 'supertest';
import { loadConfig } from '@mailroom/config/config';
import { createRedis } from '@mailroom/queues/connection';
import { createDatabase } from '@mailroom/db/client';
import { createCampaign } from '@mailroom/campaigns/queries/campaigns';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { oldestWaitingSeconds, WorkerMetrics } from '../../apps/worker/src/metrics';
import {
  ADMIN_TOKEN,
  createTestProject,
  exited,
  isolatedDatabase,
  startTestApi,
  testEnv,
  uniquePrefix,
  waitFor,
  type TestApi,
} from '../support/harness';
import { useE2e } from '../support/e2e';
import { which } from '../support/provision';
import { freePort } from '../support/services';
import { sesEvent, startSnsHarness } from '../support/sns';
import { redisPing } from '../chaos/survival';

const METRICS_TOKEN = 'test-metrics-token-0123456789';
const REDIS_SERVER =
  which('redis-server') ?? ['/usr/bin/redis-server', '/usr/local/bin/redis-server'].find((p) => existsSync(p));

describe('METRICS_TOKEN', () => {
  const e2e = useE2e({ env: { METRICS_TOKEN }, worker: { healthPort: 0 } });
  let api: TestApi;
  let worker: RunningWorker;
  beforeAll(() => {
    ({ api, worker } = e2e);
  });

  test("the worker's /metrics requires it; its probes stay open", async () => {
    const url = `http://127.0.0.1:${worker.healthPort}`;
    const none = await fetch(`${url}/metrics`);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toMatch(/^Bearer/);
    expect((await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).status).toBe(401);
    const ok = await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.status).toBe(200);
    expect(await ok.text()).toContain('# HELP mailroom_queue_jobs');
    expect((await fetch(`${url}/health/live`)).status).toBe(200);
    expect((await fetch(`${url}/health/ready`)).status).toBe(200);
  });

  test("the API's /metrics takes it beside ADMIN_TOKEN; a wrong token is 401", async () => {
    const scrape = (token: string) => request(api.app).get('/metrics').set('Authorization', `Bearer ${token}`);
    const withMetricsToken = await scrape(METRICS_TOKEN);
    expect(withMetricsToken.status).toBe(200);
    expect(withMetricsToken.text).toContain('# HELP mailroom_http_requests_total');
    // The API's own Postgres pool, as the worker's are.
    expect(withMetricsToken.text).toMatch(/^mailroom_db_pool_connections\{pool="main",state="total"\} \d+$/m);
    expect((await scrape(ADMIN_TOKEN)).status).toBe(200);
    expect((await scrape('wrong-token-0123456789')).status).toBe(401);
    // The metrics token opens /metrics only, not the admin API.
    expect((await request(api.app).get('/admin/stats').set('Authorization', `Bearer ${METRICS_TOKEN}`)).status).toBe(
      401,
    );
  });

  test('without either token the API refuses /metrics (403)', async () => {
    const bare = await startTestApi(loadConfig({ ...testEnv(), ADMIN_TOKEN: '' }));
    try {
      const res = await request(bare.app).get('/metrics');
      expect(res.status).toBe(403);
      expect(res.body.error.message).toMatch(/METRICS_TOKEN/);
    } finally {
      await bare.close();
    }
  });
});

test('mailroom_queue_oldest_waiting_seconds: the job next in line, plain or prioritized; 0 when none waits', async () => {
  const redis = createRedis(loadConfig(testEnv()), 'worker');
  const plain = new Queue('age-plain', { connection: redis, prefix: uniquePrefix() });
  const prioritized = new Queue('age-prioritized', { connection: redis, prefix: uniquePrefix() });
  try {
    expect(await oldestWaitingSeconds(plain)).toBe(0);
    const now = Date.now();
    // Added first, so next in line (FIFO), and created 10 minutes ago; the one after it is new.
    await plain.add('first', {}, { timestamp: now - 600_000 });
    await plain.add('second', {}, { timestamp: now });
    await prioritized.add('first', {}, { priority: 2, timestamp: now - 300_000 });
    await prioritized.add('second', {}, { priority: 2, timestamp: now });
    const plainAge = await oldestWaitingSeconds(plain, now);
    const prioritizedAge = await oldestWaitingSeconds(prioritized, now);
    expect(plainAge).toBe(600);
    expect(prioritizedAge).toBe(300);
    await plain.obliterate({ force: true });
    expect(await oldestWaitingSeconds(plain)).toBe(0);
  } finally {
    await plain.close();
    await prioritized.close();
    redis.disconnect();
  }
});

test('mailroom_campaigns_paused{reason}: every reason has a series; a paused campaign counts under its reason', async () => {
  const iso = await isolatedDatabase();
  const database = createDatabase({ url: iso.url, poolSize: 2, applicationName: 'test-paused-gauge' });
  try {
    const metrics = new WorkerMetrics([], database);
    const series = async () =>
      (await metrics.registry.getSingleMetricAsString('mailroom_campaigns_paused'))
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .sort();
    expect(await series()).toEqual([
      'mailroom_campaigns_paused{reason="bounce_rate"} 0',
      'mailroom_campaigns_paused{reason="complaint_rate"} 0',
      'mailroom_campaigns_paused{reason="quota"} 0',
    ]);
    const p = await createTestProject(database);
    const c = await createCampaign(database.db, p.id, {
      name: 'n',
      subject: 's',
      body: 'b',
      fromEmail: `m@${p.domain}`,
      audienceType: 'ALL',
    });
    await database.db.execute(
      sql`update campaigns set status = 'PAUSED', paused_reason = 'complaint_rate', paused_at = now() where id = ${c.id}::uuid`,
    );
    expect(await series()).toContain('mailroom_campaigns_paused{reason="complaint_rate"} 1');
  } finally {
    await database.close();
    await iso.drop();
  }
});

describe('Redis with maxmemory-policy allkeys-lru', () => {
  let redisServer: ChildProcess;
  let port: number;
  let api: TestApi;
  let worker: RunningWorker;
  const lines: string[] = [];

  beforeAll(async () => {
    if (!REDIS_SERVER)
      throw new Error(
        'redis-server not found on PATH nor in /usr/bin: this test needs it (Debian: apt-get install redis-server)',
      );
    port = await freePort();
    redisServer = spawn(
      REDIS_SERVER,
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--maxmemory-policy',
        'allkeys-lru',
      ],
      { stdio: 'ignore' },
    );
    await waitFor(
      async () => (await redisPing(port)) || redisServer.exitCode !== null,
      10_000,
      `redis-server on port ${port}`,
    );
    if (redisServer.exitCode !== null) throw new Error(`redis-server exited with ${redisServer.exitCode}`);
    const env = testEnv({ REDIS_URL: `redis://127.0.0.1:${port}` });
    api = await startTestApi(loadConfig(env));
    const config = loadConfig({ ...env, LOG_LEVEL: 'info' });
    const logger = pino(
      { level: 'info' },
      new Writable({ write: (chunk: Buffer, _enc, done) => (lines.push(chunk.toString()), done()) }),
    );
    worker = await startWorker(config, { healthPort: 0, logger });
  });
  afterAll(async () => {
    await worker?.stop();
    await api?.close();
    if (redisServer && redisServer.exitCode === null) {
      redisServer.kill('SIGTERM');
      await exited(redisServer);
    }
  });

  test('the worker logs an error at start and exports the policy', async () => {
    const errors = lines
      .map((l) => JSON.parse(l) as { level: number; msg: string; maxmemoryPolicy?: string[] })
      .filter((l) => l.level === 50);
    expect(errors).toEqual([
      expect.objectContaining({
        maxmemoryPolicy: ['allkeys-lru'],
        msg: expect.stringMatching(/maxmemory-policy is allkeys-lru, not noeviction/),
      }),
    ]);
    const text = await (await fetch(`http://127.0.0.1:${worker.healthPort}/metrics`)).text();
    expect(text).toMatch(/^mailroom_redis_maxmemory_policy\{policy="allkeys-lru"\} 1$/m);
  });

  test('both readiness bodies say so and stay ready (200)', async () => {
    const apiReady = await request(api.app).get('/health/ready');
    expect(apiReady.status).toBe(200);
    expect(apiReady.body.data.checks.redisEvictionPolicy).toMatch(
      /^warning: Redis maxmemory-policy is allkeys-lru, not noeviction/,
    );
    const workerReady = await fetch(`http://127.0.0.1:${worker.healthPort}/health/ready`);
    expect(workerReady.status).toBe(200);
    expect(((await workerReady.json()) as { redisEvictionPolicy: string }).redisEvictionPolicy).toMatch(
      /^warning: .*allkeys-lru/,
    );
  });
});

test('mailroom_ses_events_total{event,bounce_type}: each SNS message counted once, bounces by type; the answer is unchanged', async () => {
  const sns = await startSnsHarness();
  const api = await startTestApi(
    loadConfig(testEnv({ SNS_TOPIC_ARNS: sns.topicArn, SNS_CERT_HOSTS: `sns.*.amazonaws.com,${sns.certHost}` })),
  );
  const post = (m: object) =>
    request(api.app).post('/webhooks/ses').set('Content-Type', 'text/plain; charset=UTF-8').send(JSON.stringify(m));
  const count = async (series: string) => {
    const text = (await request(api.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).text;
    return Number(new RegExp(`^mailroom_ses_events_total\\{${series}\\} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  };
  try {
    // Series exist before the first event, at 0.
    expect(await count('event="bounced",bounce_type="Permanent"')).toBe(0);
    expect(await count('event="complained",bounce_type=""')).toBe(0);
    const mail = { messageId: `unknown-${Date.now()}`, to: 'nobody@example.test' };
    const bounce = sns.notification(sesEvent('Bounce', mail, { bounceType: 'Permanent' }));
    const first = await post(bounce);
    expect(first.status).toBe(200);
    expect(first.body.data).not.toHaveProperty('event');
    expect((await post(bounce)).body.data.duplicate).toBe(true);
    expect((await post(sns.notification(sesEvent('Complaint', mail)))).status).toBe(200);
    expect(await count('event="bounced",bounce_type="Permanent"')).toBe(1);
    expect(await count('event="complained",bounce_type=""')).toBe(1);
  } finally {
    await api.close();
    await sns.close();
  }
});
