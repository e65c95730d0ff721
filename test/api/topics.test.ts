/**
 * Topics through the API: CRUD with keyset pages, 422s naming the field and 409 for a taken name; a contact's
 * choices (PUT /contacts/{id}/topics, `topics` on POST and PATCH /contacts) with their events and webhooks; the
 * standing in GET /contacts/{id}; the segment filter's `topic.<id>` field; tenant isolation everywhere; double
 * opt-in's field checks.
 */
import { sql } from 'drizzle-orm';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { client, createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

async function topic(as: ReturnType<typeof client>, body: object) {
  const res = await as.post('/topics', body);
  expect(res.status).toBe(201);
  return res.body.data as { id: string; name: string; defaultSubscription: string; visibility: string };
}

describe('topics CRUD', () => {
  test('create, get, update, list in keyset pages, delete', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const news = await topic(as, { name: ' Product news ', description: 'Monthly', defaultSubscription: 'opt_out' });
    expect(news).toMatchObject({ name: 'Product news', defaultSubscription: 'opt_out', visibility: 'public' });
    const letter = await topic(as, { name: 'Newsletter', defaultSubscription: 'opt_in', visibility: 'private' });
    const third = await topic(as, { name: 'Events', defaultSubscription: 'opt_in' });
    expect((await as.get(`/topics/${letter.id}`)).body.data).toMatchObject({
      name: 'Newsletter',
      visibility: 'private',
      description: null,
    });
    const patched = await as.patch(`/topics/${letter.id}`, { visibility: 'public', description: 'Weekly' });
    expect(patched.status).toBe(200);
    expect(patched.body.data).toMatchObject({
      visibility: 'public',
      description: 'Weekly',
      defaultSubscription: 'opt_in',
    });

    const first = await as.get('/topics?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.data.items.map((t: { id: string }) => t.id)).toEqual([third.id, letter.id]);
    expect(first.body.data).toMatchObject({ hasMore: true, total: 3 });
    const second = await as.get(`/topics?limit=2&cursor=${first.body.data.nextCursor}`);
    expect(second.body.data.items.map((t: { id: string }) => t.id)).toEqual([news.id]);
    expect(second.body.data.hasMore).toBe(false);

    expect((await as.del(`/topics/${third.id}`)).body.data).toEqual({ id: third.id, deleted: true });
    expect((await as.get(`/topics/${third.id}`)).status).toBe(404);
    expect((await as.del(`/topics/${third.id}`)).status).toBe(404);
  });

  test('422 names the field; 409 for a name taken (case-insensitively); another project sees nothing', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const bad = await as.post('/topics', { name: '', defaultSubscription: 'sometimes', visibility: 'hidden' });
    expect(bad.status).toBe(422);
    const fields = bad.body.error.errors.map((e: { field: string }) => e.field);
    expect(fields).toEqual(expect.arrayContaining(['name', 'defaultSubscription', 'visibility']));
    expect((await as.post('/topics', { name: 'x' })).body.error.errors[0].field).toBe('defaultSubscription');
    expect((await as.post('/topics', { name: 'x', defaultSubscription: 'opt_in', extra: 1 })).status).toBe(422);
    const t = await topic(as, { name: 'Deals', defaultSubscription: 'opt_in' });
    expect((await as.post('/topics', { name: 'DEALS', defaultSubscription: 'opt_out' })).status).toBe(409);
    expect((await as.patch(`/topics/${t.id}`, {})).status).toBe(422);

    const other = client(ctx.api.app, await createTestProject(ctx.api.database));
    expect((await other.get(`/topics/${t.id}`)).status).toBe(404);
    expect((await other.patch(`/topics/${t.id}`, { name: 'Mine' })).status).toBe(404);
    expect((await other.del(`/topics/${t.id}`)).status).toBe(404);
    expect((await other.get('/topics')).body.data.items).toEqual([]);
    // The same name is free in another project.
    expect((await other.post('/topics', { name: 'Deals', defaultSubscription: 'opt_in' })).status).toBe(201);
  });
});

describe("a contact's topics", () => {
  test('PUT records choices with events and webhooks only for changes; GET /contacts/{id} shows every topic', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    await createWebhookEndpoint(ctx.api.database.db, p.id, {
      url: 'https://hooks.example.com/t',
      eventTypes: ['contact.*'],
      secret: 'whsec_x',
    });
    const out = await topic(as, { name: 'Product news', defaultSubscription: 'opt_out' });
    const into = await topic(as, { name: 'Newsletter', defaultSubscription: 'opt_in' });
    const email = recipient('topics');
    const c = (await as.post('/contacts', { email })).body.data;

    const before = await as.get(`/contacts/${c.id}`);
    expect(before.body.data.topics).toEqual([
      { topicId: out.id, name: 'Product news', subscribed: true, explicit: false },
      { topicId: into.id, name: 'Newsletter', subscribed: false, explicit: false },
    ]);
    expect(before.body.data.confirmations).toEqual([]);

    const put = await as.put(`/contacts/${c.id}/topics`, {
      topics: [
        { topicId: out.id, subscribed: false },
        { topicId: into.id, subscribed: true },
      ],
    });
    expect(put.status).toBe(200);
    expect(put.body.data.topics).toEqual([
      { topicId: out.id, name: 'Product news', subscribed: false, explicit: true },
      { topicId: into.id, name: 'Newsletter', subscribed: true, explicit: true },
    ]);
    // A repeat changes nothing and records nothing. (One statement writes a PUT's events, and one its deliveries:
    // their UUIDv7 ids can share a millisecond, so both are read by name.)
    await as.put(`/contacts/${c.id}/topics`, { topics: [{ topicId: into.id, subscribed: true }] });
    const events = await ctx.api.database.db.execute<{ name: string; data: Record<string, unknown> }>(
      sql`select name, data from events where contact_id = ${c.id}::uuid and name like 'contact.topic_%' order by name desc, id`,
    );
    expect(events.rows.map((e) => [e.name, e.data.topicId])).toEqual([
      ['contact.topic_unsubscribed', out.id],
      ['contact.topic_subscribed', into.id],
    ]);
    const hooks = await ctx.api.database.db.execute<{ event_type: string; payload: { data: Record<string, unknown> } }>(
      sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type like 'contact.topic_%' order by event_type desc, id`,
    );
    expect(hooks.rows.map((h) => h.event_type)).toEqual(['contact.topic_unsubscribed', 'contact.topic_subscribed']);
    expect(hooks.rows[0].payload.data).toEqual({
      contactId: c.id,
      email,
      topicId: out.id,
      topicName: 'Product news',
      method: 'api',
      emailId: null,
    });
    // The global switch is untouched.
    expect((await as.get(`/contacts/${c.id}`)).body.data.subscribed).toBe(true);
  });

  test('topics on POST and PATCH /contacts; 422 naming the entry for a topic of another project; 404 for a foreign contact', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const t = await topic(as, { name: 'A', defaultSubscription: 'opt_in' });
    const foreign = await topic(client(ctx.api.app, await createTestProject(ctx.api.database)), {
      name: 'B',
      defaultSubscription: 'opt_in',
    });
    const created = await as.post('/contacts', {
      email: recipient('tp'),
      topics: [{ topicId: t.id, subscribed: true }],
    });
    expect(created.status).toBe(201);
    const id = created.body.data.id;
    expect((await as.get(`/contacts/${id}/topics`)).body.data.topics).toEqual([
      { topicId: t.id, name: 'A', subscribed: true, explicit: true },
    ]);
    const patched = await as.patch(`/contacts/${id}`, { topics: [{ topicId: t.id, subscribed: false }] });
    expect(patched.status).toBe(200);
    expect((await as.get(`/contacts/${id}/topics`)).body.data.topics[0].subscribed).toBe(false);

    const bad = await as.put(`/contacts/${id}/topics`, {
      topics: [
        { topicId: t.id, subscribed: true },
        { topicId: foreign.id, subscribed: true },
      ],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors).toEqual([expect.objectContaining({ field: 'topics.1.topicId' })]);
    // A failed request changes nothing.
    expect((await as.get(`/contacts/${id}/topics`)).body.data.topics[0].subscribed).toBe(false);
    expect(
      (await as.post('/contacts', { email: recipient('tp'), topics: [{ topicId: foreign.id, subscribed: true }] })).body
        .error.errors[0].field,
    ).toBe('topics.0.topicId');
    expect((await as.patch(`/contacts/${id}`, { topics: [{ topicId: 'nope', subscribed: true }] })).status).toBe(422);

    const other = client(ctx.api.app, await createTestProject(ctx.api.database));
    expect((await other.put(`/contacts/${id}/topics`, { topics: [] })).status).toBe(404);
    expect((await other.get(`/contacts/${id}/topics`)).status).toBe(404);
  });

  test('the segment filter tests topic membership (explicit choice, else the default)', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const t = await topic(as, { name: 'News', defaultSubscription: 'opt_out' });
    const [a, b] = [recipient('fa'), recipient('fb')];
    await as.post('/contacts', { email: a });
    await as.post('/contacts', { email: b, topics: [{ topicId: t.id, subscribed: false }] });
    const members = async (value: boolean) => {
      const res = await as.get(
        `/contacts?filter=${encodeURIComponent(JSON.stringify([{ field: `topic.${t.id}`, operator: 'equals', value }]))}`,
      );
      expect(res.status).toBe(200);
      return res.body.data.items.map((c: { email: string }) => c.email);
    };
    expect(await members(true)).toEqual([a]);
    expect(await members(false)).toEqual([b]);
    const bad = await as.post('/segments', {
      name: 's',
      filter: [
        { field: 'topic.x', operator: 'equals', value: true },
        { field: `topic.${t.id}`, operator: 'contains', value: 1 },
      ],
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors.map((e: { field: string }) => e.field)).toEqual([
      'filter.0.field',
      'filter.1.operator',
    ]);
  });
});

describe('double opt-in fields', () => {
  test('422 naming the field: options without doubleOptIn, subscribed with it, unknown template, no sender, foreign topic', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const without = await as.post('/contacts', {
      email: recipient('d'),
      topicIds: [],
      confirmationFrom: `a@${p.domain}`,
    });
    expect(without.status).toBe(422);
    expect(without.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['topicIds', 'confirmationFrom']);
    expect(
      (
        await as.post('/contacts', {
          email: recipient('d'),
          doubleOptIn: true,
          subscribed: true,
          confirmationFrom: `a@${p.domain}`,
        })
      ).body.error.errors[0].field,
    ).toBe('subscribed');
    expect((await as.post('/contacts', { email: recipient('d'), doubleOptIn: true })).body.error.errors[0].field).toBe(
      'confirmationFrom',
    );
    expect(
      (
        await as.post('/contacts', {
          email: recipient('d'),
          doubleOptIn: true,
          confirmationFrom: 'a@unverified.example',
        })
      ).body.error.errors[0].field,
    ).toBe('confirmationFrom');
    const tpl = await as.post('/contacts', {
      email: recipient('d'),
      doubleOptIn: true,
      confirmationTemplateId: '00000000-0000-4000-8000-000000000000',
      confirmationFrom: `a@${p.domain}`,
    });
    expect(tpl.body.error.errors[0].field).toBe('confirmationTemplateId');
    const foreign = await topic(client(ctx.api.app, await createTestProject(ctx.api.database)), {
      name: 'X',
      defaultSubscription: 'opt_in',
    });
    const t = await as.post('/contacts', {
      email: recipient('d'),
      doubleOptIn: true,
      topicIds: [foreign.id],
      confirmationFrom: `a@${p.domain}`,
    });
    expect(t.status).toBe(422);
    expect(t.body.error.errors[0].field).toBe('topicIds.0');
    // Nothing was written by the refused requests.
    expect((await as.get('/contacts')).body.data.total).toBe(0);
  });
});
