/**
 * GET /emails/{id}: the timeline of an accepted email; errors; tenant isolation.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

test('an accepted email reads back as queued with its timeline', async () => {
  const to = recipient();
  const sent = await request(ctx.api.app).post('/v1/send').set('Authorization', ctx.p.auth)
    .send({ to: { name: 'Ann', email: to }, from: { name: 'Shop', email: `shop@${ctx.p.domain}` }, subject: 'Order {{n}}', body: 'b', data: { n: 7 } });
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
  const res = await request(ctx.api.app).get('/emails/0190aaaa-0000-7000-8000-000000000000').set('Authorization', ctx.p.auth);
  expect(res.status).toBe(404);
  expect(res.body.error.code).toBe('NOT_FOUND');
});

test("security: another project's email is 404; public key 403; no key 401", async () => {
  const other = await createTestProject(ctx.api.database);
  const sent = await request(ctx.api.app).post('/v1/send').set('Authorization', other.auth).send({ to: recipient(), from: `x@${other.domain}`, subject: 's', body: 'b' });
  const id = sent.body.data.emails[0].email;
  expect((await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', ctx.p.auth)).status).toBe(404);
  expect((await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', `Bearer ${other.publicKey}`)).status).toBe(403);
  expect((await request(ctx.api.app).get(`/emails/${id}`)).status).toBe(401);
  expect((await request(ctx.api.app).get(`/emails/${id}`).set('Authorization', other.auth)).status).toBe(200);
});

test('an email whose id is not a UUIDv7 (a row written by hand) still reads its whole timeline', async () => {
  // Ids of another version carry no time: the timeline's lower bound (a day before the id's time) must not apply.
  // A UUIDv4 whose first bits read as a time far after its timeline row's id is the case that hid the timeline.
  const contact = await request(ctx.api.app).post('/contacts').set('Authorization', ctx.p.auth).send({ email: recipient() });
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
