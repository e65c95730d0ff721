/**
 * Campaigns through the API alone (no worker): validation, the state machine (every illegal transition a 409),
 * scheduling and rescheduling of the campaign job, a deleted segment failing a scheduled campaign, the test
 * send, listing, tenant isolation.
 */
import { sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (project: TestProject) => client(ctx.api.app, project);

const draft = (p: TestProject, extra: object = {}) =>
  as(p).post('/campaigns', {
    name: 'Launch',
    subject: 'Hi {{firstName ?? "there"}}',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    ...extra,
  });

describe('create and read', () => {
  test('POST creates a DRAFT; `type` equals audienceType; GET returns it', async () => {
    const p = await createTestProject(ctx.api.database);
    const res = await draft(p, { description: 'Q3', fromName: 'News', replyTo: `reply@${p.domain}` });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({
      status: 'DRAFT',
      audienceType: 'ALL',
      type: 'ALL',
      from: `news@${p.domain}`,
      fromName: 'News',
      replyTo: `reply@${p.domain}`,
      description: 'Q3',
      scheduledAt: null,
      recipients: 0,
    });
    expect((await as(p).get(`/campaigns/${res.body.data.id}`)).body.data).toEqual(res.body.data);
  });

  test('validation: audience rules, filter paths, sender domain, template syntax, unknown fields', async () => {
    const p = await createTestProject(ctx.api.database);
    const fieldsOf = (r: { body: { error: { errors: { field: string }[] } } }) =>
      r.body.error.errors.map((e) => e.field);
    const seg = await draft(p, { audienceType: 'SEGMENT' });
    expect(seg.status).toBe(422);
    expect(fieldsOf(seg)).toEqual(['segmentId']);
    expect(fieldsOf(await draft(p, { audienceType: 'SEGMENT', segmentId: newId() }))).toEqual(['segmentId']);
    expect(fieldsOf(await draft(p, { audienceType: 'FILTERED' }))).toEqual(['audienceFilter']);
    const badFilter = await draft(p, {
      audienceType: 'FILTERED',
      audienceFilter: { logic: 'AND', groups: [{ filters: [{ field: 'data.plan', operator: 'nope', value: 1 }] }] },
    });
    expect(fieldsOf(badFilter)).toEqual(['audienceFilter.groups.0.filters.0.operator']);
    expect(fieldsOf(await draft(p, { segmentId: newId() }))).toEqual(['segmentId']);
    const foreign = await draft(p, { from: 'news@not-verified.example' });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.errors[0]).toMatchObject({
      field: 'from',
      message: expect.stringMatching(/not a verified sending domain/),
    });
    expect(fieldsOf(await draft(p, { body: '<p>{{#if}}</p>' }))).toEqual(['body']);
    expect((await draft(p, { audienceType: 'SOME' })).body.error.errors[0]).toMatchObject({
      field: 'audienceType',
      code: 'invalid_enum_value',
    });
    expect((await draft(p, { colour: 'red' })).body.error.errors[0]).toMatchObject({
      field: 'colour',
      code: 'unrecognized_keys',
    });
    const missing = await as(p).post('/campaigns', { name: 'x' });
    expect(missing.status).toBe(422);
    expect(fieldsOf(missing)).toEqual(expect.arrayContaining(['from', 'audienceType']));
    // Subject and body may come from a template instead (templateId), so they are required once the rest is valid.
    const noContent = await as(p).post('/campaigns', { name: 'x', from: `news@${p.domain}`, audienceType: 'ALL' });
    expect(noContent.status).toBe(422);
    expect(fieldsOf(noContent)).toEqual(['subject', 'body']);
  });

  test('list: newest first, keyset, filter by status', async () => {
    const p = await createTestProject(ctx.api.database);
    const a = await draft(p, { name: 'a' });
    await draft(p, { name: 'b' });
    await as(p).post(`/campaigns/${a.body.data.id}/cancel`, {});
    const all = await as(p).get('/campaigns?limit=1');
    expect(all.body.data).toMatchObject({ total: 2, hasMore: true });
    expect(all.body.data.items[0].name).toBe('b');
    const next = await as(p).get(`/campaigns?limit=1&cursor=${all.body.data.nextCursor}`);
    expect(next.body.data.items[0].name).toBe('a');
    const cancelled = await as(p).get('/campaigns?status=CANCELLED');
    expect(cancelled.body.data.items.map((c: { name: string }) => c.name)).toEqual(['a']);
    expect((await as(p).get('/campaigns?status=DONE')).status).toBe(400);
  });
});

describe('state machine', () => {
  test('DRAFT → SCHEDULED (job delayed until then) → rescheduled (job moved) → SENDING; illegal moves are 409 INVALID_STATE', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    const at = new Date(Date.now() + 3600_000);
    const scheduled = await as(p).post(`/campaigns/${id}/send`, { scheduledAt: at.toISOString() });
    expect(scheduled.status).toBe(200);
    expect(scheduled.body.data).toMatchObject({ status: 'SCHEDULED', scheduledAt: at.toISOString() });
    const job = await ctx.api.queues.campaign.getJob(id);
    expect(await job!.getState()).toBe('delayed');
    expect(job!.timestamp + job!.opts.delay!).toBeGreaterThanOrEqual(at.getTime() - 1000);

    expect((await as(p).patch(`/campaigns/${id}`, { subject: 'Changed' })).body.data.subject).toBe('Changed');
    const later = new Date(Date.now() + 7200_000);
    const moved = await as(p).post(`/campaigns/${id}/send`, { scheduledAt: later.toISOString() });
    expect(moved.body.data.scheduledAt).toBe(later.toISOString());
    const movedJob = await ctx.api.queues.campaign.getJob(id);
    expect(movedJob!.timestamp + movedJob!.delay).toBeGreaterThanOrEqual(later.getTime() - 1000);

    const now = await as(p).post(`/campaigns/${id}/send`, {});
    expect(now.body.data).toMatchObject({ status: 'SENDING', startedAt: expect.any(String) });
    expect(await (await ctx.api.queues.campaign.getJob(id))!.getState()).toMatch(/waiting|prioritized/);

    for (const [call, action] of [
      [() => as(p).post(`/campaigns/${id}/send`, {}), 'send'],
      [() => as(p).patch(`/campaigns/${id}`, { subject: 'late' }), 'update'],
      [() => as(p).del(`/campaigns/${id}`), 'delete'],
    ] as const) {
      const res = await call();
      expect(res.status).toBe(409);
      expect(res.body.error).toMatchObject({
        code: 'INVALID_STATE',
        message: `Cannot ${action} a campaign that is SENDING`,
      });
    }
    const cancelled = await as(p).post(`/campaigns/${id}/cancel`, {});
    expect(cancelled.body.data).toMatchObject({
      status: 'CANCELLED',
      cancelledAt: expect.any(String),
      cancelledEmails: 0,
    });
    expect((await as(p).post(`/campaigns/${id}/cancel`, {})).status).toBe(409);
    expect((await as(p).post(`/campaigns/${id}/send`, {})).status).toBe(409);
  });

  test('DELETE only a DRAFT; a past scheduledAt sends now; a SCHEDULED campaign can be cancelled', async () => {
    const p = await createTestProject(ctx.api.database);
    const d = (await draft(p)).body.data.id;
    expect((await as(p).del(`/campaigns/${d}`)).body.data).toEqual({ id: d, deleted: true });
    expect((await as(p).get(`/campaigns/${d}`)).status).toBe(404);
    const past = (await draft(p)).body.data.id;
    expect(
      (await as(p).post(`/campaigns/${past}/send`, { scheduledAt: '2020-01-01T00:00:00Z' })).body.data.status,
    ).toBe('SENDING');
    const s = (await draft(p)).body.data.id;
    await as(p).post(`/campaigns/${s}/send`, { scheduledAt: new Date(Date.now() + 60_000).toISOString() });
    expect((await as(p).post(`/campaigns/${s}/cancel`, {})).body.data.status).toBe('CANCELLED');
    expect(await ctx.api.queues.campaign.getJob(s)).toBeUndefined();
  });

  test('deleting the segment of a SCHEDULED campaign fails it with a reason; a DRAFT on it cannot be sent', async () => {
    const p = await createTestProject(ctx.api.database);
    const seg = (await as(p).post('/segments', { name: 'gone' })).body.data.id;
    const scheduled = (await draft(p, { audienceType: 'SEGMENT', segmentId: seg })).body.data.id;
    const drafted = (await draft(p, { audienceType: 'SEGMENT', segmentId: seg })).body.data.id;
    await as(p).post(`/campaigns/${scheduled}/send`, { scheduledAt: new Date(Date.now() + 60_000).toISOString() });
    const del = await as(p).del(`/segments/${seg}`);
    expect(del.body.data.failedCampaigns).toEqual([scheduled]);
    expect((await as(p).get(`/campaigns/${scheduled}`)).body.data).toMatchObject({
      status: 'FAILED',
      error: 'segment "gone" was deleted before the campaign started',
    });
    const send = await as(p).post(`/campaigns/${drafted}/send`, {});
    expect(send.status).toBe(422);
    expect(send.body.error.errors[0].field).toBe('segmentId');
  });

  test('a sender domain no longer verified blocks the send (422 from)', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    await ctx.api.database.db.execute(sql`update domains set status = 'pending' where project_id = ${p.id}::uuid`);
    const res = await as(p).post(`/campaigns/${id}/send`, {});
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('from');
    expect((await as(p).get(`/campaigns/${id}`)).body.data.status).toBe('DRAFT');
  });
});

describe('test send and stats', () => {
  test('POST /test queues the campaign content to the given addresses without changing the campaign', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    const to = [recipient('t1'), recipient('t2')];
    const res = await as(p).post(`/campaigns/${id}/test`, { to });
    expect(res.status).toBe(202);
    expect(res.body.data.emails.map((e: { email: string }) => e.email)).toEqual(to);
    const email = await as(p).get(`/emails/${res.body.data.emails[0].id}`);
    expect(email.body.data).toMatchObject({
      status: 'queued',
      source: 'transactional',
      campaignId: null,
      subject: 'Hi {{firstName ?? "there"}}',
    });
    expect((await as(p).get(`/campaigns/${id}`)).body.data).toMatchObject({ status: 'DRAFT', recipients: 0 });
    const stats = await as(p).get(`/campaigns/${id}/stats`);
    expect(stats.body.data).toMatchObject({
      recipients: 0,
      sent: 0,
      queued: 0,
      progress: 0,
      etaSeconds: null,
      audienceComplete: false,
    });
    expect((await as(p).post(`/campaigns/${id}/test`, { to: [] })).status).toBe(422);
    expect((await as(p).post(`/campaigns/${id}/test`, { to: 'not-an-address' })).status).toBe(422);
  });

  test("security: another project's campaign is 404 everywhere", async () => {
    const p = await createTestProject(ctx.api.database);
    const q = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    for (const res of [
      await as(q).get(`/campaigns/${id}`),
      await as(q).patch(`/campaigns/${id}`, { name: 'x' }),
      await as(q).post(`/campaigns/${id}/send`, {}),
      await as(q).post(`/campaigns/${id}/cancel`, {}),
      await as(q).post(`/campaigns/${id}/test`, { to: recipient() }),
      await as(q).get(`/campaigns/${id}/stats`),
      await as(q).del(`/campaigns/${id}`),
    ]) {
      expect(res.status).toBe(404);
    }
    // A segment of another project cannot be a campaign's audience.
    const theirs = (await as(q).post('/segments', { name: 's' })).body.data.id;
    expect((await draft(p, { audienceType: 'SEGMENT', segmentId: theirs })).status).toBe(422);
    expect((await as(p).get(`/campaigns/${id}`)).body.data.status).toBe('DRAFT');
  });
});
