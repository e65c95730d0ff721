/**
 * Delivery connections on the operator surface: `GET /admin/connections` lists the configured ones (the implicit
 * `default` first, never their credentials) with the health the workers share in Redis; a project or a sending
 * domain is bound through `/admin/*` and through the CLI, an unknown name is a 422 naming `connection` and
 * changes nothing; `null` (CLI: `none`) unbinds.
 */
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { loadConfig } from '@mailroom/config/config';
import { domains, projects } from '@mailroom/db/schema';
import { connectionHealthKey } from '@mailroom/sending/ses/connection-health';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, createTestProject, startTestApi, testEnv, type TestApi } from '../support/harness';

const CONNECTIONS = JSON.stringify([
  { name: 'eu', region: 'eu-west-1', accessKeyId: 'AKIAEXAMPLE', secretAccessKey: 'not-shown' },
  { name: 'client-b', region: 'us-west-2', profile: 'client-b' },
]);
let env: Record<string, string>;
let api: TestApi;
beforeAll(async () => {
  env = testEnv({ SES_CONNECTIONS: CONNECTIONS });
  api = await startTestApi(loadConfig(env));
});
afterAll(async () => {
  await api.close();
});

const admin = {
  get: (p: string) => request(api.app).get(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
  put: (p: string, body: object) => request(api.app).put(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
};
const projectConnection = async (id: string) =>
  (await api.database.db.select({ c: projects.sesConnection }).from(projects).where(eq(projects.id, id)))[0].c;
const domainConnection = async (d: string) =>
  (await api.database.db.select({ c: domains.sesConnection }).from(domains).where(eq(domains.domain, d)))[0].c;

test('the connections are listed, default first, with their shared health and without credentials', async () => {
  await api.redis.hset(
    connectionHealthKey(api.config.queuePrefix, 'eu'),
    'since',
    String(Date.parse('2026-01-01T00:00:00Z')),
    'last',
    '1',
    'unhealthy',
    '1',
  );
  const res = await admin.get('/admin/connections');
  expect(res.status).toBe(200);
  expect(res.body.data.map((c: { name: string }) => c.name)).toEqual(['default', 'eu', 'client-b']);
  expect(res.body.data[0]).toEqual({
    name: 'default',
    region: 'us-east-1',
    endpoint: process.env.TEST_SES_ENDPOINT,
    healthy: true,
    failingSince: null,
  });
  expect(res.body.data[1]).toEqual({
    name: 'eu',
    region: 'eu-west-1',
    endpoint: null,
    healthy: false,
    failingSince: '2026-01-01T00:00:00.000Z',
  });
  expect(JSON.stringify(res.body)).not.toMatch(/not-shown|AKIAEXAMPLE/);
  expect((await request(api.app).get('/admin/connections')).status).toBe(401);
});

test('a project and a domain are bound and unbound; an unknown name is a 422 that changes nothing', async () => {
  const p = await createTestProject(api.database);
  const bound = await admin.put(`/admin/projects/${p.id}/connection`, { connection: 'eu' });
  expect(bound.status).toBe(200);
  expect(bound.body.data).toEqual({ projectId: p.id, connection: 'eu' });
  expect(await projectConnection(p.id)).toBe('eu');

  const bad = await admin.put(`/admin/projects/${p.id}/connection`, { connection: 'nowhere' });
  expect(bad.status).toBe(422);
  expect(bad.body.error.code).toBe('VALIDATION_ERROR');
  expect(bad.body.error.errors).toEqual([expect.objectContaining({ field: 'connection', code: 'invalid_enum_value' })]);
  expect(await projectConnection(p.id)).toBe('eu');

  const d = await admin.put(`/admin/domains/${p.domain.toUpperCase()}/connection`, { connection: 'client-b' });
  expect(d.status).toBe(200);
  expect(d.body.data).toEqual({ domain: p.domain, connection: 'client-b' });
  expect(await domainConnection(p.domain)).toBe('client-b');
  expect((await admin.put('/admin/domains/unknown.example.org/connection', { connection: 'eu' })).status).toBe(404);
  expect(
    (await admin.put(`/admin/projects/00000000-0000-4000-8000-000000000000/connection`, { connection: 'eu' })).status,
  ).toBe(404);

  expect(
    (await admin.put(`/admin/domains/${p.domain}/connection`, { connection: null })).body.data.connection,
  ).toBeNull();
  expect(await domainConnection(p.domain)).toBeNull();
});

test('the CLI binds a project and a domain, and `none` unbinds', async () => {
  const p = await createTestProject(api.database);
  expect(await runCli(['project', 'connection', '--project', p.id, '--connection', 'client-b'], env)).toEqual({
    projectId: p.id,
    connection: 'client-b',
  });
  expect(await projectConnection(p.id)).toBe('client-b');
  expect(await runCli(['domain', 'connection', '--domain', p.domain, '--connection', 'eu'], env)).toEqual({
    domain: p.domain,
    connection: 'eu',
  });
  expect(await domainConnection(p.domain)).toBe('eu');
  await expect(runCli(['domain', 'connection', '--domain', p.domain, '--connection', 'nowhere'], env)).rejects.toThrow(
    /connection/,
  );
  expect(await runCli(['project', 'connection', '--project', p.id, '--connection', 'none'], env)).toEqual({
    projectId: p.id,
    connection: null,
  });
  expect(await projectConnection(p.id)).toBeNull();
});
