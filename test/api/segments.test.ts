/**
 * The segment filter language (every field kind and operator, typed comparisons, keys that are missing), its
 * errors, `GET /contacts?filter=`, segments (CRUD, static members, tracking, members listing), tenant isolation.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { newId, newIdAt } from '@mailroom/platform/ids';
import { getSegment, refreshSegment } from '@mailroom/audiences/queries/segments';
import { client, createTestProject, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (project: TestProject) => client(ctx.api.app, project);

/** Seeds one contact per row; returns ids by tag. */
async function seed(projectId: string, rows: { tag: string; subscribed?: boolean; data?: object; createdAt?: Date }[]) {
  const ids: Record<string, string> = {};
  for (const r of rows) {
    const id = newId();
    ids[r.tag] = id;
    const email = `${r.tag}.${id.slice(-6)}@seg.test`;
    await ctx.api.database.db.execute(sql`
      insert into contacts (id, project_id, email, email_key, subscribed, data, created_at, updated_at)
      values (${id}::uuid, ${projectId}::uuid, ${email}, ${email}, ${r.subscribed ?? true}, ${JSON.stringify(r.data ?? {})}::jsonb,
        ${(r.createdAt ?? new Date()).toISOString()}::timestamptz, now())`);
  }
  return ids;
}

async function event(projectId: string, contactId: string, name: string, at = Date.now()) {
  await ctx.api.database.db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    values (${newIdAt(at)}::uuid, ${projectId}::uuid, ${contactId}::uuid, ${name}, '{}'::jsonb, ${new Date(at).toISOString()}::timestamptz)`);
}

describe('filter language', () => {
  let p: TestProject;
  let ids: Record<string, string>;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
    const day = 86_400_000;
    ids = await seed(p.id, [
      {
        tag: 'pro1',
        data: {
          plan: 'pro',
          seats: 10,
          trial: false,
          renews: '2030-01-15',
          tags: 'alpha beta',
          address: { city: 'Oslo' },
        },
      },
      {
        tag: 'pro2',
        data: { plan: 'pro', seats: '12', trial: true, renews: '2020-06-01T10:00:00Z', address: { city: 'Bergen' } },
      },
      { tag: 'free', data: { plan: 'free', seats: 1, renews: 'not a date', tags: 'beta' } },
      { tag: 'none', data: {} },
      { tag: 'nullplan', data: { plan: null, seats: 3 } },
      { tag: 'unsub', subscribed: false, data: { plan: 'Pro' } },
      {
        tag: 'old',
        data: { plan: 'team', lastSeen: new Date(Date.now() - 2 * day).toISOString() },
        createdAt: new Date(Date.now() - 40 * day),
      },
    ]);
    await event(p.id, ids.pro1, 'purchase');
    await event(p.id, ids.pro1, 'purchase');
    await event(p.id, ids.pro1, 'purchase', Date.now() - 10 * day);
    await event(p.id, ids.free, 'purchase', Date.now() - 10 * day);
    await event(p.id, ids.none, 'login');
  });

  const tagsOf = async (filter: unknown): Promise<string[]> => {
    const res = await as(p).post('/segments/preview', { filter, sampleSize: 50 });
    expect(res.status).toBe(200);
    const byId = Object.fromEntries(Object.entries(ids).map(([t, id]) => [id, t]));
    const tags = res.body.data.sample.map((c: { id: string }) => byId[c.id]).sort();
    expect(res.body.data.count).toBe(tags.length);
    return tags;
  };
  const one = (field: string, operator: string, value?: unknown, extra: object = {}) => [
    { field, operator, ...(value !== undefined ? { value } : {}), ...extra },
  ];

  test.each([
    ['data.plan equals "pro" (exact, case-sensitive)', one('data.plan', 'equals', 'pro'), ['pro1', 'pro2']],
    [
      'data.plan notEquals "pro" includes contacts without a plan or with null',
      one('data.plan', 'notEquals', 'pro'),
      ['free', 'none', 'nullplan', 'old', 'unsub'],
    ],
    ['data.seats equals 10 compares numbers, not the string "12"', one('data.seats', 'equals', 10), ['pro1']],
    ['data.seats greaterThan 2 ignores string values', one('data.seats', 'greaterThan', 2), ['nullplan', 'pro1']],
    ['data.seats lessThanOrEqual 3', one('data.seats', 'lessThanOrEqual', 3), ['free', 'nullplan']],
    ['data.trial equals true (boolean)', one('data.trial', 'equals', true), ['pro2']],
    [
      'data.renews greaterThan a date compares timestamps; a non-date string never matches',
      one('data.renews', 'greaterThan', '2025-01-01'),
      ['pro1'],
    ],
    ['data.renews lessThan a date-time', one('data.renews', 'lessThan', '2021-01-01T00:00:00Z'), ['pro2']],
    ['data.tags contains (case-insensitive)', one('data.tags', 'contains', 'BETA'), ['free', 'pro1']],
    [
      'data.tags notContains includes contacts without tags',
      one('data.tags', 'notContains', 'alpha'),
      ['free', 'none', 'nullplan', 'old', 'pro2', 'unsub'],
    ],
    ['data.plan startsWith / endsWith', one('data.plan', 'startsWith', 'fr'), ['free']],
    ['data.address.city (nested path) endsWith', one('data.address.city', 'endsWith', 'gen'), ['pro2']],
    ['data.plan in', one('data.plan', 'in', ['free', 'team']), ['free', 'old']],
    [
      'data.plan notIn includes the planless',
      one('data.plan', 'notIn', ['pro', 'Pro']),
      ['free', 'none', 'nullplan', 'old'],
    ],
    ['data.plan exists (null counts as missing)', one('data.plan', 'exists'), ['free', 'old', 'pro1', 'pro2', 'unsub']],
    ['data.plan notExists', one('data.plan', 'notExists'), ['none', 'nullplan']],
    ['data.lastSeen within 3 days', one('data.lastSeen', 'within', 3, { unit: 'days' }), ['old']],
    ['email contains (case-insensitive)', one('email', 'contains', 'PRO'), ['pro1', 'pro2']],
    ['subscribed equals false', one('subscribed', 'equals', false), ['unsub']],
    ['createdAt notWithin 30 days', one('createdAt', 'notWithin', 30, { unit: 'days' }), ['old']],
    [
      'createdAt lessThan a date',
      one('createdAt', 'lessThan', new Date(Date.now() - 30 * 86_400_000).toISOString()),
      ['old'],
    ],
    ['event.purchase exists (performed)', one('event.purchase', 'exists'), ['free', 'pro1']],
    ['event.purchase notExists', one('event.purchase', 'notExists'), ['none', 'nullplan', 'old', 'pro2', 'unsub']],
    ['event.purchase within 1 day', one('event.purchase', 'within', 1, { unit: 'days' }), ['pro1']],
    [
      'event.purchase notWithin 1 day includes those who never purchased',
      one('event.purchase', 'notWithin', 1, { unit: 'days' }),
      ['free', 'none', 'nullplan', 'old', 'pro2', 'unsub'],
    ],
    ['event.purchase count >= 3', one('event.purchase', 'greaterThanOrEqual', 3), ['pro1']],
    [
      'event.purchase count >= 2 in the last day',
      one('event.purchase', 'greaterThanOrEqual', 2, { window: { value: 1, unit: 'days' } }),
      ['pro1'],
    ],
    [
      'event.purchase count < 2 includes contacts that never purchased',
      one('event.purchase', 'lessThan', 2),
      ['free', 'none', 'nullplan', 'old', 'pro2', 'unsub'],
    ],
    ['event.purchase count equals 0', one('event.purchase', 'equals', 0), ['none', 'nullplan', 'old', 'pro2', 'unsub']],
    ['email.sent exists (none yet)', one('email.sent', 'exists'), []],
  ])('%s', async (_name, filter, expected) => {
    expect(await tagsOf(filter)).toEqual([...expected].sort());
  });

  test('groups: OR of groups, AND inside a group, nested conditions; a flat array is AND', async () => {
    const filter = {
      logic: 'OR',
      groups: [
        {
          filters: [
            { field: 'data.plan', operator: 'equals', value: 'pro' },
            { field: 'data.trial', operator: 'equals', value: false },
          ],
        },
        {
          filters: [{ field: 'subscribed', operator: 'equals', value: true }],
          conditions: {
            logic: 'OR',
            groups: [
              { filters: [{ field: 'data.plan', operator: 'equals', value: 'team' }] },
              { filters: [{ field: 'event.login', operator: 'exists' }] },
            ],
          },
        },
      ],
    };
    expect(await tagsOf(filter)).toEqual(['none', 'old', 'pro1']);
    expect(
      await tagsOf([
        { field: 'data.plan', operator: 'equals', value: 'pro' },
        { field: 'data.seats', operator: 'equals', value: 10 },
      ]),
    ).toEqual(['pro1']);
    expect(await tagsOf({ logic: 'AND', groups: [] })).toHaveLength(Object.keys(ids).length);
  });

  test('values are bound parameters: SQL in a value is just text', async () => {
    expect(await tagsOf(one('data.plan', 'equals', "pro'; drop table contacts; --"))).toEqual([]);
    expect(await tagsOf(one("data.x'y", 'exists'))).toEqual([]);
    expect(await tagsOf(one("event.a'); delete from events; --", 'exists'))).toEqual([]);
    expect(await tagsOf(one('data.tags', 'contains', '%'))).toEqual([]);
    expect(await tagsOf(one('data.plan', 'equals', 'pro'))).toEqual(['pro1', 'pro2']);
  });

  test('invalid filters: 422 naming the path of each problem', async () => {
    const bad = await as(p).post('/segments/preview', {
      filter: {
        logic: 'XOR',
        groups: [
          {
            filters: [
              { field: 'data.plan', operator: 'like', value: 'x' },
              { field: 'bogus', operator: 'equals', value: 1 },
            ],
          },
          {
            filters: [
              { field: 'data.seats', operator: 'greaterThan', value: true },
              { field: 'event.x', operator: 'contains', value: 'y' },
            ],
          },
          {
            filters: [
              { field: 'createdAt', operator: 'within', value: 3, unit: 'weeks' },
              { field: 'data.plan', operator: 'in', value: [] },
            ],
          },
          {
            filters: [
              { field: 'email.opened', operator: 'exists', campaignId: 'nope' },
              { field: 'data.plan', operator: 'equals' },
              { field: 'subscribed', operator: 'equals', value: 'yes', extra: 1 },
            ],
          },
        ],
      },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('VALIDATION_ERROR');
    const fields = bad.body.error.errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(
      expect.arrayContaining([
        'filter.logic',
        'filter.groups.0.filters.0.operator',
        'filter.groups.0.filters.1.field',
        'filter.groups.1.filters.0.value',
        'filter.groups.1.filters.1.operator',
        'filter.groups.2.filters.0.unit',
        'filter.groups.2.filters.1.value',
        'filter.groups.3.filters.0.campaignId',
        'filter.groups.3.filters.1.value',
        'filter.groups.3.filters.2.extra',
        'filter.groups.3.filters.2.value',
      ]),
    );
    const deep = {
      logic: 'AND',
      groups: [
        {
          conditions: {
            groups: [
              {
                conditions: {
                  groups: [{ conditions: { groups: [{ conditions: { groups: [{ conditions: { groups: [] } }] } }] } }],
                },
              },
            ],
          },
        },
      ],
    };
    const tooDeep = await as(p).post('/segments/preview', { filter: deep });
    expect(tooDeep.status).toBe(422);
    expect(tooDeep.body.error.errors[0].message).toMatch(/deeper/);
    expect((await as(p).post('/segments/preview', { filter: 'plan=pro' })).status).toBe(422);
  });

  test('GET /contacts?filter= uses the same compiler, with keyset pages and a count', async () => {
    const f = encodeURIComponent(JSON.stringify(one('data.plan', 'notEquals', 'pro')));
    const first = await as(p).get(`/contacts?limit=2&filter=${f}`);
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ total: 5, totalExact: true, hasMore: true });
    const second = await as(p).get(`/contacts?limit=10&filter=${f}&cursor=${first.body.data.nextCursor}`);
    const seen = [...first.body.data.items, ...second.body.data.items].map((c: { id: string }) => c.id).sort();
    expect(seen).toEqual([ids.free, ids.none, ids.nullplan, ids.old, ids.unsub].sort());
    const combined = await as(p).get(`/contacts?subscribed=true&filter=${f}`);
    expect(combined.body.data.total).toBe(4);
    const notJson = await as(p).get('/contacts?filter=%7Bplan');
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.errors[0].field).toBe('filter');
    const invalid = await as(p).get(
      `/contacts?filter=${encodeURIComponent(JSON.stringify(one('data.plan', 'nope', 1)))}`,
    );
    expect(invalid.status).toBe(422);
    expect(invalid.body.error.errors[0].field).toBe('filter.0.operator');
  });

  test("tenant isolation: a filter only ever sees the caller's contacts and events", async () => {
    const q = await createTestProject(ctx.api.database);
    await seed(q.id, [{ tag: 'pro-elsewhere', data: { plan: 'pro' } }]);
    const other = await as(q).post('/segments/preview', { filter: one('data.plan', 'equals', 'pro') });
    expect(other.body.data.count).toBe(1);
    expect((await as(q).post('/segments/preview', { filter: one('event.purchase', 'exists') })).body.data.count).toBe(
      0,
    );
    expect(await tagsOf(one('data.plan', 'equals', 'pro'))).toEqual(['pro1', 'pro2']);
  });
});

describe('segments', () => {
  test("DYNAMIC: create, get, list (keyset), members live, patch filter, delete; counts from the worker's refresh", async () => {
    const p = await createTestProject(ctx.api.database);
    const ids = await seed(p.id, [
      { tag: 'a', data: { plan: 'pro' } },
      { tag: 'b', data: { plan: 'pro' } },
      { tag: 'c', data: { plan: 'free' } },
    ]);
    const created = await as(p).post('/segments', {
      name: 'Pro users',
      filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }],
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      name: 'Pro users',
      type: 'DYNAMIC',
      trackMembership: false,
      description: null,
    });
    const id = created.body.data.id;
    const row = await getSegment(ctx.api.database.db, p.id, id);
    await refreshSegment(ctx.api.database.db, row!);
    expect((await as(p).get(`/segments/${id}`)).body.data).toMatchObject({
      memberCount: 2,
      memberCountAt: expect.any(String),
    });
    const members = await as(p).get(`/segments/${id}/contacts?limit=1`);
    expect(members.body.data).toMatchObject({ total: 2, hasMore: true });
    const rest = await as(p).get(`/segments/${id}/contacts?limit=5&cursor=${members.body.data.nextCursor}`);
    expect([...members.body.data.items, ...rest.body.data.items].map((c: { id: string }) => c.id).sort()).toEqual(
      [ids.a, ids.b].sort(),
    );

    const patched = await as(p).patch(`/segments/${id}`, {
      filter: [{ field: 'data.plan', operator: 'equals', value: 'free' }],
      description: 'now free',
    });
    expect(patched.status).toBe(200);
    expect(patched.body.data.description).toBe('now free');
    expect((await as(p).get(`/segments/${id}/contacts`)).body.data.items.map((c: { id: string }) => c.id)).toEqual([
      ids.c,
    ]);

    await as(p).post('/segments', { name: 'Second', type: 'STATIC' });
    const list = await as(p).get('/segments?limit=1');
    expect(list.body.data).toMatchObject({ total: 2, hasMore: true });
    expect(list.body.data.items[0].name).toBe('Second');
    const page2 = await as(p).get(`/segments?limit=1&cursor=${list.body.data.nextCursor}`);
    expect(page2.body.data.items[0].id).toBe(id);
    expect(page2.body.data.hasMore).toBe(false);

    expect((await as(p).del(`/segments/${id}`)).body.data).toEqual({ id, deleted: true, failedCampaigns: [] });
    expect((await as(p).get(`/segments/${id}`)).status).toBe(404);
  });

  test('STATIC: add and remove members by id or address; counts kept; tracking records entry and exit events', async () => {
    const p = await createTestProject(ctx.api.database);
    const ids = await seed(p.id, [{ tag: 'x' }, { tag: 'y' }, { tag: 'z' }]);
    const y = (await as(p).get(`/contacts/${ids.y}`)).body.data.email as string;
    const s = await as(p).post('/segments', { name: 'VIP', trackMembership: true });
    expect(s.body.data).toMatchObject({ type: 'STATIC', memberCount: 0 });
    const id = s.body.data.id;
    const missing = newId();
    const add = await as(p).post(`/segments/${id}/members`, {
      contactIds: [ids.x, missing],
      emails: [y.toUpperCase(), 'nobody@seg.test'],
    });
    expect(add.status).toBe(200);
    expect(add.body.data).toEqual({ changed: 2, notFound: [missing, 'nobody@seg.test'] });
    expect((await as(p).post(`/segments/${id}/members`, { contactIds: [ids.x] })).body.data.changed).toBe(0);
    expect((await as(p).get(`/segments/${id}`)).body.data.memberCount).toBe(2);
    expect(
      (await as(p).get(`/segments/${id}/contacts`)).body.data.items.map((c: { id: string }) => c.id).sort(),
    ).toEqual([ids.x, ids.y].sort());

    const removed = await as(p).post(`/segments/${id}/members/remove`, { contactIds: [ids.y] });
    expect(removed.body.data.changed).toBe(1);
    expect((await as(p).del(`/segments/${id}/members/${ids.x}`)).status).toBe(200);
    expect((await as(p).del(`/segments/${id}/members/${ids.x}`)).status).toBe(404);
    expect((await as(p).get(`/segments/${id}`)).body.data.memberCount).toBe(0);

    const evs = await as(p).get(`/events?contactId=${ids.x}`);
    expect(evs.body.data.items.map((e: { name: string }) => e.name)).toEqual(['segment.VIP.exit', 'segment.VIP.entry']);
    // A contact deleted while a member leaves the count too.
    await as(p).post(`/segments/${id}/members`, { contactIds: [ids.z] });
    await as(p).del(`/contacts/${ids.z}`);
    expect((await as(p).get(`/segments/${id}`)).body.data.memberCount).toBe(0);
  });

  test('tracked DYNAMIC segment: a refresh records entry for new members and exit for departed ones', async () => {
    const p = await createTestProject(ctx.api.database);
    const ids = await seed(p.id, [
      { tag: 'm', data: { score: 90 } },
      { tag: 'n', data: { score: 10 } },
    ]);
    const s = await as(p).post('/segments', {
      name: 'High',
      filter: [{ field: 'data.score', operator: 'greaterThan', value: 50 }],
      trackMembership: true,
    });
    const db = ctx.api.database.db;
    // Workers of other test files refresh due segments of this database too: judge by the outcome (members,
    // events), which is the same whoever refreshed, not by this call's return value.
    const refresh = async () => refreshSegment(db, (await getSegment(db, p.id, s.body.data.id))!);
    expect((await refresh()).count).toBe(1);
    expect(await refresh()).toEqual({ count: 1, entered: 0, exited: 0 });
    await as(p).patch(`/contacts/${ids.m}`, { data: { score: 5 } });
    await as(p).patch(`/contacts/${ids.n}`, { data: { score: 70 } });
    expect((await refresh()).count).toBe(1);
    const names = async (id: string) =>
      (await as(p).get(`/events?contactId=${id}`)).body.data.items.map((e: { name: string }) => e.name);
    expect(await names(ids.m)).toEqual(['segment.High.exit', 'segment.High.entry']);
    expect(await names(ids.n)).toEqual(['segment.High.entry']);
    expect((await as(p).get('/events/names')).body.data.items.map((n: { name: string }) => n.name)).toEqual(
      expect.arrayContaining(['segment.High.entry', 'segment.High.exit']),
    );
    // Tracking off drops the materialised members; the next refresh just counts.
    await as(p).patch(`/segments/${s.body.data.id}`, { trackMembership: false });
    expect(await refresh()).toEqual({ count: 1, entered: 0, exited: 0 });
    expect((await as(p).get(`/segments/${s.body.data.id}`)).body.data.memberCount).toBe(1);
  });

  test('errors: missing filter, filter on STATIC, duplicate name, members of a DYNAMIC segment, unknown ids, bad body', async () => {
    const p = await createTestProject(ctx.api.database);
    const noFilter = await as(p).post('/segments', { name: 'x', type: 'DYNAMIC' });
    expect(noFilter.status).toBe(422);
    expect(noFilter.body.error.errors[0].field).toBe('filter');
    expect((await as(p).post('/segments', { name: 'x', type: 'STATIC', filter: [] })).status).toBe(422);
    const badFilter = await as(p).post('/segments', { name: 'x', filter: [{ field: 'data.', operator: 'exists' }] });
    expect(badFilter.status).toBe(422);
    expect(badFilter.body.error.errors[0].field).toBe('filter.0.field');
    const dyn = await as(p).post('/segments', { name: 'dup', filter: [] });
    expect(dyn.status).toBe(201);
    const dup = await as(p).post('/segments', { name: 'dup', filter: [] });
    expect(dup.status).toBe(409);
    expect(dup.body.error.code).toBe('CONFLICT');
    expect((await as(p).post(`/segments/${dyn.body.data.id}/members`, { contactIds: [newId()] })).status).toBe(409);
    expect((await as(p).post('/segments', { name: '', filter: [] })).status).toBe(422);
    expect((await as(p).post('/segments', { name: 'y', filter: [], extra: 1 })).body.error.errors[0]).toMatchObject({
      field: 'extra',
      code: 'unrecognized_keys',
    });
    expect((await as(p).get(`/segments/${newId()}`)).status).toBe(404);
    expect((await as(p).get('/segments/not-a-uuid')).status).toBe(400);
    expect((await as(p).patch(`/segments/${newId()}`, { name: 'z' })).status).toBe(404);
    const staticSeg = await as(p).post('/segments', { name: 'static' });
    expect((await as(p).patch(`/segments/${staticSeg.body.data.id}`, { filter: [] })).status).toBe(422);
  });

  test("security: other projects' segments are 404 on every route; pk_ keys are refused", async () => {
    const p = await createTestProject(ctx.api.database);
    const q = await createTestProject(ctx.api.database);
    const s = await as(p).post('/segments', { name: 'mine' });
    const id = s.body.data.id;
    const [c] = Object.values(await seed(q.id, [{ tag: 'q' }]));
    expect((await as(q).get(`/segments/${id}`)).status).toBe(404);
    expect((await as(q).get(`/segments/${id}/contacts`)).status).toBe(404);
    expect((await as(q).patch(`/segments/${id}`, { name: 'theirs' })).status).toBe(404);
    expect((await as(q).post(`/segments/${id}/members`, { contactIds: [c] })).status).toBe(404);
    expect((await as(q).del(`/segments/${id}`)).status).toBe(404);
    // Another project's contact cannot be added to my segment.
    expect((await as(p).post(`/segments/${id}/members`, { contactIds: [c] })).body.data).toEqual({
      changed: 0,
      notFound: [c],
    });
    expect((await as(q).get('/segments')).body.data.total).toBe(0);
    const pk = await request(ctx.api.app).get('/segments').set('Authorization', `Bearer ${p.publicKey}`);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
  });
});
