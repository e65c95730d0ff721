/**
 * Operator surface: /admin/* (ADMIN_TOKEN) and the CLI, which share one implementation.
 */
import request from 'supertest';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { hashKey } from '@mailroom/projects/keys';
import { loadConfig } from '@mailroom/config/config';
import { apiKeys } from '@mailroom/db/schema/projects';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, recipient, startTestApi, testEnv, waitFor, type TestApi } from '../support/harness';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ KEY_ROTATION_GRACE_HOURS: '1' })));
});
afterAll(async () => {
  await api.close();
});

const admin = (app = api.app) => ({
  post: (p: string, body: object = {}) => request(app).post(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
  get: (p: string) => request(app).get(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
});
const templatesAs = (key: string, app = api.app) =>
  request(app).get('/templates').set('Authorization', `Bearer ${key}`);
const trackAs = (key: string) =>
  request(api.app)
    .post('/v1/track')
    .set('Authorization', `Bearer ${key}`)
    .send({ email: recipient(), event: 'signed-up' });
const sendAs = (key: string, domain: string) =>
  request(api.app)
    .post('/v1/send')
    .set('Authorization', `Bearer ${key}`)
    .send({ to: recipient(), from: `a@${domain}`, subject: 's', body: 'b' });

test('create a project, add a verified domain, send with its key', async () => {
  const created = await admin().post('/admin/projects', { name: 'Acme' });
  expect(created.status).toBe(201);
  expect(created.body.data).toMatchObject({
    name: 'Acme',
    disabled: false,
    publicKey: expect.stringMatching(/^pk_[\w-]{43}$/),
    secretKey: expect.stringMatching(/^sk_[\w-]{43}$/),
  });
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
  const rotated = (await runCli(['project', 'rotate-keys', '--project', created.body.data.id], env)) as {
    secretKey: string;
  };
  api.authCache.clear();
  const old = await request(api.app).get('/templates').set('Authorization', `Bearer ${created.body.data.secretKey}`);
  expect(old.status).toBe(401);
  expect((await request(api.app).get('/templates').set('Authorization', `Bearer ${rotated.secretKey}`)).status).toBe(
    200,
  );
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
  expect(
    (
      await request(api.app)
        .post('/admin/projects')
        .set('Authorization', 'Bearer wrong-token-xxxxxxxx')
        .send({ name: 'x' })
    ).status,
  ).toBe(401);
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
    const res = await request(off.app)
      .post('/admin/projects')
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ name: 'x' });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('FORBIDDEN');
  } finally {
    await off.close();
  }
});

test('the CLI, as an operator runs it: project create prints JSON keys; domain add verifies', async () => {
  const root = path.resolve(__dirname, '..', '..');
  const env = { ...process.env, ...testEnv() };
  const run = (args: string[]) =>
    promisify(execFile)('npm', ['run', '--silent', 'cli', '--', ...args], { cwd: root, env });
  const { stdout } = await run(['project', 'create', '--name', 'From CLI']);
  const project = JSON.parse(stdout) as { id: string; name: string; publicKey: string; secretKey: string };
  expect(project).toEqual({
    id: expect.any(String),
    name: 'From CLI',
    disabled: false,
    publicKey: expect.stringMatching(/^pk_/),
    secretKey: expect.stringMatching(/^sk_/),
    testPublicKey: expect.stringMatching(/^pk_test_/),
    testSecretKey: expect.stringMatching(/^sk_test_/),
  });
  const domain = `cli-${Date.now()}.example.com`;
  const added = JSON.parse(
    (await run(['domain', 'add', '--project', project.id, '--domain', domain, '--verified'])).stdout,
  );
  expect(added).toMatchObject({ domain, verified: true });
  expect((await sendAs(project.secretKey, domain)).status).toBe(202);
  await expect(run(['project', 'disable'])).rejects.toMatchObject({
    stderr: expect.stringContaining('--project ID is required'),
  });
}, 30_000);

describe('key revocation', () => {
  test('revoking the current secret key by its prefix refuses it at once and issues a replacement; the public key is untouched', async () => {
    const { body } = await admin().post('/admin/projects', { name: 'Leak' });
    const { id, secretKey, publicKey } = body.data as { id: string; secretKey: string; publicKey: string };
    expect((await templatesAs(secretKey)).status).toBe(200); // cached in this process
    const before = Date.now();
    const res = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: secretKey.slice(0, 10) });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      projectId: id,
      kind: 'secret',
      keyPrefix: secretKey.slice(0, 10),
      active: false,
      alreadyRevoked: false,
      expiresAt: null,
      replacementKey: expect.stringMatching(/^sk_[\w-]{43}$/),
    });
    expect(Date.parse(res.body.data.revokedAt)).toBeGreaterThanOrEqual(before - 5_000);
    const refused = await templatesAs(secretKey);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('UNAUTHORIZED');
    expect((await templatesAs(res.body.data.replacementKey)).status).toBe(200);
    expect((await trackAs(publicKey)).status).toBe(200);
    // The audit trail: the revoked key stays listed, with when it was revoked; the replacement is active.
    const keys = await admin().get(`/admin/projects/${id}/keys`);
    expect(keys.status).toBe(200);
    const listed = keys.body.data as {
      id: string;
      kind: string;
      keyPrefix: string;
      revokedAt: string | null;
      active: boolean;
    }[];
    expect(listed).toHaveLength(5); // the live pair, the test pair, the replacement
    expect(listed.find((k) => k.keyPrefix === secretKey.slice(0, 10))).toMatchObject({
      id: res.body.data.id,
      revokedAt: res.body.data.revokedAt,
      active: false,
    });
    expect(listed.find((k) => k.keyPrefix === res.body.data.replacementKey.slice(0, 10))).toMatchObject({
      kind: 'secret',
      revokedAt: null,
      active: true,
    });
    expect(JSON.stringify(listed)).not.toContain(secretKey);
  });

  test('by the whole key or by id; a repeat changes nothing; a key in its rotation grace period is ended with no replacement', async () => {
    const { body } = await admin().post('/admin/projects', { name: 'Grace' });
    const { id, publicKey, secretKey } = body.data as { id: string; publicKey: string; secretKey: string };
    const byKey = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: publicKey });
    expect(byKey.body.data).toMatchObject({
      kind: 'public',
      alreadyRevoked: false,
      replacementKey: expect.stringMatching(/^pk_/),
    });
    expect((await trackAs(publicKey)).status).toBe(401);
    const again = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: byKey.body.data.id });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({
      id: byKey.body.data.id,
      alreadyRevoked: true,
      revokedAt: byKey.body.data.revokedAt,
      replacementKey: null,
    });

    const rotated = await admin().post(`/admin/projects/${id}/rotate-keys`); // grace: KEY_ROTATION_GRACE_HOURS=1
    expect((await templatesAs(secretKey)).status).toBe(200);
    const graced = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: secretKey });
    expect(graced.body.data).toMatchObject({
      kind: 'secret',
      alreadyRevoked: false,
      replacementKey: null,
      expiresAt: expect.any(String),
    });
    expect((await templatesAs(secretKey)).status).toBe(401);
    expect((await templatesAs(rotated.body.data.secretKey)).status).toBe(200);
  });

  test('every API process refuses a revoked key within AUTH_CACHE_TTL_MS', async () => {
    const ttl = 2_000;
    const a = await startTestApi(loadConfig(testEnv({ AUTH_CACHE_TTL_MS: String(ttl) })));
    const b = await startTestApi(loadConfig(testEnv({ AUTH_CACHE_TTL_MS: String(ttl) })));
    try {
      const { body } = await admin(a.app).post('/admin/projects', { name: 'Two' });
      const key = body.data.secretKey as string;
      expect((await templatesAs(key, b.app)).status).toBe(200); // now in b's cache
      const revokedAt = Date.now();
      expect((await admin(a.app).post(`/admin/projects/${body.data.id}/keys/revoke`, { key })).status).toBe(200);
      expect((await templatesAs(key, a.app)).status).toBe(401);
      await waitFor(
        async () => (await templatesAs(key, b.app)).status === 401,
        ttl + 15_000,
        'the other process to refuse the key',
      );
      // Bound: the TTL plus the request that saw it (wide margin: a busy machine).
      expect(Date.now() - revokedAt).toBeLessThan(ttl + 15_000);
      // And it stays refused there.
      expect((await templatesAs(key, b.app)).status).toBe(401);
    } finally {
      await a.close();
      await b.close();
    }
  }, 60_000);

  test('the CLI revokes by prefix and lists keys; usage errors name what is missing', async () => {
    const { body } = await admin().post('/admin/projects', { name: 'CLI revoke' });
    const { id, secretKey } = body.data as { id: string; secretKey: string };
    const env = testEnv();
    const revoked = (await runCli(
      ['project', 'revoke-key', '--project', id, '--key', secretKey.slice(0, 10)],
      env,
    )) as { revokedAt: string; replacementKey: string };
    expect(revoked).toMatchObject({
      kind: 'secret',
      revokedAt: expect.any(String),
      replacementKey: expect.stringMatching(/^sk_/),
    });
    // A separate process: this API sees it once its cache entry lapses (or at once, never having cached it).
    api.authCache.clear();
    expect((await templatesAs(secretKey)).status).toBe(401);
    expect((await templatesAs(revoked.replacementKey)).status).toBe(200);
    const keys = (await runCli(['project', 'keys', '--project', id], env)) as {
      keyPrefix: string;
      revokedAt: string | null;
    }[];
    expect(keys.find((k) => k.keyPrefix === secretKey.slice(0, 10))?.revokedAt).toBe(revoked.revokedAt);
    await expect(runCli(['project', 'revoke-key', '--project', id], env)).rejects.toThrow('--key is required');
    await expect(runCli(['project', 'revoke-key', '--key', secretKey], env)).rejects.toThrow(
      '--project ID is required',
    );
    await expect(runCli(['project', 'revoke-key', '--project', id, '--key', 'nonsense'], env)).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
    });
  });

  test('errors: no token 401, unknown project 404, unknown key 404, shared prefix 409, not a key 422, body checked', async () => {
    const { body } = await admin().post('/admin/projects', { name: 'Errs' });
    const { id, secretKey } = body.data as { id: string; secretKey: string };
    expect((await request(api.app).post(`/admin/projects/${id}/keys/revoke`).send({ key: secretKey })).status).toBe(
      401,
    );
    expect((await request(api.app).get(`/admin/projects/${id}/keys`)).status).toBe(401);
    const unknown = '0190aaaa-0000-7000-8000-000000000000';
    expect((await admin().post(`/admin/projects/${unknown}/keys/revoke`, { key: secretKey })).status).toBe(404);
    expect((await admin().get(`/admin/projects/${unknown}/keys`)).status).toBe(404);
    const noKey = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: 'sk_' + 'x'.repeat(43) });
    expect(noKey.status).toBe(404);
    expect(noKey.body.error.code).toBe('NOT_FOUND');
    const bad = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: 'sk_short' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('key');
    const extra = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: secretKey, also: 1 });
    expect(extra.status).toBe(422);
    expect((await admin().post(`/admin/projects/not-a-uuid/keys/revoke`, { key: secretKey })).status).toBe(400);
    // Two keys of the project sharing a prefix (made here: 7 random characters rarely collide): name it in full.
    await api.database.db.insert(apiKeys).values({
      projectId: id,
      kind: 'secret',
      keyHash: hashKey(`sk_other_${Date.now()}`),
      keyPrefix: secretKey.slice(0, 10),
    });
    const ambiguous = await admin().post(`/admin/projects/${id}/keys/revoke`, { key: secretKey.slice(0, 10) });
    expect(ambiguous.status).toBe(409);
    expect(ambiguous.body.error.code).toBe('CONFLICT');
    expect((await templatesAs(secretKey)).status).toBe(200);
    expect((await admin().post(`/admin/projects/${id}/keys/revoke`, { key: secretKey })).status).toBe(200);
  });

  test('security: a key cannot be revoked through another project, and keeps working', async () => {
    const a = (await admin().post('/admin/projects', { name: 'A' })).body.data as { id: string; secretKey: string };
    const b = (await admin().post('/admin/projects', { name: 'B' })).body.data as { id: string; secretKey: string };
    for (const key of [a.secretKey, a.secretKey.slice(0, 10)]) {
      const res = await admin().post(`/admin/projects/${b.id}/keys/revoke`, { key });
      expect(res.status).toBe(404);
    }
    const aKeys = (await admin().get(`/admin/projects/${a.id}/keys`)).body.data as { id: string }[];
    expect((await admin().post(`/admin/projects/${b.id}/keys/revoke`, { key: aKeys[0].id })).status).toBe(404);
    expect((await templatesAs(a.secretKey)).status).toBe(200);
    expect((await templatesAs(b.secretKey)).status).toBe(200);
  });
});
