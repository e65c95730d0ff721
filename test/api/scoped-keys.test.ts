/**
 * Scoped keys: send-only secret keys (scope `sending`), optionally restricted to some sending domains, created
 * and listed through `/admin` and the CLI. Keys made before scopes keep full access.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { addDomain } from '@mailroom/projects/queries/projects';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, createTestProject, recipient, testEnv, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const admin = () => ({
  post: (p: string, body: object = {}) =>
    request(ctx.api.app).post(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
  get: (p: string) => request(ctx.api.app).get(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
});
const send = (key: string, from: string) =>
  request(ctx.api.app)
    .post('/v1/send')
    .set('Authorization', `Bearer ${key}`)
    .send({ to: recipient(), from, subject: 's', body: 'b' });

describe('happy path', () => {
  test('a send-only key created through /admin sends; the listing shows its scope; existing keys keep full access', async () => {
    const { p } = ctx;
    const created = await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'sending' });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      projectId: p.id,
      kind: 'secret',
      mode: 'live',
      scope: 'sending',
      allowedDomains: null,
      active: true,
      key: expect.stringMatching(/^sk_[\w-]{43}$/),
    });
    expect((await send(created.body.data.key, `a@${p.domain}`)).status).toBe(202);

    const keys = await admin().get(`/admin/projects/${p.id}/keys`);
    expect(keys.status).toBe(200);
    const scoped = keys.body.data.find((k: { id: string }) => k.id === created.body.data.id);
    expect(scoped).toMatchObject({
      scope: 'sending',
      allowedDomains: null,
      keyPrefix: created.body.data.key.slice(0, 10),
    });
    // Every key made before (the project's own pair) is full access: the migration's default.
    expect(
      keys.body.data
        .filter((k: { id: string }) => k.id !== created.body.data.id)
        .every((k: { scope: string }) => k.scope === 'full'),
    ).toBe(true);
    expect((await request(ctx.api.app).get('/templates').set('Authorization', p.auth)).status).toBe(200);
  });

  test('a key restricted to a domain sends from it and its subdomains', async () => {
    const { p } = ctx;
    const created = await admin().post(`/admin/projects/${p.id}/keys`, {
      scope: 'sending',
      domains: [p.domain.toUpperCase()],
    });
    expect(created.status).toBe(201);
    expect(created.body.data.allowedDomains).toEqual([p.domain]);
    expect((await send(created.body.data.key, `a@${p.domain}`)).status).toBe(202);
    expect((await send(created.body.data.key, `a@mail.${p.domain}`)).status).toBe(202);
  });

  test('a test-mode scoped key (sk_test_)', async () => {
    const created = await admin().post(`/admin/projects/${ctx.p.id}/keys`, { scope: 'sending', mode: 'test' });
    expect(created.body.data.key).toMatch(/^sk_test_/);
    expect(created.body.data.mode).toBe('test');
    expect((await send(created.body.data.key, `a@${ctx.p.domain}`)).status).toBe(202);
  });
});

describe('scope enforcement (403 naming the scope)', () => {
  test('a send-only key on any other route: 403 KEY_SCOPE_FORBIDDEN, nothing done', async () => {
    const { p } = ctx;
    const key = (await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'sending' })).body.data.key as string;
    const as = (r: request.Test) => r.set('Authorization', `Bearer ${key}`);
    for (const res of [
      await as(request(ctx.api.app).get('/templates')),
      await as(request(ctx.api.app).get('/contacts')),
      await as(request(ctx.api.app).post('/contacts')).send({ email: recipient() }),
      await as(request(ctx.api.app).post('/v1/track')).send({ email: recipient(), event: 'x' }),
      await as(request(ctx.api.app).get('/emails/00000000-0000-7000-8000-000000000000/raw')),
    ]) {
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('KEY_SCOPE_FORBIDDEN');
      expect(res.body.error.message).toMatch(/sending/);
    }
  });

  test("a from outside the key's domains: 403 KEY_DOMAIN_FORBIDDEN naming the domain, even when verified for the project", async () => {
    const { p } = ctx;
    const other = `o${randomBytes(4).toString('hex')}.example.com`;
    await addDomain(ctx.api.database.db, p.id, other, true);
    const key = (await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'sending', domains: [p.domain] })).body
      .data.key as string;
    const res = await send(key, `a@${other}`);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('KEY_DOMAIN_FORBIDDEN');
    expect(res.body.error.message).toContain(other);
    // A suffix that is not a subdomain is not covered.
    expect((await send(key, `a@x${p.domain}`)).body.error.code).toBe('KEY_DOMAIN_FORBIDDEN');
    // The full-access key of the same project still sends from it.
    expect((await send(p.secretKey, `a@${other}`)).status).toBe(202);
  });
});

describe('errors', () => {
  test('domains not of the project, malformed or empty: 422 naming the item; unknown project 404; wrong scope 422', async () => {
    const { p } = ctx;
    const r1 = await admin().post(`/admin/projects/${p.id}/keys`, {
      scope: 'sending',
      domains: ['elsewhere.example.org', 'not a domain'],
    });
    expect(r1.status).toBe(422);
    expect(r1.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['domains.0', 'domains.1']);
    const r2 = await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'sending', domains: [] });
    expect(r2.status).toBe(422);
    expect(r2.body.error.errors[0].field).toBe('domains');
    expect(
      (await admin().post('/admin/projects/00000000-0000-7000-8000-000000000000/keys', { scope: 'sending' })).status,
    ).toBe(404);
    const r3 = await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'everything' });
    expect(r3.status).toBe(422);
    expect((await request(ctx.api.app).post(`/admin/projects/${p.id}/keys`).send({ scope: 'sending' })).status).toBe(
      401,
    );
  });

  test('security: a domain of another project cannot be put on a key', async () => {
    const other = await createTestProject(ctx.api.database);
    const r = await admin().post(`/admin/projects/${ctx.p.id}/keys`, { scope: 'sending', domains: [other.domain] });
    expect(r.status).toBe(422);
    expect(r.body.error.errors[0]).toMatchObject({
      field: 'domains.0',
      message: expect.stringContaining('not a domain of this project'),
    });
  });
});

describe('lifecycle', () => {
  test('revoking a scoped key issues a replacement with the same scope and domains; rotation leaves scoped keys alone', async () => {
    const { p } = ctx;
    const created = (await admin().post(`/admin/projects/${p.id}/keys`, { scope: 'sending', domains: [p.domain] })).body
      .data;
    const revoked = await admin().post(`/admin/projects/${p.id}/keys/revoke`, { key: created.id });
    expect(revoked.status).toBe(200);
    const replacement = revoked.body.data.replacementKey as string;
    const other = `o${randomBytes(4).toString('hex')}.example.com`;
    await addDomain(ctx.api.database.db, p.id, other, true);
    expect((await send(replacement, `a@${p.domain}`)).status).toBe(202);
    expect((await send(replacement, `a@${other}`)).body.error.code).toBe('KEY_DOMAIN_FORBIDDEN');
    expect(
      (await request(ctx.api.app).get('/templates').set('Authorization', `Bearer ${replacement}`)).body.error.code,
    ).toBe('KEY_SCOPE_FORBIDDEN');

    const rotated = await admin().post(`/admin/projects/${p.id}/rotate-keys`);
    expect(rotated.status).toBe(200);
    const keys = (await admin().get(`/admin/projects/${p.id}/keys`)).body.data as {
      scope: string;
      expiresAt: string | null;
      revokedAt: string | null;
      keyPrefix: string;
    }[];
    const live = keys.find((k) => k.keyPrefix === replacement.slice(0, 10))!;
    expect(live).toMatchObject({ scope: 'sending', expiresAt: null, revokedAt: null });
  });
});

describe('CLI', () => {
  test('project create-key prints the key once; project keys lists its scope; usage errors name what is missing', async () => {
    const { p } = ctx;
    const env = testEnv();
    const made = (await runCli(
      ['project', 'create-key', '--project', p.id, '--scope', 'sending', '--domains', `${p.domain}, `],
      env,
    )) as { key: string; scope: string; allowedDomains: string[] };
    expect(made).toMatchObject({ scope: 'sending', allowedDomains: [p.domain], key: expect.stringMatching(/^sk_/) });
    ctx.api.authCache.clear();
    expect((await send(made.key, `a@${p.domain}`)).status).toBe(202);
    const listed = (await runCli(['project', 'keys', '--project', p.id], env)) as {
      keyPrefix: string;
      scope: string;
      allowedDomains: string[] | null;
    }[];
    expect(listed.find((k) => k.keyPrefix === made.key.slice(0, 10))).toMatchObject({
      scope: 'sending',
      allowedDomains: [p.domain],
    });
    await expect(runCli(['project', 'create-key', '--project', p.id], env)).rejects.toThrow(
      '--scope sending is required',
    );
    await expect(
      runCli(['project', 'create-key', '--project', p.id, '--scope', 'sending', '--mode', 'x'], env),
    ).rejects.toThrow('--mode must be live or test');
    await expect(
      runCli(['project', 'create-key', '--project', p.id, '--scope', 'sending', '--domains', 'nope.example.org'], env),
    ).rejects.toMatchObject({ code: 'VALIDATION_ERROR' });
  });
});
