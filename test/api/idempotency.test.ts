/**
 * Idempotency-Key on /v1/send, /v1/track and POST /contacts: replay, conflict, concurrent duplicates, expiry,
 * failed requests, scope.
 */
import { randomUUID } from 'node:crypto';
import request from 'supertest';
import { and, eq, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { events } from '@mailroom/db/schema/events';
import { idempotencyKeys } from '@mailroom/db/schema/idempotency';
import { createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const post = (path: string, body: object, key?: string, project: TestProject = ctx.p) => {
  const r = request(ctx.api.app).post(path).set('Authorization', project.auth);
  if (key !== undefined) r.set('Idempotency-Key', key);
  return r.send(body);
};
const emailRows = async (to: string) => ctx.api.database.db.select().from(emails).where(eq(emails.toEmail, to));

test('/v1/send: the same key and body replays the first response; one email exists', async () => {
  const to = recipient('idem');
  const key = randomUUID();
  const body = { to, from: `a@${ctx.p.domain}`, subject: 's', body: 'b' };
  const first = await post('/v1/send', body, key);
  expect(first.status).toBe(202);
  expect(first.headers['idempotent-replayed']).toBeUndefined();
  // Same JSON, other key order: still the same request.
  const again = await post('/v1/send', { body: 'b', subject: 's', from: `a@${ctx.p.domain}`, to }, key);
  expect(again.status).toBe(202);
  expect(again.headers['idempotent-replayed']).toBe('true');
  expect(again.body).toEqual(first.body);
  expect(await emailRows(to)).toHaveLength(1);
});

test('/v1/send: the same key with a different body is 422 IDEMPOTENCY_CONFLICT and sends nothing', async () => {
  const to = recipient('idem2');
  const key = randomUUID();
  await post('/v1/send', { to, from: `a@${ctx.p.domain}`, subject: 's', body: 'b' }, key);
  const other = await post('/v1/send', { to, from: `a@${ctx.p.domain}`, subject: 'changed', body: 'b' }, key);
  expect(other.status).toBe(422);
  expect(other.body.error.code).toBe('IDEMPOTENCY_CONFLICT');
  expect(other.body.message).toBeDefined();
  // Another route with the same key is another request too.
  const track = await request(ctx.api.app)
    .post('/v1/track')
    .set('Authorization', ctx.p.auth)
    .set('Idempotency-Key', key)
    .send({ email: to, event: 'e' });
  expect(track.status).toBe(422);
  expect(await emailRows(to)).toHaveLength(1);
});

test('/v1/send: 20 concurrent duplicates produce one email and identical responses', async () => {
  const to = recipient('race');
  const key = randomUUID();
  const body = { to, from: `a@${ctx.p.domain}`, subject: 's', body: 'b' };
  const results = await Promise.all(Array.from({ length: 20 }, () => post('/v1/send', body, key)));
  expect(results.map((r) => r.status)).toEqual(Array(20).fill(202));
  expect(new Set(results.map((r) => JSON.stringify(r.body.data))).size).toBe(1);
  expect(results.filter((r) => r.headers['idempotent-replayed'] === 'true')).toHaveLength(19);
  expect(await emailRows(to)).toHaveLength(1);
  const jobs = await ctx.api.redis.exists(`${ctx.api.config.queuePrefix}:send:${results[0].body.data.emails[0].email}`);
  expect(jobs).toBe(1);
});

test('/v1/track: concurrent duplicates record one event', async () => {
  const email = recipient('trk');
  const key = randomUUID();
  const results = await Promise.all(
    Array.from({ length: 10 }, () =>
      request(ctx.api.app)
        .post('/v1/track')
        .set('Authorization', `Bearer ${ctx.p.publicKey}`)
        .set('Idempotency-Key', key)
        .send({ email, event: 'paid', data: { amount: 5 } }),
    ),
  );
  expect(results.map((r) => r.status)).toEqual(Array(10).fill(200));
  expect(new Set(results.map((r) => r.body.data.event)).size).toBe(1);
  const rows = await ctx.api.database.db
    .select()
    .from(events)
    .where(and(eq(events.contactId, results[0].body.data.contact), eq(events.name, 'paid')));
  expect(rows).toHaveLength(1);
});

test('POST /contacts: the replay keeps the first status (201) even though the contact now exists', async () => {
  const email = recipient('pc');
  const key = randomUUID();
  const first = await post('/contacts', { email, data: { a: 1 } }, key);
  expect(first.status).toBe(201);
  const again = await post('/contacts', { email, data: { a: 1 } }, key);
  expect(again.status).toBe(201);
  expect(again.body.data._meta).toEqual({ isNew: true, isUpdate: false });
  const fresh = await post('/contacts', { email, data: { a: 1 } });
  expect(fresh.status).toBe(200);
});

test('a failed request does not consume its key; keys are per project; expired keys start over', async () => {
  const to = recipient('fail');
  const key = randomUUID();
  const bad = await post('/v1/send', { to, from: 'a@unverified.example', subject: 's', body: 'b' }, key);
  expect(bad.status).toBe(422);
  expect(bad.body.error.code).toBe('VALIDATION_ERROR');
  const good = await post('/v1/send', { to, from: `a@${ctx.p.domain}`, subject: 's', body: 'b' }, key);
  expect(good.status).toBe(202);
  expect(good.headers['idempotent-replayed']).toBeUndefined();

  const other = await createTestProject(ctx.api.database);
  const theirs = await post('/v1/send', { to, from: `a@${other.domain}`, subject: 's', body: 'b' }, key, other);
  expect(theirs.status).toBe(202);
  expect(theirs.headers['idempotent-replayed']).toBeUndefined();
  expect(await emailRows(to)).toHaveLength(2);

  await ctx.api.database.db
    .update(idempotencyKeys)
    .set({ createdAt: sql`now() - interval '25 hours'` })
    .where(and(eq(idempotencyKeys.projectId, ctx.p.id), eq(idempotencyKeys.key, key)));
  const afterExpiry = await post('/v1/send', { to, from: `a@${ctx.p.domain}`, subject: 'new day', body: 'b' }, key);
  expect(afterExpiry.status).toBe(202);
  expect(afterExpiry.headers['idempotent-replayed']).toBeUndefined();
  expect(await emailRows(to)).toHaveLength(3);
});

test.each([
  ['an empty', ''],
  ['a 256-character', 'x'.repeat(256)],
  ['a spaced', 'has space'],
  ['a non-ASCII', 'ünï'],
])('400 INVALID_PARAMETERS for %s key', async (_label, key) => {
  const res = await request(ctx.api.app)
    .post('/contacts')
    .set('Authorization', ctx.p.auth)
    .set('Idempotency-Key', key)
    .send({ email: recipient() });
  expect(res.status).toBe(400);
  expect(res.body.error.errors[0].field).toBe('Idempotency-Key');
});
