/**
 * Cross-cutting HTTP behaviour: health probes, OpenAPI and docs, unknown routes, rate limits, unavailable
 * backing services, unexpected errors.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import express from 'express';
import request from 'supertest';
import { loadConfig } from '@mailroom/config/config';
import { errorHandler } from '../../apps/api/src/http/errors';
import { createTestProject, startTestApi, testEnv, type TestApi } from '../support/harness';
import { createApp } from '../../apps/api/src/app';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { createDatabase } from '@mailroom/db/client';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ RATE_LIMIT_PER_MINUTE: '3' })));
});
afterAll(async () => {
  await api.close();
});

test('health: live and ready', async () => {
  expect((await request(api.app).get('/health/live')).body).toEqual({ success: true, data: { status: 'ok' } });
  const ready = await request(api.app).get('/health/ready');
  expect(ready.status).toBe(200);
  expect(ready.body.data.checks).toEqual({ postgres: 'ok', redis: 'ok', redisEvictionPolicy: 'ok' });
});

test('every pooled connection runs without JIT compilation, whatever the server default', async () => {
  const clients = await Promise.all([api.database.pool.connect(), api.database.pool.connect()]);
  try {
    for (const c of clients) expect((await c.query<{ jit: string }>('show jit')).rows[0].jit).toBe('off');
  } finally {
    for (const c of clients) c.release();
  }
});

test('OpenAPI document is generated from the route schemas; /docs works offline', async () => {
  const doc = (await request(api.app).get('/openapi.json')).body;
  expect(doc.openapi).toBe('3.1.0');
  // The checked-in docs/openapi.json is this document (its server URL aside).
  const file = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'docs', 'openapi.json'), 'utf8'));
  expect({ ...doc, servers: [] }).toEqual({ ...file, servers: [] });
  expect(Object.keys(doc.paths)).toEqual(
    expect.arrayContaining([
      '/v1/send',
      '/templates',
      '/templates/{id}',
      '/emails/{id}',
      '/admin/projects',
      '/segments/preview',
      '/campaigns/{id}/send',
      '/unsubscribe/{token}',
      '/workflows/{id}/graph',
      '/workflows/{id}/executions/{executionId}/cancel',
      '/v1/verify',
      '/v1/verify/batch',
      '/domains',
      '/domains/{id}/verify',
    ]),
  );
  const send = doc.paths['/v1/send'].post;
  expect(send.requestBody.content['application/json'].schema.properties.to).toBeDefined();
  expect(send.requestBody.content['application/json'].schema.additionalProperties).toBe(false);
  expect(Object.keys(send.responses)).toEqual(expect.arrayContaining(['202', '401', '403', '422', '429']));
  expect(doc.paths['/templates'].get.parameters.map((x: { name: string }) => x.name)).toEqual(
    expect.arrayContaining(['limit', 'cursor', 'page', 'type', 'search']),
  );
  const page = await request(api.app).get('/docs');
  expect(page.status).toBe(200);
  expect(page.text).toContain('/docs/assets/swagger-ui-bundle.js');
  expect(page.text).not.toMatch(/https?:\/\/(?!localhost)/);
  const bundle = await request(api.app).get('/docs/assets/swagger-ui-bundle.js');
  expect(bundle.status).toBe(200);
  expect(bundle.text.length).toBeGreaterThan(100_000);
});

test('unknown routes are 404 in the error envelope', async () => {
  const res = await request(api.app).get('/nope');
  expect(res.status).toBe(404);
  expect(res.body).toMatchObject({ success: false, code: 'NOT_FOUND', error: { statusCode: 404, retryable: false } });
});

test('rate limit per project: RateLimit-* headers, then 429 with Retry-After; other projects unaffected', async () => {
  const p = await createTestProject(api.database);
  const q = await createTestProject(api.database);
  const get = (auth: string) => request(api.app).get('/templates').set('Authorization', auth);
  const remaining: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await get(p.auth);
    expect(res.status).toBe(200);
    expect(res.headers['ratelimit-limit']).toBe('3');
    remaining.push(res.headers['ratelimit-remaining']);
    expect(Number(res.headers['ratelimit-reset'])).toBeGreaterThan(0);
  }
  expect(remaining).toEqual(['2', '1', '0']);
  const limited = await get(p.auth);
  expect(limited.status).toBe(429);
  expect(limited.body.error).toMatchObject({ code: 'RATE_LIMITED', statusCode: 429, retryable: true });
  expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
  expect((await get(q.auth)).status).toBe(200);
});

test('503 SERVICE_UNAVAILABLE when Postgres is unreachable; readiness names what is down', async () => {
  const config = loadConfig(testEnv({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }));
  const database = createDatabase({ url: config.databaseUrl, poolSize: 1, applicationName: 'test-down' });
  const redis = createRedis(config, 'producer');
  const queues = createQueues(config, redis);
  const { app } = createApp({ config, database, redis, queues, logger: createLogger(config, 'api') });
  try {
    const res = await request(app)
      .get('/templates')
      .set('Authorization', `Bearer sk_${'x'.repeat(43)}`);
    expect(res.status).toBe(503);
    expect(res.body.error).toMatchObject({ code: 'SERVICE_UNAVAILABLE', retryable: true });
    const ready = await request(app).get('/health/ready');
    expect(ready.status).toBe(503);
    expect(ready.body.data.checks.postgres).toMatch(/^error/);
  } finally {
    await queues.closeAll();
    redis.disconnect();
    await database.close();
  }
});

test('500 INTERNAL_ERROR leaks no internals', async () => {
  const app = express();
  app.use((_req, res, next) => {
    res.locals.requestId = 'rid-1';
    next();
  });
  app.get('/boom', () => {
    throw new Error('relation "secret_table" does not exist at SELECT * FROM secret_table');
  });
  app.use(errorHandler);
  const res = await request(app).get('/boom');
  expect(res.status).toBe(500);
  expect(res.body).toMatchObject({
    success: false,
    code: 'INTERNAL_ERROR',
    message: 'Internal server error',
    error: { requestId: 'rid-1', retryable: true },
  });
  expect(JSON.stringify(res.body)).not.toContain('secret_table');
});
