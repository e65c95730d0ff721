/**
 * The suppression list over the API (add one or many, keyset list with search and reason, get, delete; errors;
 * tenant isolation) and its effect on `POST /v1/send`: a suppressed recipient's email is stored `suppressed`,
 * gets no job, and the response says so.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { client, createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

describe('happy path', () => {
  test('add one, add in bulk, list newest first by keyset, search, filter by reason, get, delete', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const one = await as.post('/suppressions', { email: 'Ann@Example.COM', note: 'asked by phone' });
    expect(one.status).toBe(201);
    expect(one.body.data.added[0]).toMatchObject({
      email: 'Ann@example.com',
      reason: 'manual',
      sourceEmailId: null,
      details: { note: 'asked by phone' },
    });
    const bulk = await as.post('/suppressions', {
      emails: ['b1@list.test', 'b2@list.test', 'ANN@example.com', 'b1@list.test'],
    });
    expect(bulk.status).toBe(201);
    expect(bulk.body.data.added.map((s: { email: string }) => s.email)).toEqual(['b1@list.test', 'b2@list.test']);
    expect(bulk.body.data.alreadySuppressed).toEqual(['ANN@example.com']);
    const again = await as.post('/suppressions', { email: 'b2@list.test' });
    expect(again.status).toBe(200);
    expect(again.body.data).toEqual({ added: [], alreadySuppressed: ['b2@list.test'] });

    const page1 = await as.get('/suppressions?limit=2');
    expect(page1.body.data).toMatchObject({ total: 3, hasMore: true });
    expect(page1.body.data.items.map((s: { email: string }) => s.email)).toEqual(['b2@list.test', 'b1@list.test']);
    const page2 = await as.get(`/suppressions?limit=2&cursor=${page1.body.data.nextCursor}`);
    expect(page2.body.data.items.map((s: { email: string }) => s.email)).toEqual(['Ann@example.com']);
    expect(page2.body.data).toMatchObject({ hasMore: false, nextCursor: null });

    const search = await as.get('/suppressions?search=LIST.test');
    expect(search.body.data.total).toBe(2);
    const byReason = await as.get('/suppressions?reason=hard_bounce');
    expect(byReason.body.data.total).toBe(0);

    const got = await as.get(`/suppressions/${encodeURIComponent('ann@EXAMPLE.com')}`);
    expect(got.status).toBe(200);
    expect(got.body.data.reason).toBe('manual');
    const del = await as.del('/suppressions/ann@example.com');
    expect(del.status).toBe(200);
    expect(del.body.data).toEqual({ email: 'Ann@example.com', deleted: true });
    expect((await as.get('/suppressions/ann@example.com')).status).toBe(404);
  });

  test('/v1/send stores a suppressed recipient as suppressed, enqueues only the others, and says which', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const blocked = recipient('blocked');
    const fine = recipient('fine');
    await as.post('/suppressions', { email: blocked.toUpperCase() });
    const res = await as.post('/v1/send', { to: [blocked, fine], from: `n@${p.domain}`, subject: 'S', body: 'B' });
    expect(res.status).toBe(202);
    expect(res.body.data.suppressed).toEqual([blocked]);
    const [b, f] = res.body.data.emails;
    expect(b.status).toBe('suppressed');
    expect(f.status).toBe('queued');
    const prefix = ctx.api.config.queuePrefix;
    expect(await ctx.api.redis.exists(`${prefix}:send:${b.email}`)).toBe(0);
    expect(await ctx.api.redis.exists(`${prefix}:send:${f.email}`)).toBe(1);
    const email = await as.get(`/emails/${b.email}`);
    expect(email.body.data.status).toBe('suppressed');
    expect(email.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['suppressed']);

    await as.del(`/suppressions/${blocked}`);
    const after = await as.post('/v1/send', { to: blocked, from: `n@${p.domain}`, subject: 'S', body: 'B' });
    expect(after.body.data.emails[0].status).toBe('queued');
    expect(after.body.data.suppressed).toEqual([]);
  });

  test('/v1/send records email.suppressed for each suppressed recipient', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    await createWebhookEndpoint(ctx.api.database.db, p.id, {
      url: 'https://hooks.example.com/x',
      eventTypes: ['email.*'],
      secret: 'whsec_x',
    });
    await createWebhookEndpoint(ctx.api.database.db, p.id, {
      url: 'https://hooks.example.com/y',
      eventTypes: ['contact.created'],
      secret: 'whsec_y',
    });
    const blocked = recipient('blocked');
    await as.post('/suppressions', { email: blocked });
    const res = await as.post('/v1/send', {
      to: [blocked, recipient('fine')],
      from: `n@${p.domain}`,
      subject: 'S',
      body: 'B',
    });
    expect(res.status).toBe(202);
    const [b] = res.body.data.emails;
    const rows = await ctx.api.database.db.execute<{
      event_type: string;
      payload: { type: string; timestamp: string; data: Record<string, unknown> };
    }>(sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid`);
    expect(rows.rows).toHaveLength(1);
    expect(rows.rows[0].event_type).toBe('email.suppressed');
    expect(rows.rows[0].payload.type).toBe('email.suppressed');
    expect(new Date(rows.rows[0].payload.timestamp).toString()).not.toBe('Invalid Date');
    expect(rows.rows[0].payload.data).toEqual({
      emailId: b.email,
      contactId: b.contact.id,
      campaignId: null,
      messageId: null,
      to: blocked,
      from: `n@${p.domain}`,
      status: 'suppressed',
      reason: 'address is on the suppression list',
      cause: 'suppression_list',
      tags: [],
    });
    const email = await as.get(`/emails/${b.email}`);
    expect(email.body.data.timeline[0]).toMatchObject({
      type: 'suppressed',
      data: { reason: 'address is on the suppression list' },
    });
  });
});

describe('errors', () => {
  test('422 names the field: bad address, both or neither of email/emails, too many; 404 for an unlisted address', async () => {
    const as = client(ctx.api.app, ctx.p);
    const bad = await as.post('/suppressions', { email: 'not-an-address' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('email');
    const both = await as.post('/suppressions', { email: 'a@b.test', emails: ['c@d.test'] });
    expect(both.status).toBe(422);
    expect(both.body.error.errors[0].field).toBe('email');
    const neither = await as.post('/suppressions', {});
    expect(neither.status).toBe(422);
    const many = await as.post('/suppressions', { emails: Array.from({ length: 1001 }, (_, i) => `x${i}@many.test`) });
    expect(many.status).toBe(422);
    expect(many.body.error.errors[0].field).toBe('emails');
    const badItem = await as.post('/suppressions', { emails: ['ok@x.test', 'nope'] });
    expect(badItem.status).toBe(422);
    expect(badItem.body.error.errors[0].field).toBe('emails.1');
    expect((await as.del('/suppressions/nobody@nowhere.test')).status).toBe(404);
    expect((await as.del('/suppressions/no-at-sign')).status).toBe(400);
    expect((await as.get('/suppressions/no-at-sign')).status).toBe(400);
    expect((await as.get('/suppressions?reason=sometimes')).status).toBe(400);
    expect((await as.get('/suppressions?cursor=zzz')).status).toBe(400);
  });
});

describe('security', () => {
  test('another project neither sees nor removes the entry, and its sends are not suppressed by it', async () => {
    const a = await createTestProject(ctx.api.database);
    const b = await createTestProject(ctx.api.database);
    const addr = recipient('iso');
    await client(ctx.api.app, a).post('/suppressions', { email: addr });
    const asB = client(ctx.api.app, b);
    expect((await asB.get(`/suppressions/${addr}`)).status).toBe(404);
    expect((await asB.get('/suppressions')).body.data.total).toBe(0);
    expect((await asB.del(`/suppressions/${addr}`)).status).toBe(404);
    const sent = await asB.post('/v1/send', { to: addr, from: `n@${b.domain}`, subject: 'S', body: 'B' });
    expect(sent.body.data.emails[0].status).toBe('queued');
    expect((await client(ctx.api.app, a).get(`/suppressions/${addr}`)).status).toBe(200);
  });

  test('a public key cannot read or change the list', async () => {
    const res = await request(ctx.api.app).get('/suppressions').set('Authorization', `Bearer ${ctx.p.publicKey}`);
    expect(res.status).toBe(403);
    const add = await request(ctx.api.app)
      .post('/suppressions')
      .set('Authorization', `Bearer ${ctx.p.publicKey}`)
      .send({ email: 'a@b.test' });
    expect(add.status).toBe(403);
  });
});
