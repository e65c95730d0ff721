/**
 * Email tags over the API (no worker): on /v1/send (stored, on GET /emails and the list, in the email.suppressed
 * payload), on campaigns (stored, answered, copied onto each email at fan-out) and on workflow SEND_EMAIL steps;
 * every rule with its field; `GET /reputation?tag=` reading the per-tag counts. Sending with tags (SES message
 * tags, the other webhook payloads) is covered end to end in test/e2e/tags-batch.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { fanoutBatch } from '@mailroom/campaigns/queries/campaign-fanout';
import { client, createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
const as = () => client(ctx.api.app, ctx.p);
const send = (body: object) => request(ctx.api.app).post('/v1/send').set('Authorization', ctx.p.auth).send(body);
const base = () => ({ to: recipient('tag'), from: `x@${ctx.p.domain}`, subject: 's', body: 'b' });
const fields = (res: { body: { error: { errors: { field: string }[] } } }) => res.body.error.errors.map((e) => e.field);

describe('/v1/send', () => {
  test('tags are stored on the email and answered by GET /emails/{id} and the list; an untagged email has []', async () => {
    const tags = [
      { name: 'category', value: 'welcome' },
      { name: 'user-id', value: 'U_123' },
    ];
    const res = await send({ ...base(), tags });
    expect(res.status).toBe(202);
    const id = res.body.data.emails[0].email;
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, id));
    expect(row.tags).toEqual(tags);
    const got = await as().get(`/emails/${id}`);
    expect(got.body.data.tags).toEqual(tags);
    const list = await as().get('/emails?limit=50');
    expect(list.body.data.items.find((e: { id: string }) => e.id === id).tags).toEqual(tags);
    const plain = await send(base());
    expect((await as().get(`/emails/${plain.body.data.emails[0].email}`)).body.data.tags).toEqual([]);
  });

  test('422 naming the field: characters, length, more than 10, a name twice, a reserved name, a missing value', async () => {
    const long = 'a'.repeat(257);
    const cases: [unknown, string][] = [
      [
        [
          { name: 'ok', value: 'v' },
          { name: 'ok2', value: 'v' },
          { name: 'ok3', value: 'v' },
          { name: 'bad.name', value: 'v' },
        ],
        'tags.3.name',
      ],
      [[{ name: 'n', value: 'has space' }], 'tags.0.value'],
      [[{ name: long, value: 'v' }], 'tags.0.name'],
      [[{ name: 'n', value: long }], 'tags.0.value'],
      [[{ name: 'é', value: 'v' }], 'tags.0.name'],
      [[{ name: '', value: 'v' }], 'tags.0.name'],
      [[{ name: 'n' }], 'tags.0.value'],
      [Array.from({ length: 11 }, (_, i) => ({ name: `n${i}`, value: 'v' })), 'tags'],
      [
        [
          { name: 'a', value: '1' },
          { name: 'b', value: '2' },
          { name: 'a', value: '3' },
        ],
        'tags.2.name',
      ],
      [[{ name: 'email_id', value: 'x' }], 'tags.0.name'],
      [[{ name: 'project_id', value: 'x' }], 'tags.0.name'],
    ];
    for (const [tags, field] of cases) {
      const res = await send({ ...base(), tags });
      expect(res.status).toBe(422);
      expect(fields(res)).toContain(field);
    }
    // 256 characters and ten tags are fine.
    const max = await send({
      ...base(),
      tags: [
        { name: 'a'.repeat(256), value: 'b'.repeat(256) },
        ...Array.from({ length: 9 }, (_, i) => ({ name: `t${i}`, value: 'v' })),
      ],
    });
    expect(max.status).toBe(202);
  });

  test('a suppressed email announces its tags in the email.suppressed payload', async () => {
    const hook = await as().post('/webhooks/endpoints', {
      url: 'http://127.0.0.1:9/hook',
      eventTypes: ['email.suppressed'],
    });
    expect(hook.status).toBe(201);
    const to = recipient('supp');
    await as().post('/suppressions', { email: to });
    const res = await send({ ...base(), to, tags: [{ name: 'flow', value: 'reset' }] });
    expect(res.body.data.emails[0].status).toBe('suppressed');
    const payload = await ctx.api.database.db.execute<{ payload: { data: { tags: unknown } } }>(
      sql`select payload from webhook_deliveries where project_id = ${ctx.p.id}::uuid and payload->'data'->>'emailId' = ${res.body.data.emails[0].email}`,
    );
    expect(payload.rows[0].payload.data.tags).toEqual([{ name: 'flow', value: 'reset' }]);
  });
});

describe('campaigns', () => {
  test('tags are stored on the campaign, answered, validated, cleared with null, and copied onto every email it sends', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = client(ctx.api.app, p);
    const body = {
      name: 'Launch',
      subject: 'Hi',
      body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    };
    const refused = await c.post('/campaigns', {
      ...body,
      tags: [
        { name: 'x', value: '1' },
        { name: 'x', value: '2' },
      ],
    });
    expect(refused.status).toBe(422);
    expect(fields(refused)).toEqual(['tags.1.name']);
    const created = await c.post('/campaigns', { ...body, tags: [{ name: 'campaign', value: 'launch' }] });
    expect(created.status).toBe(201);
    expect(created.body.data.tags).toEqual([{ name: 'campaign', value: 'launch' }]);
    const id = created.body.data.id as string;
    const cleared = await c.patch(`/campaigns/${id}`, { tags: null });
    expect(cleared.body.data.tags).toEqual([]);
    const bad = await c.patch(`/campaigns/${id}`, { tags: [{ name: 'email_id', value: '1' }] });
    expect(bad.status).toBe(422);
    expect(fields(bad)).toEqual(['tags.0.name']);
    const set = await c.patch(`/campaigns/${id}`, { tags: [{ name: 'campaign', value: 'q3' }] });
    expect(set.body.data.tags).toEqual([{ name: 'campaign', value: 'q3' }]);

    // Fan-out copies them onto each email.
    const to = recipient('camp');
    expect((await c.post('/contacts', { email: to, subscribed: true })).status).toBeLessThan(300);
    await ctx.api.database.db.execute(
      sql`update campaigns set status = 'SENDING', started_at = now() where id = ${id}::uuid`,
    );
    await fanoutBatch(ctx.api.database.db, id, sql`true`, 100);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.campaignId, id));
    expect(row.tags).toEqual([{ name: 'campaign', value: 'q3' }]);
  });
});

describe('workflows', () => {
  test('a SEND_EMAIL step takes tags in its config, checked with the field named', async () => {
    const tpl = await as().post('/templates', { name: 't', subject: 's', body: 'b', from: `hi@${ctx.p.domain}` });
    const wf = await as().post('/workflows', { name: 'W', trigger: { type: 'EVENT', event: 'signup' } });
    const ok = await as().post(`/workflows/${wf.body.data.id}/steps`, {
      type: 'SEND_EMAIL',
      config: { templateId: tpl.body.data.id, tags: [{ name: 'flow', value: 'welcome' }] },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.data.config.tags).toEqual([{ name: 'flow', value: 'welcome' }]);
    const dup = await as().post(`/workflows/${wf.body.data.id}/steps`, {
      type: 'SEND_EMAIL',
      config: {
        templateId: tpl.body.data.id,
        tags: [
          { name: 'a', value: '1' },
          { name: 'a', value: '2' },
        ],
      },
    });
    expect(dup.status).toBe(422);
    expect(fields(dup)).toEqual(['config.tags.1.name']);
    const chars = await as().post(`/workflows/${wf.body.data.id}/steps`, {
      type: 'SEND_EMAIL',
      config: { templateId: tpl.body.data.id, tags: [{ name: 'a', value: 'no way' }] },
    });
    expect(chars.status).toBe(422);
    expect(fields(chars)).toEqual(['config.tags.0.value']);
  });
});

describe('GET /reputation?tag=', () => {
  test('reads the per-tag counts of the project only; a malformed tag is 400 naming it', async () => {
    const p = await createTestProject(ctx.api.database);
    const other = await createTestProject(ctx.api.database);
    const count = (projectId: string, name: string, value: string, sent: number, delivered: number) =>
      ctx.api.database.db.execute(sql`
        insert into reputation_tag_counts (project_id, tag_name, tag_value, hour, domain, campaign_id, sent, delivered)
        values (${projectId}::uuid, ${name}, ${value}, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC', ${p.domain}, '00000000-0000-0000-0000-000000000000', ${sent}, ${delivered})`);
    await count(p.id, 'category', 'receipt', 4, 3);
    await count(p.id, 'category', 'welcome', 9, 9);
    await count(other.id, 'category', 'receipt', 50, 50);
    const res = await client(ctx.api.app, p).get('/reputation?tag=category:receipt');
    expect(res.status).toBe(200);
    expect(res.body.data.last24h.overall).toMatchObject({ sent: 4, delivered: 3, deliveryRate: 0.75 });
    expect(res.body.data.last24h.domains).toEqual([expect.objectContaining({ domain: p.domain, sent: 4 })]);
    expect(res.body.data.last7d.overall).toMatchObject({ sent: 4 });
    const none = await client(ctx.api.app, p).get('/reputation?tag=category:other');
    expect(none.body.data.last24h.overall.sent).toBe(0);
    for (const bad of ['category', 'a:b c', ':v', 'n:', 'a:b:c']) {
      const r = await client(ctx.api.app, p).get(`/reputation?tag=${encodeURIComponent(bad)}`);
      expect(r.status).toBe(400);
      expect(r.body.error.errors[0].field).toBe('tag');
    }
  });
});
