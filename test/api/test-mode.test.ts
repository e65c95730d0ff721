/**
 * Test mode, API side: test keys (issued beside the live ones, rotated and revoked per mode, imported), the mode a
 * request carries, test data (`emails.test`, `campaigns.test`) and `GET /emails/{id}/raw`. The worker side (the
 * sink, webhooks, MIME identical to live) is `test/e2e/test-mode.test.ts`.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { generateKey, keyPrefix, parseKeyReference } from '@mailroom/projects/keys';
import { loadConfig } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { apiKeys } from '@mailroom/db/schema/projects';
import { campaigns } from '@mailroom/db/schema/campaigns';
import { emails } from '@mailroom/db/schema/emails';
import { webhookDeliveries } from '@mailroom/db/schema/webhooks';
import { storeTestMessage } from '@mailroom/sending/queries/test-messages';
import { runCli } from '../../apps/api/src/cli';
import { ADMIN_TOKEN, recipient, startTestApi, testEnv, type TestApi } from '../support/harness';

let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ KEY_ROTATION_GRACE_HOURS: '1' })));
});
afterAll(async () => {
  await api.close();
});

const admin = {
  post: (p: string, body?: object) => {
    const r = request(api.app).post(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    return body ? r.send(body) : r;
  },
  get: (p: string) => request(api.app).get(p).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
};
const as = (key: string) => ({
  post: (p: string, body: object) => request(api.app).post(p).set('Authorization', `Bearer ${key}`).send(body),
  get: (p: string) => request(api.app).get(p).set('Authorization', `Bearer ${key}`),
});

interface Keys {
  id: string;
  domain: string;
  secretKey: string;
  publicKey: string;
  testSecretKey: string;
  testPublicKey: string;
}

/** A project with both key pairs and a verified sending domain. */
async function project(): Promise<Keys> {
  const p = await createProject(api.database.db, `tm ${randomBytes(3).toString('hex')}`);
  const domain = `tm${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(api.database.db, p.id, domain, true);
  return { ...p, domain };
}

const emailRow = async (id: string) => (await api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const sendAs = (key: string, domain: string, to = recipient('tm')) =>
  as(key).post('/v1/send', { to, from: `a@${domain}`, subject: 'Hi {{name}}', body: '<p>Hi {{name}}</p>' });

describe('test keys', () => {
  test('a new project gets a live pair and a test pair; listings show the mode and a 15-character test prefix', async () => {
    const created = await admin.post('/admin/projects', { name: 'Test mode' });
    expect(created.status).toBe(201);
    const d = created.body.data;
    expect(d).toMatchObject({
      publicKey: expect.stringMatching(/^pk_(?!test_)[\w-]{43}$/),
      secretKey: expect.stringMatching(/^sk_(?!test_)[\w-]{43}$/),
      testPublicKey: expect.stringMatching(/^pk_test_[\w-]{43}$/),
      testSecretKey: expect.stringMatching(/^sk_test_[\w-]{43}$/),
    });
    const keys = (await admin.get(`/admin/projects/${d.id}/keys`)).body.data as {
      kind: string;
      mode: string;
      keyPrefix: string;
    }[];
    expect(keys.map((k) => `${k.kind}/${k.mode}/${k.keyPrefix}`).sort()).toEqual(
      [
        `public/live/${d.publicKey.slice(0, 10)}`,
        `secret/live/${d.secretKey.slice(0, 10)}`,
        `public/test/${d.testPublicKey.slice(0, 15)}`,
        `secret/test/${d.testSecretKey.slice(0, 15)}`,
      ].sort(),
    );
    expect(JSON.stringify(keys)).not.toContain(d.testSecretKey);
  });

  test('test keys authenticate like their kind: sk_test_ everywhere, pk_test_ only on /v1/track', async () => {
    const p = await project();
    expect((await as(p.testSecretKey).get('/templates')).status).toBe(200);
    expect((await as(p.testPublicKey).post('/v1/track', { email: recipient('pk'), event: 'signed-up' })).status).toBe(
      200,
    );
    const refused = await as(p.testPublicKey).get('/templates');
    expect(refused.status).toBe(403);
    expect(refused.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    // The key shape checks (failure limiter, revoke, import) read test keys as keys of their kind.
    expect(parseKeyReference(p.testSecretKey)).toEqual({ by: 'key', key: p.testSecretKey });
    expect(parseKeyReference(p.testSecretKey.slice(0, 15))).toEqual({
      by: 'prefix',
      prefix: p.testSecretKey.slice(0, 15),
    });
    expect(parseKeyReference(p.testSecretKey.slice(0, 12))).toBeUndefined();
    expect(keyPrefix(generateKey('public', 'test'))).toMatch(/^pk_test_[\w-]{7}$/);
    for (let i = 0; i < 200; i++) expect(generateKey('secret')).not.toMatch(/^sk_test_/);
  });

  test('rotation is per mode: rotating test keys leaves the live ones alone (and issues a first pair to an old project)', async () => {
    const p = await project();
    const rotated = await admin.post(`/admin/projects/${p.id}/rotate-keys?mode=test`);
    expect(rotated.status).toBe(200);
    expect(rotated.body.data).toMatchObject({
      id: p.id,
      mode: 'test',
      secretKey: expect.stringMatching(/^sk_test_/),
      publicKey: expect.stringMatching(/^pk_test_/),
    });
    const keys = (await admin.get(`/admin/projects/${p.id}/keys`)).body.data as {
      mode: string;
      expiresAt: string | null;
      keyPrefix: string;
    }[];
    expect(keys.filter((k) => k.mode === 'live').every((k) => k.expiresAt === null)).toBe(true);
    expect(
      keys
        .filter((k) => k.mode === 'test' && k.expiresAt !== null)
        .map((k) => k.keyPrefix)
        .sort(),
    ).toEqual([p.testPublicKey.slice(0, 15), p.testSecretKey.slice(0, 15)].sort());
    // Within the grace period both test keys work; then the CLI rotates with no grace: the old test key stops, live keeps working.
    expect((await as(p.testSecretKey).get('/templates')).status).toBe(200);
    const cli = (await runCli(
      ['project', 'rotate-keys', '--project', p.id, '--mode', 'test'],
      testEnv({ KEY_ROTATION_GRACE_HOURS: '0' }),
    )) as { mode: string; secretKey: string };
    expect(cli).toMatchObject({ mode: 'test', secretKey: expect.stringMatching(/^sk_test_/) });
    api.authCache.clear();
    expect((await as(rotated.body.data.secretKey).get('/templates')).status).toBe(401);
    expect((await as(cli.secretKey).get('/templates')).status).toBe(200);
    expect((await as(p.secretKey).get('/templates')).status).toBe(200);
    // Live rotation is the default, as before.
    const live = await admin.post(`/admin/projects/${p.id}/rotate-keys`);
    expect(live.body.data).toMatchObject({ mode: 'live', secretKey: expect.stringMatching(/^sk_(?!test_)/) });
    expect((await admin.post(`/admin/projects/${p.id}/rotate-keys?mode=staging`)).status).toBe(400);
    await expect(runCli(['project', 'rotate-keys', '--project', p.id, '--mode', 'staging'], testEnv())).rejects.toThrow(
      '--mode must be live or test',
    );

    // A project made before test mode (live keys only) gets its first test pair by rotating test.
    const old = await project();
    await api.database.db.delete(apiKeys).where(eq(apiKeys.projectId, old.id));
    const first = (await runCli(['project', 'rotate-keys', '--project', old.id, '--mode', 'test'], testEnv())) as {
      secretKey: string;
    };
    expect((await sendAs(first.secretKey, old.domain)).status).toBe(202);
  });

  test('revoking a test key by its 15-character prefix issues a test replacement', async () => {
    const p = await project();
    const res = await admin.post(`/admin/projects/${p.id}/keys/revoke`, { key: p.testSecretKey.slice(0, 15) });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      kind: 'secret',
      mode: 'test',
      keyPrefix: p.testSecretKey.slice(0, 15),
      replacementKey: expect.stringMatching(/^sk_test_[\w-]{43}$/),
    });
    expect((await as(p.testSecretKey).get('/templates')).status).toBe(401);
    const sent = await sendAs(res.body.data.replacementKey, p.domain);
    expect(sent.status).toBe(202);
    expect((await emailRow(sent.body.data.emails[0].email)).test).toBe(true);
    expect((await as(p.secretKey).get('/templates')).status).toBe(200);
  });

  test('an imported sk_test_ key is a test key', async () => {
    const p = await project();
    const key = `sk_test_${randomBytes(32).toString('base64url')}`;
    const res = await admin.post(`/admin/projects/${p.id}/keys/import`, { secretKey: key });
    expect(res.status).toBe(201);
    expect(res.body.data.keys).toEqual([
      expect.objectContaining({ kind: 'secret', mode: 'test', keyPrefix: key.slice(0, 15) }),
    ]);
    const sent = await sendAs(key, p.domain);
    expect((await emailRow(sent.body.data.emails[0].email)).test).toBe(true);
  });
});

describe('test data', () => {
  test("a test key's send stores test emails (also from the auth cache); a live key's does not; GET /emails/{id} shows it", async () => {
    const p = await project();
    for (let i = 0; i < 2; i++) {
      const res = await sendAs(p.testSecretKey, p.domain);
      expect(res.status).toBe(202);
      const id = res.body.data.emails[0].email;
      expect((await emailRow(id)).test).toBe(true);
      // Read with the live key: test data belongs to the project, like the rest.
      expect((await as(p.secretKey).get(`/emails/${id}`)).body.data).toMatchObject({
        id,
        status: 'queued',
        test: true,
      });
    }
    const live = await sendAs(p.secretKey, p.domain);
    expect((await emailRow(live.body.data.emails[0].email)).test).toBe(false);
    expect((await as(p.testSecretKey).get(`/emails/${live.body.data.emails[0].email}`)).body.data.test).toBe(false);
  });

  test('an Idempotency-Key used with a test key does not replay for the live key: each mode has its own keys', async () => {
    const p = await project();
    const to = recipient('idem');
    const body = { to, from: `a@${p.domain}`, subject: 'Receipt', body: '<p>Thanks</p>' };
    const send = (key: string) =>
      request(api.app)
        .post('/v1/send')
        .set('Authorization', `Bearer ${key}`)
        .set('Idempotency-Key', 'order-123')
        .send(body);
    const test = await send(p.testSecretKey);
    const live = await send(p.secretKey);
    expect([test.status, live.status]).toEqual([202, 202]);
    expect(live.headers['idempotent-replayed']).toBeUndefined();
    expect(live.body.data.emails[0].email).not.toBe(test.body.data.emails[0].email);
    expect((await emailRow(live.body.data.emails[0].email)).test).toBe(false);
    // Within one mode the key replays as before.
    const again = await send(p.secretKey);
    expect(again.body.data.emails[0].email).toBe(live.body.data.emails[0].email);
  });

  test('a campaign sent with a test key is a test campaign; its test sends are test emails too', async () => {
    const p = await project();
    await as(p.secretKey).post('/contacts', { email: recipient('c'), subscribed: true });
    const draft = await as(p.testSecretKey).post('/campaigns', {
      name: 'T',
      subject: 'S',
      body: '<p>b</p>',
      from: `n@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(draft.status).toBe(201);
    expect(draft.body.data.test).toBe(false);
    const preview = await as(p.testSecretKey).post(`/campaigns/${draft.body.data.id}/test`, {
      to: recipient('preview'),
    });
    expect(preview.status).toBe(202);
    expect((await emailRow(preview.body.data.emails[0].id)).test).toBe(true);
    const sent = await as(p.testSecretKey).post(`/campaigns/${draft.body.data.id}/send`, {});
    expect(sent.status).toBe(200);
    expect(sent.body.data).toMatchObject({ status: 'SENDING', test: true });
    const [row] = await api.database.db.select().from(campaigns).where(eq(campaigns.id, draft.body.data.id));
    expect(row.test).toBe(true);
  });

  test("campaign.* webhooks of a test campaign carry test: true; a live campaign's have no test key", async () => {
    const p = await project();
    await as(p.secretKey).post('/contacts', { email: recipient('c'), subscribed: true });
    await as(p.secretKey)
      .post('/webhooks/endpoints', { url: 'https://hooks.example.com/mailroom', eventTypes: ['campaign.*'] })
      .expect(201);
    const started: Record<string, string> = {};
    for (const [mode, key] of [
      ['test', p.testSecretKey],
      ['live', p.secretKey],
    ] as const) {
      const draft = await as(key).post('/campaigns', {
        name: mode,
        subject: 'S',
        body: '<p>b</p>',
        from: `n@${p.domain}`,
        audienceType: 'ALL',
      });
      expect((await as(key).post(`/campaigns/${draft.body.data.id}/send`, {})).status).toBe(200);
      expect((await as(key).post(`/campaigns/${draft.body.data.id}/cancel`, {})).status).toBe(200);
      started[mode] = draft.body.data.id as string;
    }
    const hooks = (
      await api.database.db.select().from(webhookDeliveries).where(eq(webhookDeliveries.projectId, p.id))
    ).map((d) => ({
      type: d.eventType,
      data: (d.payload as { data: Record<string, unknown> }).data,
    }));
    const of = (id: string) =>
      hooks.filter((h) => h.data.campaignId === id).map((h) => ({ type: h.type, test: h.data.test }));
    expect(of(started.test).sort((a, b) => a.type.localeCompare(b.type))).toEqual([
      { type: 'campaign.cancelled', test: true },
      { type: 'campaign.sending', test: true },
    ]);
    expect(of(started.live).sort((a, b) => a.type.localeCompare(b.type))).toEqual([
      { type: 'campaign.cancelled', test: undefined },
      { type: 'campaign.sending', test: undefined },
    ]);
    for (const h of hooks.filter((x) => x.data.campaignId === started.live)) expect(h.data).not.toHaveProperty('test');
  });
});

describe('GET /emails/{id}/raw', () => {
  test("a test email's stored message is answered as message/rfc822, byte for byte", async () => {
    const p = await project();
    const id = (await sendAs(p.testSecretKey, p.domain)).body.data.emails[0].email;
    const pending = await as(p.secretKey).get(`/emails/${id}/raw`);
    expect(pending.status).toBe(409);
    expect(pending.body.error).toMatchObject({ code: 'INVALID_STATE', message: expect.stringContaining('queued') });
    const raw = Buffer.from(`Subject: x\r\nMessage-ID: <${id}@x>\r\n\r\n\u00e9t\u00e9 \u0000 bytes\r\n`, 'utf8');
    await storeTestMessage(api.database.db, id, p.id, raw);
    const res = await as(p.secretKey)
      .get(`/emails/${id}/raw`)
      .buffer(true)
      .parse((r, cb) => {
        const chunks: Buffer[] = [];
        r.on('data', (c: Buffer) => chunks.push(c));
        r.on('end', () => cb(null, Buffer.concat(chunks)));
      });
    expect(res.status).toBe(200);
    expect(res.headers['content-type']).toMatch(/^message\/rfc822/);
    expect(res.headers['ratelimit-limit']).toBeDefined();
    expect(Buffer.compare(res.body as Buffer, raw)).toBe(0);
  });

  test('errors: live email 404 (no copy kept), unknown 404, bad id 400, public key 403, no key 401, other project 404', async () => {
    const p = await project();
    const live = (await sendAs(p.secretKey, p.domain)).body.data.emails[0].email;
    const res = await as(p.secretKey).get(`/emails/${live}/raw`);
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
    expect(res.body.error.message).toMatch(/live emails keep no copy/);
    expect((await as(p.secretKey).get('/emails/0190aaaa-0000-7000-8000-000000000000/raw')).status).toBe(404);
    const bad = await as(p.secretKey).get('/emails/not-a-uuid/raw');
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('INVALID_PARAMETERS');
    const test = (await sendAs(p.testSecretKey, p.domain)).body.data.emails[0].email;
    await storeTestMessage(api.database.db, test, p.id, Buffer.from('Subject: x\r\n\r\nx'));
    const pk = await as(p.testPublicKey).get(`/emails/${test}/raw`);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    expect((await request(api.app).get(`/emails/${test}/raw`)).status).toBe(401);
    const other = await project();
    for (const key of [other.secretKey, other.testSecretKey]) {
      const foreign = await as(key).get(`/emails/${test}/raw`);
      expect(foreign.status).toBe(404);
      expect(foreign.body.error.message).toBe('Email not found');
    }
  });

  test('the route is documented in the OpenAPI document', async () => {
    const doc = (await request(api.app).get('/openapi.json')).body;
    expect(doc.paths['/emails/{id}/raw'].get).toMatchObject({ operationId: 'getEmailRaw', security: [{ apiKey: [] }] });
    expect(Object.keys(doc.paths['/emails/{id}/raw'].get.responses['200'].content)).toEqual(['message/rfc822']);
    expect(doc.paths['/admin/projects/{id}/rotate-keys'].post.parameters).toEqual(
      expect.arrayContaining([expect.objectContaining({ name: 'mode', in: 'query' })]),
    );
  });
});
