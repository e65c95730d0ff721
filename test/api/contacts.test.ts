/**
 * Contacts: upsert, read, merge, delete; keyset listing with filters, search and totals; errors; tenant isolation;
 * pagination while contacts are inserted and deleted; concurrent merges.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { emailEvents, emails } from '@mailroom/db/schema/emails';
import { events } from '@mailroom/db/schema/events';
import { createTestProject, recipient, useApiWithProject, client, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const as = (project: TestProject) => client(ctx.api.app, project);

/** Inserts `n` contacts straight into the project (fast setup for list tests). */
async function seed(projectId: string, n: number, tag: string): Promise<void> {
  const ids = Array.from({ length: n }, () => newId());
  await ctx.api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed)
    select id, ${projectId}::uuid, ${tag} || i || '@list.test', ${tag} || i || '@list.test', i % 3 <> 0
    from unnest(${sql.param(ids)}::uuid[]) with ordinality as t(id, i)`);
}

describe('happy path', () => {
  test('POST upserts: 201 isNew, then 200 isUpdate with data merged and subscription kept', async () => {
    const email = recipient('c');
    const first = await as(ctx.p).post('/contacts', { email, data: { plan: 'free', seats: 1 } });
    expect(first.status).toBe(201);
    expect(first.body.data).toMatchObject({
      email,
      subscribed: true,
      data: { plan: 'free', seats: 1 },
      _meta: { isNew: true, isUpdate: false },
    });
    await as(ctx.p).patch(`/contacts/${first.body.data.id}`, { subscribed: false });
    const again = await as(ctx.p).post('/contacts', { email: email.toUpperCase(), data: { plan: 'pro', seats: null } });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({
      id: first.body.data.id,
      subscribed: false,
      data: { plan: 'pro' },
      _meta: { isNew: false, isUpdate: true },
    });
    expect(again.body.data.data).not.toHaveProperty('seats');
    const explicit = await as(ctx.p).post('/contacts', { email, subscribed: true });
    expect(explicit.body.data.subscribed).toBe(true);
  });

  test('GET and PATCH: merge semantics (null removes a key), subscribed only when given', async () => {
    const c = await as(ctx.p).post('/contacts', { email: recipient(), subscribed: false, data: { a: 1, b: { x: 1 } } });
    const id = c.body.data.id;
    const got = await as(ctx.p).get(`/contacts/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toEqual({
      id,
      email: c.body.data.email,
      subscribed: false,
      data: { a: 1, b: { x: 1 } },
      snoozedUntil: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
      topics: [],
      confirmations: [],
    });
    const p = await as(ctx.p).patch(`/contacts/${id}`, { data: { a: null, b: { y: 2 }, c: 'three' } });
    expect(p.status).toBe(200);
    expect(p.body.data).toMatchObject({ subscribed: false, data: { b: { y: 2 }, c: 'three' } });
    expect(p.body.data.data).not.toHaveProperty('a');
    expect((await as(ctx.p).patch(`/contacts/${id}`, { subscribed: true })).body.data).toMatchObject({
      subscribed: true,
      data: { c: 'three' },
    });
  });

  test('DELETE removes the contact and its events, cancels its queued email, keeps sent mail in the log', async () => {
    const email = recipient('del');
    const sent = await as(ctx.p).post('/v1/send', { to: email, from: `a@${ctx.p.domain}`, subject: 's', body: 'b' });
    const contactId = sent.body.data.emails[0].contact.id;
    const queuedId = sent.body.data.emails[0].email;
    const second = await as(ctx.p).post('/v1/send', { to: email, from: `a@${ctx.p.domain}`, subject: 's2', body: 'b' });
    const sentId = second.body.data.emails[0].email;
    await ctx.api.database.db
      .update(emails)
      .set({ status: 'sent', messageId: `<${sentId}@t>` })
      .where(eq(emails.id, sentId));
    await as(ctx.p).post('/v1/track', { email, event: 'signed-up' });

    const d = await as(ctx.p).del(`/contacts/${contactId}`);
    expect(d.status).toBe(200);
    expect(d.body.data).toEqual({ id: contactId, deleted: true });
    expect((await as(ctx.p).get(`/contacts/${contactId}`)).status).toBe(404);
    expect(await ctx.api.database.db.select().from(events).where(eq(events.contactId, contactId))).toHaveLength(0);
    const [queued] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, queuedId));
    expect(queued).toMatchObject({ status: 'cancelled', contactId: null, error: 'contact deleted' });
    const timeline = await ctx.api.database.db.select().from(emailEvents).where(eq(emailEvents.emailId, queuedId));
    expect(timeline.map((e) => e.type)).toContain('cancelled');
    const log = await as(ctx.p).get(`/emails/${sentId}`);
    expect(log.status).toBe(200);
    expect(log.body.data.status).toBe('sent');
    expect((await as(ctx.p).del(`/contacts/${contactId}`)).status).toBe(404);
  });

  test('list: newest first, keyset pages in both forms, subscribed filter, exact totals from counters', async () => {
    const q = await createTestProject(ctx.api.database);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++)
      ids.push((await as(q).post('/contacts', { email: `p${i}@x.test`, subscribed: i % 2 === 0 })).body.data.id);
    const first = await as(q).get('/contacts?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ hasMore: true, total: 5, totalExact: true });
    expect(first.body.data.items.map((c: { id: string }) => c.id)).toEqual([ids[4], ids[3]]);
    expect(first.body.data.contacts).toEqual(first.body.data.items);
    expect(first.body.data.cursor).toBe(first.body.data.nextCursor);
    const second = await as(q).get(`/contacts?limit=2&cursor=${first.body.data.nextCursor}`);
    expect(second.body.data.items.map((c: { id: string }) => c.id)).toEqual([ids[2], ids[1]]);
    const last = await as(q).get(`/contacts?limit=2&cursor=${second.body.data.nextCursor}`);
    expect(last.body.data).toMatchObject({ hasMore: false, nextCursor: null, cursor: null });
    const subs = await as(q).get('/contacts?subscribed=true');
    expect(subs.body.data.total).toBe(3);
    expect(subs.body.data.items.every((c: { subscribed: boolean }) => c.subscribed)).toBe(true);
    const unsubs = await as(q).get('/contacts?subscribed=false');
    expect(unsubs.body.data.total).toBe(2);
    await as(q).patch(`/contacts/${ids[1]}`, { subscribed: true });
    await as(q).del(`/contacts/${ids[0]}`);
    expect((await as(q).get('/contacts?subscribed=true')).body.data.total).toBe(3);
    expect((await as(q).get('/contacts')).body.data.total).toBe(4);
  });

  test('search: case-insensitive substring of the address, with exact totals; LIKE wildcards are literal', async () => {
    const q = await createTestProject(ctx.api.database);
    for (const e of ['Alice@Example.com', 'bob@example.com', 'carol@other.org', 'a_b@x.test'])
      await as(q).post('/contacts', { email: e });
    const res = await as(q).get('/contacts?search=EXAMPLE');
    expect(res.body.data.total).toBe(2);
    expect(res.body.data.items.map((c: { email: string }) => c.email).sort()).toEqual([
      'Alice@example.com',
      'bob@example.com',
    ]);
    expect((await as(q).get('/contacts?search=lice@ex')).body.data.items).toHaveLength(1);
    expect((await as(q).get('/contacts?search=_')).body.data.total).toBe(1);
    expect((await as(q).get('/contacts?search=%25')).body.data.total).toBe(0);
    const combined = await as(q).get('/contacts?search=example&subscribed=false');
    expect(combined.body.data.total).toBe(0);
  });
});

describe('guarantees', () => {
  test('pagination returns every contact exactly once while contacts are inserted and deleted', async () => {
    const q = await createTestProject(ctx.api.database);
    await seed(q.id, 300, 'page');
    const stable = new Set(
      (
        (
          await ctx.api.database.db.execute<{ id: string }>(
            sql`select id from contacts where project_id = ${q.id}::uuid`,
          )
        ).rows as { id: string }[]
      ).map((r) => r.id),
    );
    // Contacts that exist for the whole listing: all but the ones deleted below.
    const doomed = [...stable].filter((_, i) => i % 10 === 0);
    for (const id of doomed) stable.delete(id);

    const seen = new Map<string, number>();
    let cursor: string | null = null;
    let page = 0;
    let churn = 0;
    do {
      const res: request.Response = await as(q).get(`/contacts?limit=25${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.status).toBe(200);
      for (const c of res.body.data.items as { id: string }[]) seen.set(c.id, (seen.get(c.id) ?? 0) + 1);
      cursor = res.body.data.nextCursor;
      // Between pages: new contacts arrive, and some old ones (not yet listed or already listed) go.
      await as(q).post('/contacts', { email: recipient(`new${page}`) });
      const gone = doomed[churn++];
      if (gone) await as(q).del(`/contacts/${gone}`);
      page++;
    } while (cursor);
    for (const id of doomed.slice(churn)) await as(q).del(`/contacts/${id}`);

    for (const id of stable) expect(seen.get(id)).toBe(1);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
  });

  test('concurrent data updates on one contact lose no key', async () => {
    const email = recipient('merge');
    const c = await as(ctx.p).post('/contacts', { email });
    const id = c.body.data.id;
    await Promise.all(
      Array.from({ length: 30 }, (_, i) =>
        i % 3 === 0
          ? as(ctx.p).patch(`/contacts/${id}`, { data: { [`k${i}`]: i } })
          : i % 3 === 1
            ? as(ctx.p).post('/contacts', { email, data: { [`k${i}`]: i } })
            : as(ctx.p).post('/v1/track', { email, event: 'e', data: { [`k${i}`]: i } }),
      ),
    );
    const got = await as(ctx.p).get(`/contacts/${id}`);
    expect(Object.keys(got.body.data.data).sort()).toEqual(Array.from({ length: 30 }, (_, i) => `k${i}`).sort());
  });
});

describe('errors', () => {
  test.each([
    [{}, 'email', 'invalid_type'],
    [{ email: 'nope' }, 'email', 'invalid_string'],
    [{ email: 'a@b.test', subscribed: 'yes' }, 'subscribed', 'invalid_type'],
    [{ email: 'a@b.test', data: [] }, 'data', 'invalid_type'],
    [{ email: 'a@b.test', name: 'x' }, 'name', 'unrecognized_keys'],
  ])('422 on POST %j names %s', async (body, field, code) => {
    const res = await as(ctx.p).post('/contacts', body);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
  });

  test('PATCH: 422 on an empty or invalid body; 404 unknown; 400 malformed id; list parameters 400', async () => {
    const c = await as(ctx.p).post('/contacts', { email: recipient() });
    expect((await as(ctx.p).patch(`/contacts/${c.body.data.id}`, {})).status).toBe(422);
    expect((await as(ctx.p).patch(`/contacts/${c.body.data.id}`, { email: 'x@y.test' })).status).toBe(422);
    expect((await as(ctx.p).patch('/contacts/0190a8c0-0000-7000-8000-000000000000', { subscribed: true })).status).toBe(
      404,
    );
    expect((await as(ctx.p).get('/contacts/not-a-uuid')).status).toBe(400);
    for (const q of ['limit=0', 'limit=101', 'subscribed=maybe', 'cursor=zzz', 'search=', 'other=1']) {
      const res = await as(ctx.p).get(`/contacts?${q}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_PARAMETERS');
    }
  });

  test('a failed request changes nothing', async () => {
    const email = recipient('nochange');
    const res = await as(ctx.p).post('/contacts', { email, data: { a: 1 }, extra: true });
    expect(res.status).toBe(422);
    expect((await as(ctx.p).get(`/contacts?search=${encodeURIComponent(email)}`)).body.data.total).toBe(0);
  });
});

describe('security', () => {
  test('another project’s contact is 404 on every route, and search never crosses projects', async () => {
    const other = await createTestProject(ctx.api.database);
    const email = recipient('iso');
    const mine = await as(ctx.p).post('/contacts', { email, data: { secret: 1 } });
    const id = mine.body.data.id;
    expect((await as(other).get(`/contacts/${id}`)).status).toBe(404);
    expect((await as(other).patch(`/contacts/${id}`, { subscribed: false })).status).toBe(404);
    expect((await as(other).del(`/contacts/${id}`)).status).toBe(404);
    expect((await as(other).get(`/contacts?search=${encodeURIComponent(email)}`)).body.data).toMatchObject({
      total: 0,
      items: [],
    });
    expect((await as(other).get('/contacts')).body.data.items.some((c: { id: string }) => c.id === id)).toBe(false);
    // The same address in the other project is a different contact.
    const theirs = await as(other).post('/contacts', { email });
    expect(theirs.status).toBe(201);
    expect(theirs.body.data.id).not.toBe(id);
    expect((await as(ctx.p).get(`/contacts/${id}`)).body.data.data).toEqual({ secret: 1 });
  });

  test('public key 403, no key 401, disabled project 403', async () => {
    const q = await createTestProject(ctx.api.database);
    const pk = await request(ctx.api.app).get('/contacts').set('Authorization', `Bearer ${q.publicKey}`);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    expect((await request(ctx.api.app).post('/contacts').send({ email: 'a@b.test' })).status).toBe(401);
    await request(ctx.api.app)
      .post(`/admin/projects/${q.id}/disable`)
      .set('Authorization', 'Bearer test-admin-token-0123456789');
    const disabled = await as(q).get('/contacts');
    expect(disabled.status).toBe(403);
    expect(disabled.body.error.code).toBe('PROJECT_DISABLED');
  });
});
