/**
 * Webhook endpoints over the API: create (secret shown once), list by keyset, get, update (re-enable), delete;
 * URL and event-type validation including private-network targets; the delivery log and redelivery; tenant
 * isolation. Delivery itself (signatures, retries, disabling) is covered end to end in test/e2e/feedback.
 */
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { projects } from '@mailroom/db/schema/projects';
import { webhookDeliveries, webhookEndpoints } from '@mailroom/db/schema/webhooks';
import { client, createTestProject, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const as = () => client(ctx.api.app, ctx.p);

describe('happy path', () => {
  test('create shows the secret once; get, list, update and delete never show it', async () => {
    const created = await as().post('/webhooks/endpoints', {
      url: 'https://hooks.example.com/mail',
      eventTypes: ['email.*', 'contact.unsubscribed'],
      description: 'CRM',
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      url: 'https://hooks.example.com/mail',
      eventTypes: ['email.*', 'contact.unsubscribed'],
      enabled: true,
      disabledReason: null,
    });
    expect(created.body.data.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const id = created.body.data.id;

    const got = await as().get(`/webhooks/endpoints/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.data.secret).toBeUndefined();
    const list = await as().get('/webhooks/endpoints');
    expect(list.body.data.items.map((e: { id: string }) => e.id)).toContain(id);
    expect(list.body.data.items.every((e: object) => !('secret' in e))).toBe(true);

    const patched = await as().patch(`/webhooks/endpoints/${id}`, { eventTypes: ['*'], enabled: false });
    expect(patched.body.data).toMatchObject({ eventTypes: ['*'], enabled: false });
    expect(patched.body.data.secret).toBeUndefined();

    const del = await as().del(`/webhooks/endpoints/${id}`);
    expect(del.body.data).toEqual({ id, deleted: true });
    expect((await as().get(`/webhooks/endpoints/${id}`)).status).toBe(404);
  });

  test('keyset pages of endpoints', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = client(ctx.api.app, p);
    for (let i = 0; i < 3; i++)
      await c.post('/webhooks/endpoints', { url: `https://h${i}.example.com/`, eventTypes: ['*'] });
    const first = await c.get('/webhooks/endpoints?limit=2');
    expect(first.body.data).toMatchObject({ total: 3, hasMore: true });
    expect(first.body.data.items[0].url).toBe('https://h2.example.com/');
    const second = await c.get(`/webhooks/endpoints?limit=2&cursor=${first.body.data.nextCursor}`);
    expect(second.body.data.items.map((e: { url: string }) => e.url)).toEqual(['https://h0.example.com/']);
  });

  test('events become pending deliveries of the subscribed, enabled endpoints only; the log lists them; redelivery starts a new round', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = client(ctx.api.app, p);
    const wanted = (await c.post('/webhooks/endpoints', { url: 'https://a.example.com/', eventTypes: ['contact.*'] }))
      .body.data.id;
    const other = (
      await c.post('/webhooks/endpoints', { url: 'https://b.example.com/', eventTypes: ['email.bounced'] })
    ).body.data.id;
    const off = (
      await c.post('/webhooks/endpoints', { url: 'https://c.example.com/', eventTypes: ['*'], enabled: false })
    ).body.data.id;
    await c.post('/suppressions', { emails: ['x1@hook.test', 'x2@hook.test'] });

    const log = await c.get(`/webhooks/endpoints/${wanted}/deliveries`);
    expect(log.status).toBe(200);
    expect(log.body.data.total).toBe(2);
    const d = log.body.data.items[0];
    expect(d).toMatchObject({ eventType: 'contact.suppressed', status: 'pending', attempts: 0, attemptLog: [] });
    expect(d.payload).toMatchObject({ type: 'contact.suppressed', data: { reason: 'manual' } });
    // One statement wrote both: their order within it is not defined.
    expect(
      log.body.data.items.map((i: { payload: { data: { email: string } } }) => i.payload.data.email).sort(),
    ).toEqual(['x1@hook.test', 'x2@hook.test']);
    expect(new Date(d.payload.timestamp).toString()).not.toBe('Invalid Date');
    expect((await c.get(`/webhooks/endpoints/${other}/deliveries`)).body.data.total).toBe(0);
    expect((await c.get(`/webhooks/endpoints/${off}/deliveries`)).body.data.total).toBe(0);

    const jobId = (gen: number) => `${ctx.api.config.queuePrefix}:webhook:wh-${d.id}-${gen}`;
    expect(await ctx.api.redis.exists(jobId(0))).toBe(1);
    await ctx.api.database.db.update(webhookDeliveries).set({ status: 'failed' }).where(eq(webhookDeliveries.id, d.id));
    const again = await c.post(`/webhooks/endpoints/${wanted}/deliveries/${d.id}/redeliver`, {});
    expect(again.status).toBe(202);
    expect(again.body.data).toEqual({ id: d.id, status: 'pending' });
    expect(await ctx.api.redis.exists(jobId(1))).toBe(1);
    expect((await c.get(`/webhooks/endpoints/${wanted}/deliveries?status=pending`)).body.data.total).toBe(2);
  });
});

test('campaign transitions are announced: sending, cancelled, and failed when its segment is deleted', async () => {
  const p = await createTestProject(ctx.api.database);
  const c = client(ctx.api.app, p);
  const hook = (await c.post('/webhooks/endpoints', { url: 'https://camp.example.com/', eventTypes: ['campaign.*'] }))
    .body.data.id;
  const base = { name: 'c', subject: 'S', body: '<p>B</p>', from: `news@${p.domain}` };
  const now = (await c.post('/campaigns', { ...base, audienceType: 'ALL' })).body.data.id;
  expect((await c.post(`/campaigns/${now}/send`, {})).status).toBe(200);
  expect((await c.post(`/campaigns/${now}/cancel`, {})).status).toBe(200);
  const segment = (
    await c.post('/segments', { name: 'gone', filter: [{ field: 'email', operator: 'contains', value: '@' }] })
  ).body.data.id;
  const later = (await c.post('/campaigns', { ...base, audienceType: 'SEGMENT', segmentId: segment })).body.data.id;
  await c.post(`/campaigns/${later}/send`, { scheduledAt: new Date(Date.now() + 3600_000).toISOString() });
  expect((await c.del(`/segments/${segment}`)).status).toBe(200);
  const log = (await c.get(`/webhooks/endpoints/${hook}/deliveries`)).body.data.items;
  const seen = log
    .map(
      (d: { payload: { type: string; data: { campaignId: string } } }) =>
        `${d.payload.type} ${d.payload.data.campaignId}`,
    )
    .sort();
  expect(seen).toEqual([`campaign.cancelled ${now}`, `campaign.failed ${later}`, `campaign.sending ${now}`].sort());
});

test('an unsubscribe through the link of a message is announced as contact.unsubscribed, once', async () => {
  const p = await createTestProject(ctx.api.database);
  const c = client(ctx.api.app, p);
  const hook = (
    await c.post('/webhooks/endpoints', { url: 'https://crm.example.com/', eventTypes: ['contact.unsubscribed'] })
  ).body.data.id;
  const to = 'reader@unsub.test';
  await c.post('/contacts', { email: to, subscribed: true });
  const sent = await c.post('/v1/send', { to, from: `n@${p.domain}`, subject: 'S', body: 'B' });
  const emailId = sent.body.data.emails[0].email;
  const [project] = await ctx.api.database.db
    .select({ key: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  const token = createUnsubscribeToken(emailId, project.key);
  for (let i = 0; i < 2; i++) {
    const res = await request(ctx.api.app)
      .post(`/unsubscribe/${token}`)
      .type('form')
      .send({ 'List-Unsubscribe': 'One-Click' });
    expect(res.status).toBe(200);
  }
  const log = (await c.get(`/webhooks/endpoints/${hook}/deliveries`)).body.data;
  expect(log.total).toBe(1);
  expect(log.items[0].payload.data).toMatchObject({
    email: to,
    method: 'one-click',
    emailId,
    contactId: sent.body.data.emails[0].contact.id,
  });
});

describe('errors', () => {
  test('422 names the field for bad URLs, private targets and unknown event types', async () => {
    const cases: [object, string][] = [
      [{ url: 'not a url', eventTypes: ['*'] }, 'url'],
      [{ url: 'ftp://files.example.com/', eventTypes: ['*'] }, 'url'],
      [{ url: 'https://user:pw@example.com/', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://127.0.0.1:8080/', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://localhost/', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://10.1.2.3/', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://169.254.169.254/latest/meta-data', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://[::1]/', eventTypes: ['*'] }, 'url'],
      [{ url: 'http://[::ffff:192.168.0.1]/', eventTypes: ['*'] }, 'url'],
      [{ url: 'https://ok.example.com/', eventTypes: ['email.openedd'] }, 'eventTypes.0'],
      [{ url: 'https://ok.example.com/', eventTypes: ['email.sent', 'billing.*'] }, 'eventTypes.1'],
      [{ url: 'https://ok.example.com/', eventTypes: [] }, 'eventTypes'],
      [{ eventTypes: ['*'] }, 'url'],
    ];
    for (const [body, field] of cases) {
      const res = await as().post('/webhooks/endpoints', body);
      expect({ body, status: res.status, field: res.body.error?.errors?.[0]?.field }).toEqual({
        body,
        status: 422,
        field,
      });
    }
    const id = (await as().post('/webhooks/endpoints', { url: 'https://ok.example.com/', eventTypes: ['*'] })).body.data
      .id;
    expect((await as().patch(`/webhooks/endpoints/${id}`, { url: 'http://192.168.1.1/' })).status).toBe(422);
    expect((await as().patch(`/webhooks/endpoints/${id}`, {})).status).toBe(422);
  });

  test('redelivery: 404 for an unknown delivery, 409 while the endpoint is disabled', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = client(ctx.api.app, p);
    const id = (await c.post('/webhooks/endpoints', { url: 'https://d.example.com/', eventTypes: ['*'] })).body.data.id;
    await c.post('/suppressions', { email: 'y@hook.test' });
    const [d] = (await c.get(`/webhooks/endpoints/${id}/deliveries`)).body.data.items;
    expect(
      (await c.post(`/webhooks/endpoints/${id}/deliveries/00000000-0000-7000-8000-000000000000/redeliver`, {})).status,
    ).toBe(404);
    await ctx.api.database.db
      .update(webhookEndpoints)
      .set({ enabled: false, disabledReason: 'persistent failure' })
      .where(eq(webhookEndpoints.id, id));
    const refused = await c.post(`/webhooks/endpoints/${id}/deliveries/${d.id}/redeliver`, {});
    expect(refused.status).toBe(409);
    const enabled = await c.patch(`/webhooks/endpoints/${id}`, { enabled: true });
    expect(enabled.body.data).toMatchObject({ enabled: true, disabledReason: null, disabledAt: null });
    expect((await c.post(`/webhooks/endpoints/${id}/deliveries/${d.id}/redeliver`, {})).status).toBe(202);
  });
});

describe('security', () => {
  test("another project's endpoints and deliveries are 404", async () => {
    const id = (await as().post('/webhooks/endpoints', { url: 'https://e.example.com/', eventTypes: ['*'] })).body.data
      .id;
    const other = client(ctx.api.app, await createTestProject(ctx.api.database));
    expect((await other.get(`/webhooks/endpoints/${id}`)).status).toBe(404);
    expect((await other.patch(`/webhooks/endpoints/${id}`, { enabled: false })).status).toBe(404);
    expect((await other.del(`/webhooks/endpoints/${id}`)).status).toBe(404);
    expect((await other.get(`/webhooks/endpoints/${id}/deliveries`)).status).toBe(404);
    expect((await as().get(`/webhooks/endpoints/${id}`)).body.data.enabled).toBe(true);
  });

  test('a public key is refused', async () => {
    const res = await request(ctx.api.app).get('/webhooks/endpoints').set('Authorization', `Bearer ${ctx.p.publicKey}`);
    expect(res.status).toBe(403);
  });
});
