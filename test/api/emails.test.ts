/**
 * GET /emails/{id}: the timeline of an accepted email; errors; tenant isolation.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

test('an accepted email reads back as queued with its timeline', async () => {
  const to = recipient();
  const sent = await request(ctx.api.app)
    .post('/v1/send')
    .set('Authorization', ctx.p.auth)
    .send({
      to: { name: 'Ann', email: to },
      from: { name: 'Shop', email: `shop@${ctx.p.domain}` },
      subject: 'Order {{n}}',
      body: 'b',
      data: { n: 7 },
    });
  const id = sent.body.data.emails[0].email;
  const res = await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', ctx.p.auth);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({
    id,
    status: 'queued',
    source: 'transactional',
    to: { email: to, name: 'Ann' },
    from: { email: `shop@${ctx.p.domain}`, name: 'Shop' },
    subject: 'Order {{n}}',
    contactId: sent.body.data.emails[0].contact.id,
    messageId: null,
    error: null,
    attempts: 0,
    sentAt: null,
  });
  expect(res.body.data.timeline).toEqual([{ type: 'queued', at: expect.any(String), data: null }]);
});

test('errors: 400 malformed id, 404 unknown id', async () => {
  expect((await request(ctx.api.app).get('/emails/123').set('Authorization', ctx.p.auth)).status).toBe(400);
  const res = await request(ctx.api.app)
    .get('/emails/0190aaaa-0000-7000-8000-000000000000')
    .set('Authorization', ctx.p.auth);
  expect(res.status).toBe(404);
  expect(res.body.error.code).toBe('NOT_FOUND');
});

test("security: another project's email is 404; public key 403; no key 401", async () => {
  const other = await createTestProject(ctx.api.database);
  const sent = await request(ctx.api.app)
    .post('/v1/send')
    .set('Authorization', other.auth)
    .send({ to: recipient(), from: `x@${other.domain}`, subject: 's', body: 'b' });
  const id = sent.body.data.emails[0].email;
  expect((await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', ctx.p.auth)).status).toBe(404);
  expect(
    (await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', `Bearer ${other.publicKey}`)).status,
  ).toBe(403);
  expect((await request(ctx.api.app).get(`/emails/${id}`)).status).toBe(401);
  expect((await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', other.auth)).status).toBe(200);
});

test('an email whose id is not a UUIDv7 (a row written by hand) still reads its whole timeline', async () => {
  // Ids of another version carry no time: the timeline's lower bound (a day before the id's time) must not apply.
  // A UUIDv4 whose first bits read as a time far after its timeline row's id is the case that hid the timeline.
  const contact = await request(ctx.api.app)
    .post('/contacts')
    .set('Authorization', ctx.p.auth)
    .send({ email: recipient() });
  const emailId = 'ffffffff-ffff-4fff-bfff-ffffffffffff';
  const eventId = '00000000-0000-4000-8000-000000000001';
  await ctx.api.database.db.execute(sql`
    insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, body_format, status)
    values (${emailId}::uuid, ${ctx.p.id}::uuid, ${contact.body.data.id}::uuid, 'transactional', ${contact.body.data.email}, ${`a@${ctx.p.domain}`}, 's', 'b', 'html', 'sent')`);
  await ctx.api.database.db.execute(sql`
    insert into email_events (id, email_id, project_id, type, data) values (${eventId}::uuid, ${emailId}::uuid, ${ctx.p.id}::uuid, 'delivered', '{}'::jsonb)`);
  const res = await request(ctx.api.app).get(`/emails/${emailId}`).set('Authorization', ctx.p.auth);
  expect(res.status).toBe(200);
  expect(res.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['delivered']);
});

describe('GET /emails', () => {
  const send = async (p: { auth: string; domain: string }, to: string, subject = 's') => {
    const res = await request(ctx.api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to, from: `x@${p.domain}`, subject, body: 'b' });
    expect(res.status).toBe(202);
    return res.body.data.emails[0] as { email: string; contact: { id: string } };
  };

  test('newest first, page after page by cursor, with status and no timeline; only the project’s own', async () => {
    const p = await createTestProject(ctx.api.database);
    const other = await createTestProject(ctx.api.database);
    await send(other, recipient('other'));
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await send(p, recipient('list'), `n${i}`)).email);
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: request.Response = await request(ctx.api.app)
        .get(`/emails?limit=2${cursor ? `&cursor=${cursor}` : ''}`)
        .set('Authorization', `Bearer ${p.secretKey}`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ total: 5, totalExact: true });
      for (const e of res.body.data.items) {
        expect(e).toMatchObject({ status: 'queued', source: 'transactional', from: { email: `x@${p.domain}` } });
        expect(e).not.toHaveProperty('timeline');
      }
      seen.push(...res.body.data.items.map((e: { id: string }) => e.id));
      cursor = res.body.data.nextCursor;
      expect(res.body.data.hasMore).toBe(cursor !== null);
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...ids].reverse());
  });

  test('filters combine: status, contact (by id or address), time window', async () => {
    const p = await createTestProject(ctx.api.database);
    const ann = recipient('ann');
    const first = await send(p, ann);
    const between = new Date().toISOString();
    const second = await send(p, ann);
    await send(p, recipient('bob'));
    const list = async (q: string) => {
      const res = await request(ctx.api.app)
        .get(`/emails?limit=100&${q}`)
        .set('Authorization', `Bearer ${p.secretKey}`);
      expect(res.status).toBe(200);
      return res.body.data.items.map((e: { id: string }) => e.id);
    };
    expect(await list(`email=${encodeURIComponent(ann.toUpperCase())}`)).toEqual([second.email, first.email]);
    expect(await list(`contactId=${first.contact.id}&since=${encodeURIComponent(between)}`)).toEqual([second.email]);
    expect(await list(`contactId=${first.contact.id}&until=${encodeURIComponent(between)}`)).toEqual([first.email]);
    expect(await list('status=sent')).toEqual([]);
    expect(await list(`status=queued&email=${encodeURIComponent(recipient('nobody'))}`)).toEqual([]);
    expect(await list('status=queued')).toHaveLength(3);
  });

  test('errors: 400 on an unknown status, a bad cursor, until before since; 403 public key; 401 no key', async () => {
    const bad = await request(ctx.api.app).get('/emails?status=lost').set('Authorization', ctx.p.auth);
    expect(bad.status).toBe(400);
    expect(bad.body.error.errors[0]).toMatchObject({ field: 'status' });
    expect((await request(ctx.api.app).get('/emails?cursor=nope').set('Authorization', ctx.p.auth)).status).toBe(400);
    const window = await request(ctx.api.app)
      .get('/emails?since=2026-02-01T00:00:00Z&until=2026-01-01T00:00:00Z')
      .set('Authorization', ctx.p.auth);
    expect(window.status).toBe(400);
    expect(window.body.error.errors[0]).toMatchObject({ field: 'until' });
    expect((await request(ctx.api.app).get('/emails').set('Authorization', `Bearer ${ctx.p.publicKey}`)).status).toBe(
      403,
    );
    expect((await request(ctx.api.app).get('/emails')).status).toBe(401);
  });
});
