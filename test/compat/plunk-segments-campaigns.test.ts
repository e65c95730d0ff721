/**
 * Plunk v2 compatibility of segments, campaigns and their lists: the requests a Plunk v2 integration makes
 * (written from Plunk v2's controllers and zod schemas: segments with `filters` or `condition`, campaigns with
 * `audienceCondition` and `type`, `PUT /campaigns/{id}`, `scheduledFor`, the test send's `email`, `page`/`pageSize`
 * on lists) replayed against the API. Each answer is checked for our fields and Plunk's beside them; then the
 * errors an alias can give.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { getSegment, refreshSegment } from '@mailroom/audiences/queries/segments';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (project: TestProject) => client(ctx.api.app, project);
const fieldsOf = (r: { body: { error: { errors: { field: string }[] } } }) => r.body.error.errors.map((e) => e.field);

/** Plunk's nested filter (`FilterCondition`): contacts whose `data.plan` is `plan`. */
const planIs = (plan: string) => ({
  logic: 'AND',
  groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: plan }] }],
});

/** Seeds contacts with `data.plan`; returns their ids, oldest first. */
async function seed(projectId: string, plans: string[]): Promise<{ id: string; email: string }[]> {
  const out: { id: string; email: string }[] = [];
  for (const plan of plans) {
    const id = newId();
    const email = `${plan}.${id.slice(-8)}@plunk.test`;
    await ctx.api.database.db.execute(sql`
      insert into contacts (id, project_id, email, email_key, subscribed, data, created_at, updated_at)
      values (${id}::uuid, ${projectId}::uuid, ${email}, ${email}, true, ${JSON.stringify({ plan })}::jsonb, now(), now())`);
    out.push({ id, email });
  }
  return out;
}

describe('segments as Plunk v2 writes them', () => {
  test("create with `condition` (Plunk) or `filters` (Plunk's earlier flat list); answers carry filter, filters and condition", async () => {
    const p = await createTestProject(ctx.api.database);
    const nested = await as(p).post('/segments', {
      name: 'Pro users',
      description: 'paying',
      condition: planIs('pro'),
      trackMembership: false,
    });
    expect(nested.status).toBe(201);
    expect(nested.body.data).toMatchObject({
      name: 'Pro users',
      description: 'paying',
      type: 'DYNAMIC',
      trackMembership: false,
      filter: planIs('pro'),
      filters: planIs('pro'),
      condition: planIs('pro'),
    });
    const flat = [{ field: 'data.plan', operator: 'equals', value: 'free' }];
    const legacy = await as(p).post('/segments', { name: 'Free users', type: 'DYNAMIC', filters: flat });
    expect(legacy.status).toBe(201);
    expect(legacy.body.data).toMatchObject({ type: 'DYNAMIC', filter: flat, filters: flat, condition: flat });
    // The stored filter works: the preview (also by Plunk's name) and the live members agree.
    const [pro] = await seed(p.id, ['pro', 'free']);
    const preview = await as(p).post('/segments/preview', { condition: planIs('pro') });
    expect(preview.body.data).toMatchObject({ count: 1, sample: [{ id: pro.id }] });
    const members = await as(p).get(`/segments/${nested.body.data.id}/contacts?page=1&pageSize=20`);
    expect(members.body.data.contacts.map((c: { id: string }) => c.id)).toEqual([pro.id]);
    // GET answers the same shape. The member count is the segment refresher's (any worker on this database may
    // count it between the two calls), so it is left out of the comparison.
    const counted = (s: Record<string, unknown>) => ({ ...s, memberCount: undefined, memberCountAt: undefined });
    expect(counted((await as(p).get(`/segments/${nested.body.data.id}`)).body.data)).toEqual(counted(nested.body.data));
  });

  test('update with `condition` or `filters`, `type` sent back unchanged; a new filter is recounted', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/segments', { name: 'plan', condition: planIs('pro') })).body.data.id;
    const byCondition = await as(p).patch(`/segments/${id}`, {
      name: 'Team plan',
      description: 'teams',
      type: 'DYNAMIC',
      condition: planIs('team'),
    });
    expect(byCondition.status).toBe(200);
    expect(byCondition.body.data).toMatchObject({
      name: 'Team plan',
      description: 'teams',
      filter: planIs('team'),
      condition: planIs('team'),
      filters: planIs('team'),
      memberCount: null,
    });
    const byFilters = await as(p).patch(`/segments/${id}`, { filters: planIs('free') });
    expect(byFilters.body.data.filters).toEqual(planIs('free'));
    expect((await as(p).get(`/segments/${id}`)).body.data.filter).toEqual(planIs('free'));
  });

  test('errors name the field the client sent', async () => {
    const p = await createTestProject(ctx.api.database);
    const twice = await as(p).post('/segments', { name: 'x', filter: planIs('a'), filters: planIs('a') });
    expect(twice.status).toBe(422);
    expect(twice.body.error.errors[0]).toMatchObject({ field: 'filters', code: 'custom' });
    const badOperator = await as(p).post('/segments', {
      name: 'x',
      condition: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'nope', value: 1 }] }] },
    });
    expect(badOperator.status).toBe(422);
    expect(fieldsOf(badOperator)).toEqual(['condition.groups.0.filters.0.operator']);
    expect(
      fieldsOf(await as(p).post('/segments', { name: 'x', filters: [{ field: 'data.plan', operator: 'nope' }] })),
    ).toEqual(['filters.0.operator']);
    expect(fieldsOf(await as(p).post('/segments', { name: 'x', type: 'DYNAMIC' }))).toEqual(['filter']);
    expect(fieldsOf(await as(p).post('/segments', { name: 'x', type: 'STATIC', condition: planIs('a') }))).toEqual([
      'condition',
    ]);
    const dynamic = (await as(p).post('/segments', { name: 'dyn', condition: planIs('a') })).body.data.id;
    const retype = await as(p).patch(`/segments/${dynamic}`, { type: 'STATIC' });
    expect(retype.status).toBe(422);
    expect(retype.body.error.errors[0]).toMatchObject({
      field: 'type',
      message: expect.stringMatching(/cannot change/),
    });
    const stat = (await as(p).post('/segments', { name: 'static', type: 'STATIC' })).body.data.id;
    expect(fieldsOf(await as(p).patch(`/segments/${stat}`, { condition: planIs('a') }))).toEqual(['condition']);
    expect(fieldsOf(await as(p).post('/segments/preview', {}))).toEqual(['filter']);
    expect(fieldsOf(await as(p).post('/segments/preview', { condition: planIs('a'), filter: planIs('a') }))).toEqual([
      'condition',
    ]);
  });
});

describe('Plunk page numbers on segment lists', () => {
  test('GET /segments?page&pageSize answers `segments`, `page`, `pageSize`, `totalPages` beside the keyset form', async () => {
    const p = await createTestProject(ctx.api.database);
    for (const name of ['s1', 's2', 's3']) await as(p).post('/segments', { name, type: 'STATIC' });
    const first = await as(p).get('/segments?page=1&pageSize=2');
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ total: 3, page: 1, pageSize: 2, totalPages: 2, hasMore: true });
    expect(first.body.data.segments.map((s: { name: string }) => s.name)).toEqual(['s3', 's2']);
    expect(first.body.data.segments).toEqual(first.body.data.items);
    const second = await as(p).get('/segments?page=2&pageSize=2');
    expect(second.body.data).toMatchObject({ page: 2, pageSize: 2, totalPages: 2, hasMore: false, nextCursor: null });
    expect(second.body.data.segments.map((s: { name: string }) => s.name)).toEqual(['s1']);
    // Our form still answers Plunk's names too.
    const ours = await as(p).get('/segments?limit=5');
    expect(ours.body.data).toMatchObject({ page: 1, pageSize: 5, totalPages: 1 });
    expect(ours.body.data.segments).toHaveLength(3);
  });

  test('GET /segments/{id}/contacts?page&pageSize walks the members without overlap; `contacts` beside `items`', async () => {
    const p = await createTestProject(ctx.api.database);
    const people = await seed(p.id, ['pro', 'pro', 'pro', 'pro', 'pro', 'free']);
    // STATIC: the member count is kept by trigger.
    const stat = (await as(p).post('/segments', { name: 'list', type: 'STATIC' })).body.data.id;
    await as(p).post(`/segments/${stat}/members`, { emails: people.slice(0, 5).map((x) => x.email) });
    const seen: string[] = [];
    for (const page of [1, 2, 3]) {
      const res = await as(p).get(`/segments/${stat}/contacts?page=${page}&pageSize=2`);
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ total: 5, page, pageSize: 2, totalPages: 3, hasMore: page < 3 });
      expect(res.body.data.contacts).toEqual(res.body.data.items);
      seen.push(...res.body.data.contacts.map((c: { id: string }) => c.id));
    }
    expect(seen).toEqual(
      people
        .slice(0, 5)
        .map((x) => x.id)
        .reverse(),
    );
    // DYNAMIC: total is the worker's count once made.
    const dyn = (await as(p).post('/segments', { name: 'pros', condition: planIs('pro') })).body.data.id;
    await refreshSegment(ctx.api.database.db, (await getSegment(ctx.api.database.db, p.id, dyn))!);
    const last = await as(p).get(`/segments/${dyn}/contacts?page=3&pageSize=2`);
    expect(last.body.data).toMatchObject({ total: 5, page: 3, totalPages: 3, hasMore: false });
    expect(last.body.data.contacts.map((c: { id: string }) => c.id)).toEqual([people[0].id]);
    // A cursor stays pure keyset: page is ignored beside it.
    const firstPage = await as(p).get(`/segments/${dyn}/contacts?limit=2`);
    const next = await as(p).get(`/segments/${dyn}/contacts?limit=2&page=3&cursor=${firstPage.body.data.nextCursor}`);
    expect(next.body.data.items.map((c: { id: string }) => c.id)).toEqual([people[2].id, people[1].id]);
    expect(next.body.data.page).toBe(1);
  });

  test('bad page numbers are 400 naming the parameter', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/segments', { name: 's', type: 'STATIC' })).body.data.id;
    for (const path of ['/segments', `/segments/${id}/contacts`, '/campaigns']) {
      for (const [query, field] of [
        ['page=0', 'page'],
        ['page=abc', 'page'],
        ['pageSize=101', 'pageSize'],
        ['pageSize=0', 'pageSize'],
        ['page=102&pageSize=100', 'page'],
      ] as const) {
        const res = await as(p).get(`${path}?${query}`);
        expect([path, query, res.status]).toEqual([path, query, 400]);
        expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
      }
    }
  });
});

describe('campaigns as Plunk v2 writes them', () => {
  const plunkCampaign = (p: TestProject, extra: object = {}) => ({
    name: 'Launch',
    description: 'Q3 news',
    subject: 'Hello {{firstName ?? "there"}}',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${p.domain}`,
    fromName: 'News',
    replyTo: null,
    type: 'MARKETING',
    audienceType: 'FILTERED',
    audienceCondition: planIs('pro'),
    ...extra,
  });

  test('`from` and `replyTo` as RFC 5322 mailbox strings; a stated fromName wins over the display name', async () => {
    const p = await createTestProject(ctx.api.database);
    const named = await as(p).post(
      '/campaigns',
      plunkCampaign(p, {
        from: `Acme News <news@${p.domain}>`,
        fromName: undefined,
        replyTo: '"Support, Acme" <help@acme.test>',
      }),
    );
    expect(named.status).toBe(201);
    expect(named.body.data).toMatchObject({
      from: `news@${p.domain}`,
      fromName: 'Acme News',
      replyTo: '"Support, Acme" <help@acme.test>',
    });
    const stated = await as(p).patch(`/campaigns/${named.body.data.id}`, {
      from: `Other <news@${p.domain}>`,
      fromName: 'Stated',
    });
    expect(stated.body.data).toMatchObject({ from: `news@${p.domain}`, fromName: 'Stated' });
    const bad = await as(p).post('/campaigns', plunkCampaign(p, { from: 'Acme <not an address>' }));
    expect(bad.status).toBe(422);
    expect(fieldsOf(bad)).toContain('from');
  });

  test("create with `audienceCondition` and `type: MARKETING`; answers carry Plunk's names beside ours", async () => {
    const p = await createTestProject(ctx.api.database);
    const res = await as(p).post('/campaigns', plunkCampaign(p));
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      status: 'DRAFT',
      audienceType: 'FILTERED',
      type: 'FILTERED', // the specification: `type` carries the audience type
      audienceFilter: planIs('pro'),
      audienceCondition: planIs('pro'),
      scheduledAt: null,
      scheduledFor: null,
      recipients: 0,
      totalRecipients: 0,
      sentAt: null,
      replyTo: null,
    });
    expect((await as(p).get(`/campaigns/${res.body.data.id}`)).body.data).toEqual(res.body.data);
    // A segment audience, as Plunk sends it (no audienceCondition); `type` sent back as answered.
    const seg = (await as(p).post('/segments', { name: 'pros', condition: planIs('pro') })).body.data.id;
    const bySegment = await as(p).post(
      '/campaigns',
      plunkCampaign(p, { audienceType: 'SEGMENT', segmentId: seg, audienceCondition: undefined, type: 'SEGMENT' }),
    );
    expect(bySegment.status).toBe(201);
    expect(bySegment.body.data).toMatchObject({ audienceType: 'SEGMENT', segmentId: seg, audienceCondition: null });
  });

  test("PUT /campaigns/{id} (Plunk's update) is the PATCH: partial, same rules, same answer", async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/campaigns', plunkCampaign(p))).body.data.id;
    const put = await as(p).put(`/campaigns/${id}`, {
      subject: 'New subject',
      audienceCondition: planIs('team'),
      fromName: null,
    });
    expect(put.status).toBe(200);
    expect(put.body.data).toMatchObject({
      subject: 'New subject',
      name: 'Launch',
      audienceFilter: planIs('team'),
      audienceCondition: planIs('team'),
      fromName: null,
    });
    expect((await as(p).get(`/campaigns/${id}`)).body.data).toEqual(put.body.data);
    // Switching to ALL drops the filter, as PATCH does.
    const all = await as(p).put(`/campaigns/${id}`, { audienceType: 'ALL', type: 'MARKETING' });
    expect(all.body.data).toMatchObject({
      audienceType: 'ALL',
      type: 'ALL',
      audienceFilter: null,
      audienceCondition: null,
    });
    // `type` with an audience value stands for audienceType when that is absent.
    expect(
      (await as(p).put(`/campaigns/${id}`, { type: 'FILTERED', audienceCondition: planIs('x') })).body.data,
    ).toMatchObject({ audienceType: 'FILTERED', audienceFilter: planIs('x') });
    // Errors and state as PATCH.
    expect(fieldsOf(await as(p).put(`/campaigns/${id}`, { from: 'news@not-verified.example' }))).toEqual(['from']);
    expect((await as(p).put(`/campaigns/${newId()}`, { name: 'x' })).status).toBe(404);
    expect((await as(p).put(`/campaigns/${id}`, {})).status).toBe(422);
    await as(p).post(`/campaigns/${id}/cancel`, {});
    const late = await as(p).put(`/campaigns/${id}`, { name: 'late' });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('INVALID_STATE');
  });

  test('send with `scheduledFor` schedules like `scheduledAt`; both names answer the time', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/campaigns', plunkCampaign(p, { audienceType: 'ALL', audienceCondition: undefined })))
      .body.data.id;
    const at = new Date(Date.now() + 3_600_000);
    const scheduled = await as(p).post(`/campaigns/${id}/send`, { scheduledFor: at.toISOString() });
    expect(scheduled.status).toBe(200);
    expect(scheduled.body.data).toMatchObject({
      status: 'SCHEDULED',
      scheduledAt: at.toISOString(),
      scheduledFor: at.toISOString(),
    });
    const job = await ctx.api.queues.campaign.getJob(id);
    expect(job).toBeDefined();
    expect(job!.timestamp + (job!.opts.delay ?? 0)).toBeGreaterThanOrEqual(at.getTime() - 5_000);
    const both = await as(p).post(`/campaigns/${id}/send`, {
      scheduledAt: at.toISOString(),
      scheduledFor: at.toISOString(),
    });
    expect(both.status).toBe(422);
    expect(fieldsOf(both)).toEqual(['scheduledFor']);
    expect(fieldsOf(await as(p).post(`/campaigns/${id}/send`, { scheduledFor: 'next tuesday' }))).toEqual([
      'scheduledFor',
    ]);
    expect((await as(p).get(`/campaigns/${id}`)).body.data.status).toBe('SCHEDULED');
  });

  test("test send with Plunk's `email`", async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/campaigns', plunkCampaign(p))).body.data.id;
    const to = recipient('plunk');
    const res = await as(p).post(`/campaigns/${id}/test`, { email: to });
    expect(res.status).toBe(202);
    expect(res.body.data.emails).toEqual([{ email: to, id: expect.any(String) }]);
    expect(fieldsOf(await as(p).post(`/campaigns/${id}/test`, { email: to, to }))).toEqual(['email']);
    expect(fieldsOf(await as(p).post(`/campaigns/${id}/test`, {}))).toEqual(['to']);
    expect((await as(p).post(`/campaigns/${id}/test`, { email: 'nope' })).status).toBe(422);
  });

  test('campaign alias errors', async () => {
    const p = await createTestProject(ctx.api.database);
    const transactional = await as(p).post('/campaigns', plunkCampaign(p, { type: 'TRANSACTIONAL' }));
    expect(transactional.status).toBe(422);
    expect(transactional.body.error.errors[0]).toMatchObject({
      field: 'type',
      message: expect.stringMatching(/\/v1\/send/),
    });
    expect(fieldsOf(await as(p).post('/campaigns', plunkCampaign(p, { type: 'ALL' })))).toEqual(['type']);
    expect(fieldsOf(await as(p).post('/campaigns', plunkCampaign(p, { audienceFilter: planIs('pro') })))).toEqual([
      'audienceCondition',
    ]);
    expect(fieldsOf(await as(p).post('/campaigns', plunkCampaign(p, { audienceCondition: undefined })))).toEqual([
      'audienceFilter',
    ]);
    const bad = await as(p).post('/campaigns', plunkCampaign(p, { audienceCondition: { logic: 'XOR', groups: [] } }));
    expect(bad.status).toBe(422);
    expect(fieldsOf(bad)[0]).toMatch(/^audienceFilter/);
    expect(fieldsOf(await as(p).post('/campaigns', plunkCampaign(p, { type: 'NEWSLETTER' })))).toEqual(['type']);
  });

  test('GET /campaigns?page&pageSize&search answers `campaigns`, `total`, `page`, `pageSize`, `totalPages`', async () => {
    const p = await createTestProject(ctx.api.database);
    for (const name of ['Spring sale', 'Summer sale', 'Autumn news']) {
      await as(p).post('/campaigns', plunkCampaign(p, { name, audienceType: 'ALL', audienceCondition: undefined }));
    }
    const first = await as(p).get('/campaigns?page=1&pageSize=2');
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ total: 3, page: 1, pageSize: 2, totalPages: 2 });
    expect(first.body.data.campaigns.map((c: { name: string }) => c.name)).toEqual(['Autumn news', 'Summer sale']);
    expect(first.body.data.campaigns).toEqual(first.body.data.items);
    const second = await as(p).get('/campaigns?page=2&pageSize=2&status=DRAFT');
    expect(second.body.data.campaigns.map((c: { name: string }) => c.name)).toEqual(['Spring sale']);
    const search = await as(p).get('/campaigns?search=SALE&page=1&pageSize=20');
    expect(search.body.data).toMatchObject({ total: 2, totalPages: 1 });
    expect(search.body.data.campaigns.map((c: { name: string }) => c.name)).toEqual(['Summer sale', 'Spring sale']);
    // Search matches the sender too, and its wildcards are literal.
    expect((await as(p).get(`/campaigns?search=${encodeURIComponent(`news@${p.domain}`)}`)).body.data.total).toBe(3);
    expect((await as(p).get('/campaigns?search=%25')).body.data.total).toBe(0);
    expect((await as(p).get('/campaigns?search=_')).body.data.total).toBe(0);
    const beyond = await as(p).get('/campaigns?page=3&pageSize=2');
    expect(beyond.body.data).toMatchObject({ campaigns: [], total: 3, page: 3, totalPages: 2, hasMore: false });
  });

  test("stats carry Plunk's counts and percentages (unrounded, of the emails sent)", async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await as(p).post('/campaigns', plunkCampaign(p, { audienceType: 'ALL', audienceCondition: undefined })))
      .body.data.id;
    const empty = (await as(p).get(`/campaigns/${id}/stats`)).body.data;
    expect(empty).toMatchObject({
      totalRecipients: 0,
      sentCount: 0,
      openRate: 0,
      clickRate: 0,
      bounceRate: 0,
      deliveryRate: 0,
    });
    // Three recipients' emails as the worker and SES events leave them: clicked, opened, bounced.
    const db = ctx.api.database.db;
    const people = await seed(p.id, ['a', 'b', 'c']);
    const states = [
      { status: 'clicked', delivered: true, opened: true, clicked: true },
      { status: 'opened', delivered: true, opened: true, clicked: false },
      { status: 'bounced', delivered: false, opened: false, clicked: false },
    ];
    for (const [i, s] of states.entries()) {
      await db.execute(sql`
        insert into emails (id, project_id, contact_id, campaign_id, marketing, source, to_email, from_email, status, sent_at, delivered_at, opened_at, clicked_at)
        values (${newId()}::uuid, ${p.id}::uuid, ${people[i].id}::uuid, ${id}::uuid, true, 'campaign', ${people[i].email}, ${`news@${p.domain}`}, ${s.status},
          now(), ${s.delivered ? sql`now()` : null}, ${s.opened ? sql`now()` : null}, ${s.clicked ? sql`now()` : null})`);
    }
    await db.execute(
      sql`update campaigns set status = 'SENT', recipients = 3, fanout_done = true where id = ${id}::uuid`,
    );
    const stats = (await as(p).get(`/campaigns/${id}/stats`)).body.data;
    expect(stats).toMatchObject({
      recipients: 3,
      sent: 3,
      delivered: 2,
      opened: 2,
      clicked: 1,
      bounced: 1,
      totalRecipients: 3,
      sentCount: 3,
      deliveredCount: 2,
      openedCount: 2,
      clickedCount: 1,
      bouncedCount: 1,
    });
    expect(stats.openRate).toBeCloseTo((2 / 3) * 100, 10);
    expect(stats.clickRate).toBeCloseTo((1 / 3) * 100, 10);
    expect(stats.bounceRate).toBeCloseTo((1 / 3) * 100, 10);
    expect(stats.deliveryRate).toBeCloseTo((2 / 3) * 100, 10);
    // Our rates stay fractions of sent.
    expect(stats.rates.open).toBeCloseTo(0.6667, 4);
    const campaign = (await as(p).get(`/campaigns/${id}`)).body.data;
    expect(campaign).toMatchObject({ totalRecipients: 3, recipients: 3 });
  });
});

describe('security of the Plunk forms', () => {
  test('PUT and the Plunk list forms need a secret key and stay inside the project', async () => {
    const p = await createTestProject(ctx.api.database);
    const q = await createTestProject(ctx.api.database);
    const id = (
      await as(p).post('/campaigns', {
        name: 'c',
        subject: 's',
        body: '<p>b</p>',
        from: `news@${p.domain}`,
        audienceType: 'ALL',
      })
    ).body.data.id;
    const seg = (await as(p).post('/segments', { name: 's', condition: planIs('pro') })).body.data.id;
    expect((await as(q).put(`/campaigns/${id}`, { name: 'theirs' })).status).toBe(404);
    expect((await as(q).patch(`/segments/${seg}`, { condition: planIs('x') })).status).toBe(404);
    expect((await as(q).get(`/segments/${seg}/contacts?page=1&pageSize=5`)).status).toBe(404);
    expect((await as(q).get('/campaigns?page=1&pageSize=5')).body.data).toMatchObject({
      total: 0,
      campaigns: [],
      totalPages: 1,
    });
    expect((await as(q).get('/segments?page=1')).body.data).toMatchObject({ total: 0, segments: [] });
    const pk = await request(ctx.api.app)
      .put(`/campaigns/${id}`)
      .set('Authorization', `Bearer ${p.publicKey}`)
      .send({ name: 'x' });
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    const none = await request(ctx.api.app).get('/campaigns?page=1&pageSize=5');
    expect(none.status).toBe(401);
    expect((await as(p).get(`/campaigns/${id}`)).body.data.name).toBe('c');
    expect((await as(p).get(`/segments/${seg}`)).body.data.condition).toEqual(planIs('pro'));
  });
});
