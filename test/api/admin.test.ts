/**
 * Operator surface: /admin/* (ADMIN_TOKEN) and the CLI, which share one implementation.
 */
import request from 'supertest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig } from '@mailroom/core';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, recipient, startTestApi, testEnv, type TestApi } from '../support/harness';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ KEY_ROTATION_GRACE_HOURS: '1' })));
});
afterAll(async () => {
  await api.close();
});

const admin = () => ({
  post: (p: string, body: object = {}) => request(api.app).post(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
});
const sendAs = (key: string, domain: string) =>
  request(api.app).post('/v1/send').set('Authorization', `Bearer ${key}`).send({ to: recipient(), from: `a@${domain}`, subject: 's', body: 'b' });

test('create a project, add a verified domain, send with its key', async () => {
  const created = await admin().post('/admin/projects', { name: 'Acme' });
  expect(created.status).toBe(201);
  expect(created.body.data).toMatchObject({ name: 'Acme', disabled: false, publicKey: expect.stringMatching(/^pk_[\w-]{43}$/), secretKey: expect.stringMatching(/^sk_[\w-]{43}$/) });
  const id = created.body.data.id;
  const domain = `acme-${Date.now()}.example.com`;
  const d = await admin().post(`/admin/projects/${id}/domains`, { domain: domain.toUpperCase(), verified: true });
  expect(d.status).toBe(201);
  expect(d.body.data).toMatchObject({ domain, verified: true, projectId: id });
  expect((await sendAs(created.body.data.secretKey, domain)).status).toBe(202);
});

test('rotating keys keeps the old key during the grace period and issues working new ones', async () => {
  const created = await admin().post('/admin/projects', { name: 'Rot' });
  const id = created.body.data.id;
  const domain = `rot-${Date.now()}.example.com`;
  await admin().post(`/admin/projects/${id}/domains`, { domain, verified: true });
  const rotated = await admin().post(`/admin/projects/${id}/rotate-keys`);
  expect(rotated.status).toBe(200);
  expect(rotated.body.data.secretKey).not.toBe(created.body.data.secretKey);
  expect((await sendAs(created.body.data.secretKey, domain)).status).toBe(202);
  expect((await sendAs(rotated.body.data.secretKey, domain)).status).toBe(202);
});

test('rotation with no grace revokes the old key at once', async () => {
  const created = await admin().post('/admin/projects', { name: 'NoGrace' });
  const env = testEnv({ KEY_ROTATION_GRACE_HOURS: '0' });
  const rotated = (await runCli(['project', 'rotate-keys', '--project', created.body.data.id], env)) as { secretKey: string };
  api.authCache.clear();
  const old = await request(api.app).get('/templates').set('Authorization', `Bearer ${created.body.data.secretKey}`);
  expect(old.status).toBe(401);
  expect((await request(api.app).get('/templates').set('Authorization', `Bearer ${rotated.secretKey}`)).status).toBe(200);
});

test('disable and enable', async () => {
  const created = await admin().post('/admin/projects', { name: 'Dis' });
  const key = created.body.data.secretKey;
  expect((await request(api.app).get('/templates').set('Authorization', `Bearer ${key}`)).status).toBe(200);
  const dis = await admin().post(`/admin/projects/${created.body.data.id}/disable`);
  expect(dis.body.data).toMatchObject({ disabled: true });
  const refused = await request(api.app).get('/templates').set('Authorization', `Bearer ${key}`);
  expect(refused.status).toBe(403);
  expect(refused.body.error.code).toBe('PROJECT_DISABLED');
  await admin().post(`/admin/projects/${created.body.data.id}/enable`);
  expect((await request(api.app).get('/templates').set('Authorization', `Bearer ${key}`)).status).toBe(200);
});

test('errors: bad token 401, unknown project 404, domain of another project 409, bad domain 422', async () => {
  expect((await request(api.app).post('/admin/projects').send({ name: 'x' })).status).toBe(401);
  expect((await request(api.app).post('/admin/projects').set('Authorization', 'Bearer wrong-token-xxxxxxxx').send({ name: 'x' })).status).toBe(401);
  const unknown = '0190aaaa-0000-7000-8000-000000000000';
  expect((await admin().post(`/admin/projects/${unknown}/disable`)).status).toBe(404);
  expect((await admin().post(`/admin/projects/${unknown}/domains`, { domain: 'x.example.com' })).status).toBe(404);
  const a = await admin().post('/admin/projects', { name: 'A' });
  const b = await admin().post('/admin/projects', { name: 'B' });
  const domain = `shared-${Date.now()}.example.com`;
  expect((await admin().post(`/admin/projects/${a.body.data.id}/domains`, { domain })).status).toBe(201);
  const taken = await admin().post(`/admin/projects/${b.body.data.id}/domains`, { domain });
  expect(taken.status).toBe(409);
  expect(taken.body.error.code).toBe('CONFLICT');
  const bad = await admin().post(`/admin/projects/${a.body.data.id}/domains`, { domain: 'not a domain' });
  expect(bad.status).toBe(422);
  expect(bad.body.error.errors[0].field).toBe('domain');
});

test('admin routes are off without ADMIN_TOKEN', async () => {
  const off = await startTestApi(loadConfig({ ...testEnv(), ADMIN_TOKEN: '' }));
  try {
    const res = await request(off.app).post('/admin/projects').set('Authorization', `Bearer ${ADMIN_TOKEN}`).send({ name: 'x' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
  } finally {
    await off.close();
  }
});

test('the CLI, as an operator runs it: project create prints JSON keys; domain add verifies', async () => {
  const root = path.resolve(__dirname, '..', '..');
  const env = { ...process.env, ...testEnv() };
  const run = (args: string[]) => promisify(execFile)('npm', ['run', '--silent', 'cli', '--', ...args], { cwd: root, env });
  const { stdout } = await run(['project', 'create', '--name', 'From CLI']);
  const project = JSON.parse(stdout) as { id: string; name: string; publicKey: string; secretKey: string };
  expect(project).toEqual({ id: expect.any(String), name: 'From CLI', disabled: false, publicKey: expect.stringMatching(/^pk_/), secretKey: expect.stringMatching(/^sk_/) });
  const domain = `cli-${Date.now()}.example.com`;
  const added = JSON.parse((await run(['domain', 'add', '--project', project.id, '--domain', domain, '--verified'])).stdout);
  expect(added).toMatchObject({ domain, verified: true });
  expect((await sendAs(project.secretKey, domain)).status).toBe(202);
  await expect(run(['project', 'disable'])).rejects.toMatchObject({ stderr: expect.stringContaining('--project ID is required') });
}, 30_000);
