/**
 * POST /v1/track, POST /events/track (Plunk's path), GET /events, GET /events/names: happy path, concurrency,
 * Plunk v2 forms (eventName, page/pageSize, events, eventNames), IDN addresses, errors, security.
 */
import request from 'supertest';
import { createTestProject, recipient, useApiWithProject, waitFor, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const track = (body: object, key: string) =>
  request(ctx.api.app).post('/v1/track').set('Authorization', `Bearer ${key}`).send(body);
const get = (project: TestProject, path: string) => request(ctx.api.app).get(path).set('Authorization', project.auth);

describe('POST /v1/track', () => {
  test('creates the contact (subscribed by default) and the event; public and secret keys; Track result', async () => {
    const email = recipient('t');
    const res = await track(
      { email, event: '  signed-up ', data: { plan: 'pro', page: { value: '/pricing', persistent: false } } },
      ctx.p.publicKey,
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      success: true,
      data: { contact: expect.any(String), event: expect.any(String), timestamp: expect.any(String) },
    });
    const contact = await get(ctx.p, `/contacts/${res.body.data.contact}`);
    expect(contact.body.data).toMatchObject({ email, subscribed: true, data: { plan: 'pro' } });
    expect(contact.body.data.data).not.toHaveProperty('page');
    const list = await get(ctx.p, `/events?contactId=${res.body.data.contact}&name=signed-up`);
    expect(list.body.data.items).toEqual([
      {
        id: res.body.data.event,
        name: 'signed-up',
        contactId: res.body.data.contact,
        email,
        contact: { id: res.body.data.contact, email },
        data: { plan: 'pro', page: '/pricing' },
        test: false,
        createdAt: res.body.data.timestamp,
      },
    ]);
    // A new subscribed contact also gets the system event that workflows can start on.
    const system = await get(ctx.p, `/events?contactId=${res.body.data.contact}&name=contact.subscribed`);
    expect(system.body.data.items).toEqual([
      expect.objectContaining({ name: 'contact.subscribed', data: { method: 'api' } }),
    ]);
    const bySecret = await track({ email, event: 'logged-in' }, ctx.p.secretKey);
    expect(bySecret.status).toBe(200);
    expect(bySecret.body.data.contact).toBe(res.body.data.contact);
  });

  test('subscribed: default only for new contacts; stated values change existing ones', async () => {
    const email = recipient('s');
    const first = await track({ email, event: 'a', subscribed: false }, ctx.p.publicKey);
    const read = async () => (await get(ctx.p, `/contacts/${first.body.data.contact}`)).body.data.subscribed;
    expect(await read()).toBe(false);
    await track({ email, event: 'b' }, ctx.p.publicKey);
    expect(await read()).toBe(false);
    await track({ email, event: 'c', subscribed: true }, ctx.p.publicKey);
    expect(await read()).toBe(true);
    // Only the change to subscribed is a subscription event; creating the contact unsubscribed is none.
    const system = await get(ctx.p, `/events?contactId=${first.body.data.contact}&name=contact.subscribed`);
    expect(system.body.data.total).toBe(1);
  });

  test('100 concurrent calls for one new address: one contact, 100 events, every call 200', async () => {
    const q = await createTestProject(ctx.api.database);
    const email = recipient('burst');
    const results = await Promise.all(
      Array.from({ length: 100 }, (_, i) => track({ email, event: 'burst', data: { [`k${i}`]: i } }, q.publicKey)),
    );
    expect(results.map((r) => r.status)).toEqual(Array(100).fill(200));
    expect(new Set(results.map((r) => r.body.data.contact)).size).toBe(1);
    expect(new Set(results.map((r) => r.body.data.event)).size).toBe(100);
    const contacts = await get(q, '/contacts');
    expect(contacts.body.data.total).toBe(1);
    expect(Object.keys(contacts.body.data.items[0].data)).toHaveLength(100);
    const events = await get(q, '/events?limit=100&name=burst');
    expect(events.body.data).toMatchObject({ total: 100, hasMore: false });
    // One contact was created subscribed: one contact.subscribed, however many requests raced to create it.
    const names = await get(q, '/events/names');
    expect(names.body.data.items).toEqual([
      { name: 'burst', count: 100, firstSeenAt: expect.any(String), lastSeenAt: expect.any(String) },
      { name: 'contact.subscribed', count: 1, firstSeenAt: expect.any(String), lastSeenAt: expect.any(String) },
    ]);
  });

  test.each(
    [
      [{ event: 'e' }, 'email', 'invalid_type'],
      [{ email: 'nope', event: 'e' }, 'email', 'invalid_string'],
      [{ email: 'a@b.test' }, 'event', 'invalid_type'],
      [{ email: 'a@b.test', event: '   ' }, 'event', 'too_small'],
      [{ email: 'a@b.test', event: 'x'.repeat(256) }, 'event', 'too_big'],
      [{ email: 'a@b.test', event: 'email.opened' }, 'event', 'custom'],
      [{ email: 'a@b.test', event: 'Contact.Created' }, 'event', 'custom'],
      [{ email: 'a@b.test', event: 'segment.entered' }, 'event', 'custom'],
      [{ email: 'a@b.test', event: 'e', data: 'x' }, 'data', 'invalid_type'],
      [{ email: 'a@b.test', event: 'e', extra: 1 }, 'extra', 'unrecognized_keys'],
    ].map(([body, field, code]) => ({ body: body as object, field, code })),
  )('422 names $field ($code)', async ({ body, field, code }) => {
    const res = await track(body, ctx.p.publicKey);
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
    expect(res.body.message).toBeDefined();
  });

  test('an internationalised domain is stored in punycode and found either way; a non-ASCII local part is 422 saying why', async () => {
    const tag = Math.random().toString(36).slice(2, 8);
    const res = await track({ email: `Ann.${tag}@Bücher.DE`, event: 'idn' }, ctx.p.publicKey);
    expect(res.status).toBe(200);
    const contact = await get(ctx.p, `/contacts/${res.body.data.contact}`);
    expect(contact.body.data.email).toBe(`Ann.${tag}@xn--bcher-kva.de`);
    const again = await track({ email: `ann.${tag}@xn--bcher-kva.de`, event: 'idn' }, ctx.p.publicKey);
    expect(again.body.data.contact).toBe(res.body.data.contact);
    expect(
      (await get(ctx.p, `/events?email=${encodeURIComponent(`ann.${tag}@bücher.de`)}&name=idn`)).body.data.total,
    ).toBe(2);
    const local = await track({ email: `jürgen.${tag}@example.de`, event: 'idn' }, ctx.p.publicKey);
    expect(local.status).toBe(422);
    expect(local.body.error.errors).toEqual([
      {
        field: 'email',
        message: expect.stringMatching(/only ASCII characters before the @.*SMTPUTF8/),
        code: 'invalid_string',
      },
    ]);
    expect((await track({ email: 'a@bü_cher..de', event: 'idn' }, ctx.p.publicKey)).status).toBe(422);
  });

  test('a refused event creates no contact', async () => {
    const email = recipient('refused');
    expect((await track({ email, event: 'email.sent' }, ctx.p.publicKey)).status).toBe(422);
    expect((await get(ctx.p, `/contacts?search=${encodeURIComponent(email)}`)).body.data.total).toBe(0);
  });

  test('401 without a key or with an unknown one; disabled project 403', async () => {
    expect((await request(ctx.api.app).post('/v1/track').send({ email: 'a@b.test', event: 'e' })).status).toBe(401);
    expect((await track({ email: 'a@b.test', event: 'e' }, `pk_${'x'.repeat(43)}`)).status).toBe(401);
    const q = await createTestProject(ctx.api.database);
    await request(ctx.api.app)
      .post(`/admin/projects/${q.id}/disable`)
      .set('Authorization', 'Bearer test-admin-token-0123456789');
    const res = await track({ email: 'a@b.test', event: 'e' }, q.publicKey);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('PROJECT_DISABLED');
  });
});

describe('GET /events and /events/names', () => {
  let q: TestProject;
  const a = recipient('ea');
  const b = recipient('eb');
  let stamps: string[] = [];
  /** Records the same five events in `project`; @returns their timestamps, each later than the one before. */
  const seedEvents = async (project: TestProject): Promise<string[]> => {
    const at: string[] = [];
    // Contacts created unsubscribed, so the only events are these five (no contact.subscribed).
    for (const [email, event] of [
      [a, 'viewed'],
      [b, 'viewed'],
      [a, 'bought'],
      [a, 'viewed'],
      [b, 'left'],
    ] as const) {
      at.push(
        (await track({ email, event, subscribed: false, data: { n: at.length } }, project.secretKey)).body.data
          .timestamp,
      );
      // Distinct millisecond timestamps (the since/until bounds are ms): the next event waits for the clock to move on.
      const last = Date.parse(at[at.length - 1]);
      await waitFor(async () => Date.now() > last, 1_000, 'the clock to pass the last event');
    }
    expect(at.map(Date.parse)).toEqual([...at.map(Date.parse)].sort((x, y) => x - y));
    expect(new Set(at).size).toBe(at.length);
    return at;
  };
  // The tests below only read this project; the one that deletes a contact seeds a project of its own.
  beforeAll(async () => {
    q = await createTestProject(ctx.api.database);
    stamps = await seedEvents(q);
  });

  test('newest first, keyset pages, totals', async () => {
    const first = await get(q, '/events?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ total: 5, totalExact: true, hasMore: true });
    expect(first.body.data.items.map((e: { data: { n: number } }) => e.data.n)).toEqual([4, 3]);
    const rest: number[] = [];
    let cursor = first.body.data.nextCursor;
    while (cursor) {
      const page = await get(q, `/events?limit=2&cursor=${cursor}`);
      rest.push(...page.body.data.items.map((e: { data: { n: number } }) => e.data.n));
      cursor = page.body.data.nextCursor;
    }
    expect(rest).toEqual([2, 1, 0]);
  });

  test('filters: contactId, email (case-insensitive), name, since/until (inclusive), combined', async () => {
    const byEmail = await get(q, `/events?email=${encodeURIComponent(a.toUpperCase())}`);
    expect(byEmail.body.data.items.map((e: { data: { n: number } }) => e.data.n)).toEqual([3, 2, 0]);
    const contactId = byEmail.body.data.items[0].contactId;
    expect((await get(q, `/events?contactId=${contactId}`)).body.data.total).toBe(3);
    expect((await get(q, '/events?name=viewed')).body.data.total).toBe(3);
    expect(
      (await get(q, `/events?name=viewed&email=${encodeURIComponent(b)}`)).body.data.items.map(
        (e: { data: { n: number } }) => e.data.n,
      ),
    ).toEqual([1]);
    const window = await get(q, `/events?since=${stamps[1]}&until=${stamps[3]}`);
    expect(window.body.data.items.map((e: { data: { n: number } }) => e.data.n)).toEqual([3, 2, 1]);
    expect((await get(q, '/events?email=nobody%40nowhere.test')).body.data).toMatchObject({ total: 0, items: [] });
  });

  test('names: distinct, alphabetical, with counts and first/last seen; keyset pages', async () => {
    const names = await get(q, '/events/names');
    expect(names.body.data).toMatchObject({ total: 3, hasMore: false });
    expect(names.body.data.items.map((n: { name: string; count: number }) => [n.name, n.count])).toEqual([
      ['bought', 1],
      ['left', 1],
      ['viewed', 3],
    ]);
    const viewed = names.body.data.items[2];
    expect(viewed.firstSeenAt).toBe(stamps[0]);
    expect(viewed.lastSeenAt).toBe(stamps[3]);
    const p1 = await get(q, '/events/names?limit=2');
    const p2 = await get(q, `/events/names?limit=2&cursor=${p1.body.data.nextCursor}`);
    expect([...p1.body.data.items, ...p2.body.data.items].map((n: { name: string }) => n.name)).toEqual([
      'bought',
      'left',
      'viewed',
    ]);
  });

  test("Plunk's forms: eventName filter, page/pageSize, events and page fields; eventNames", async () => {
    const byName = await get(q, '/events?eventName=viewed');
    expect(byName.status).toBe(200);
    expect(byName.body.data.total).toBe(3);
    expect(byName.body.data.events).toEqual(byName.body.data.items);
    expect(byName.body.data).toMatchObject({ page: 1, pageSize: 20, totalPages: 1 });
    expect(byName.body.data.items.every((e: { name: string }) => e.name === 'viewed')).toBe(true);
    expect((await get(q, '/events?eventName=viewed&name=viewed')).body.data.total).toBe(3);
    const pages: number[][] = [];
    for (const page of [1, 2, 3]) {
      const r = await get(q, `/events?page=${page}&pageSize=2`);
      expect(r.body.data).toMatchObject({ page, pageSize: 2, totalPages: 3, total: 5 });
      pages.push(r.body.data.events.map((e: { data: { n: number } }) => e.data.n));
    }
    expect(pages).toEqual([[4, 3], [2, 1], [0]]);
    expect(
      (await get(q, '/events?page=2&pageSize=2&eventName=viewed')).body.data.events.map(
        (e: { data: { n: number } }) => e.data.n,
      ),
    ).toEqual([0]);
    const names = await get(q, '/events/names');
    expect(names.body.data.eventNames).toEqual(['bought', 'left', 'viewed']);
  });

  test('deleting a contact removes its events from lists and counts', async () => {
    const own = await createTestProject(ctx.api.database);
    await seedEvents(own);
    const r = await get(own, `/events?email=${encodeURIComponent(b)}`);
    const contactId = r.body.data.items[0].contactId;
    expect((await request(ctx.api.app).delete(`/contacts/${contactId}`).set('Authorization', own.auth)).status).toBe(
      200,
    );
    expect((await get(own, '/events')).body.data.total).toBe(3);
    const names = await get(own, '/events/names');
    expect(names.body.data.items.map((n: { name: string; count: number }) => [n.name, n.count])).toEqual([
      ['bought', 1],
      ['viewed', 2],
    ]);
  });

  test('400 on bad parameters', async () => {
    for (const qs of [
      'contactId=nope',
      'since=yesterday',
      'limit=500',
      'cursor=abc',
      `since=${stamps[3]}&until=${stamps[0]}`,
      'colour=red',
      'eventName=a&name=b',
      'page=0',
      'pageSize=101',
      'page=1000&pageSize=100',
    ]) {
      const res = await get(q, `/events?${qs}`);
      expect(res.status).toBe(400);
    }
    expect((await get(q, '/events/names?cursor=zz')).status).toBe(400);
  });

  test('tenant isolation: another project sees none of these events or names; pk_ is refused', async () => {
    const other = await createTestProject(ctx.api.database);
    const mine = await get(q, '/events?limit=1');
    expect((await get(other, '/events')).body.data.total).toBe(0);
    expect((await get(other, `/events?contactId=${mine.body.data.items[0].contactId}`)).body.data.total).toBe(0);
    expect((await get(other, `/events?email=${encodeURIComponent(a)}`)).body.data.total).toBe(0);
    expect((await get(other, '/events/names')).body.data.total).toBe(0);
    const pk = await request(ctx.api.app).get('/events').set('Authorization', `Bearer ${q.publicKey}`);
    expect(pk.status).toBe(403);
  });
});

describe('POST /events/track (Plunk v2 path)', () => {
  const post = (body: object, key = ctx.p.secretKey) =>
    request(ctx.api.app).post('/events/track').set('Authorization', `Bearer ${key}`).send(body);

  test("our body: the same operation as /v1/track, 201 with the Track result and Plunk's event fields", async () => {
    const email = recipient('pt');
    const res = await post({
      email,
      event: 'signed-up',
      data: { plan: 'pro', page: { value: '/p', persistent: false } },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      contact: expect.any(String),
      event: expect.any(String),
      timestamp: expect.any(String),
      id: res.body.data.event,
      projectId: ctx.p.id,
      contactId: res.body.data.contact,
      name: 'signed-up',
      data: { plan: 'pro', page: '/p' },
      createdAt: res.body.data.timestamp,
    });
    const contact = await get(ctx.p, `/contacts/${res.body.data.contact}`);
    expect(contact.body.data).toMatchObject({ email, subscribed: true, data: { plan: 'pro' } });
    const listed = await get(ctx.p, `/events?contactId=${res.body.data.contact}&eventName=signed-up`);
    expect(listed.body.data.items.map((e: { id: string }) => e.id)).toEqual([res.body.data.id]);
  });

  test("Plunk's body: name and contactId of an existing contact", async () => {
    const email = recipient('pc');
    const first = await post({ email, event: 'first' });
    const res = await post({ name: 'plunk-event', contactId: first.body.data.contactId, data: { x: 1 } });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      name: 'plunk-event',
      contactId: first.body.data.contactId,
      contact: first.body.data.contactId,
      data: { x: 1 },
    });
    expect((await get(ctx.p, `/contacts/${first.body.data.contactId}`)).body.data.data).toEqual({ x: 1 });
  });

  test.each(
    [
      [{ email: 'a@b.test' }, 'event', 'invalid_type'],
      [{ event: 'e' }, 'email', 'invalid_type'],
      [{ email: 'a@b.test', event: 'e', name: 'e' }, 'name', 'custom'],
      [{ email: 'a@b.test', contactId: '01a20c99-8048-7298-b435-4dc10216336a', event: 'e' }, 'contactId', 'custom'],
      [{ contactId: 'nope', name: 'e' }, 'contactId', 'invalid_string'],
      [{ email: 'a@b.test', name: 'email.sent' }, 'name', 'custom'],
      [{ email: 'a@b.test', event: 'e', emailId: 'x' }, 'emailId', 'unrecognized_keys'],
    ].map(([body, field, code]) => ({ body: body as object, field, code })),
  )('422 names $field ($code)', async ({ body, field, code }) => {
    const res = await post(body);
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
  });

  test("security: another project's contact id is 404 and nothing is recorded; pk_ is 403; no key is 401", async () => {
    const other = await createTestProject(ctx.api.database);
    const theirs = await request(ctx.api.app)
      .post('/v1/track')
      .set('Authorization', `Bearer ${other.secretKey}`)
      .send({ email: recipient('o'), event: 'x' });
    const res = await post({ name: 'stolen', contactId: theirs.body.data.contact });
    expect(res.status).toBe(404);
    expect((await get(other, '/events?eventName=stolen')).body.data.total).toBe(0);
    expect((await get(ctx.p, '/events?eventName=stolen')).body.data.total).toBe(0);
    const pk = await post({ email: recipient('pk'), event: 'e' }, ctx.p.publicKey);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    expect((await request(ctx.api.app).post('/events/track').send({ email: 'a@b.test', event: 'e' })).status).toBe(401);
  });
});
