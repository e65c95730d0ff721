/**
 * Campaign A/B tests through the API alone (no worker): variants and settings stored and shown, every validation
 * error naming its field, edits, the winner picked by hand in the right state only (409 otherwise), the variant
 * report, tenant isolation, and the SQL assignment matching its reference.
 */
import { sql } from 'drizzle-orm';
import { abBucket, abBucketSql } from '@mailroom/campaigns/ab-assign';
import { client, createTestProject, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject({ CAMPAIGN_AB_MIN_WAIT_SECONDS: '120', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' });
const as = (project: TestProject) => client(ctx.api.app, project);

const variants = [
  { subject: 'A: {{firstName ?? "hi"}}' },
  { subject: 'B subject', body: '<p>B</p><a href="{{unsubscribeUrl}}">unsubscribe</a>' },
];
const abTest = { testShare: 20, metric: 'clicks', waitSeconds: 3600 };
const draft = (p: TestProject, extra: object = {}) =>
  as(p).post('/campaigns', {
    name: 'AB',
    subject: 'Base',
    body: '<p>Base</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    variants,
    abTest,
    ...extra,
  });
const fieldsOf = (r: { body: { error: { errors: { field: string }[] } } }) => r.body.error.errors.map((e) => e.field);

describe('A/B settings', () => {
  test('a campaign with variants and abTest shows them; a template variant copies its content', async () => {
    const p = await createTestProject(ctx.api.database);
    const tpl = (
      await as(p).post('/templates', {
        name: 't',
        subject: 'From template',
        body: '<p>T</p><a href="{{unsubscribeUrl}}">u</a>',
        type: 'MARKETING',
      })
    ).body.data;
    const res = await draft(p, {
      variants: [...variants, { templateId: tpl.id }],
      abTest: { ...abTest, metric: 'event', event: ' purchase ' },
    });
    expect(res.status).toBe(201);
    expect(res.body.data.variants).toEqual([
      { index: 0, name: 'A', subject: variants[0].subject, body: null, templateId: null },
      { index: 1, name: 'B', subject: 'B subject', body: variants[1].body, templateId: null },
      { index: 2, name: 'C', subject: 'From template', body: tpl.body, templateId: tpl.id },
    ]);
    expect(res.body.data.abTest).toEqual({
      testShare: 20,
      metric: 'event',
      event: 'purchase',
      waitSeconds: 3600,
      phase: null,
      decideAt: null,
      winner: null,
      decision: null,
    });
    expect((await as(p).get(`/campaigns/${res.body.data.id}`)).body.data).toEqual(res.body.data);
    const plain = await as(p).post('/campaigns', {
      name: 'x',
      subject: 's',
      body: '<p>b</p>',
      from: `n@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(plain.body.data).toMatchObject({ variants: null, abTest: null });
  });

  test('every rule broken is a 422 naming its field', async () => {
    const p = await createTestProject(ctx.api.database);
    const other = await createTestProject(ctx.api.database);
    const foreignTpl = (await as(other).post('/templates', { name: 't', subject: 's', body: '<p>b</p>' })).body.data.id;
    const cases: [object, string[]][] = [
      [{ variants: [variants[0]] }, ['variants']],
      [{ variants: Array(6).fill(variants[0]) }, ['variants']],
      [{ variants: [...variants, { subject: 'ok' }, {}] }, ['variants.3']],
      [{ variants: [...variants, { subject: '{{#if}}' }] }, ['variants.2.subject']],
      [{ variants: [variants[0], { body: '<p>{{#each}}</p>' }] }, ['variants.1.body']],
      [{ variants: [variants[0], { templateId: foreignTpl }] }, ['variants.1.templateId']],
      [{ variants: [{ templateId: foreignTpl, subject: 'x' }, variants[1]] }, ['variants.0.templateId']],
      [{ variants: [variants[0], { colour: 'red' }] }, ['variants.1.colour']],
      [{ abTest: { ...abTest, testShare: 0 } }, ['abTest.testShare']],
      [{ abTest: { ...abTest, testShare: 101 } }, ['abTest.testShare']],
      [{ abTest: { ...abTest, metric: 'revenue' } }, ['abTest.metric']],
      [{ abTest: { ...abTest, metric: 'event' } }, ['abTest.event']],
      [{ abTest: { ...abTest, event: 'purchase' } }, ['abTest.event']],
      [{ abTest: { ...abTest, waitSeconds: 60 } }, ['abTest.waitSeconds']],
      [{ abTest: { testShare: 20, metric: 'opens' } }, ['abTest.waitSeconds']],
      [{ abTest: undefined }, ['abTest']],
      [{ variants: undefined }, ['variants']],
      [{ variants: null }, ['variants']],
    ];
    for (const [extra, fields] of cases) {
      const res = await draft(p, extra);
      expect({ extra, status: res.status }).toEqual({ extra, status: 422 });
      expect({ extra, fields: fieldsOf(res) }).toEqual({ extra, fields });
    }
    expect((await as(p).get('/campaigns')).body.data.items).toHaveLength(0);
  });

  test('PATCH: abTest alone keeps the variants; null and null removes the test; SENDING is not editable', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    const patched = await as(p).patch(`/campaigns/${id}`, { abTest: { ...abTest, testShare: 50, metric: 'opens' } });
    expect(patched.status).toBe(200);
    expect(patched.body.data.abTest).toMatchObject({ testShare: 50, metric: 'opens' });
    expect(patched.body.data.variants).toHaveLength(2);
    const three = await as(p).patch(`/campaigns/${id}`, { variants: [...variants, { subject: 'C' }] });
    expect(three.body.data.variants.map((v: { name: string }) => v.name)).toEqual(['A', 'B', 'C']);
    expect(three.body.data.abTest.testShare).toBe(50);
    expect(fieldsOf(await as(p).patch(`/campaigns/${id}`, { variants: null, abTest }))).toEqual(['variants']);
    const removed = await as(p).patch(`/campaigns/${id}`, { variants: null, abTest: null });
    expect(removed.body.data).toMatchObject({ variants: null, abTest: null });
    const fresh = (
      await as(p).post('/campaigns', {
        name: 'x',
        subject: 's',
        body: '<p>b</p>',
        from: `n@${p.domain}`,
        audienceType: 'ALL',
      })
    ).body.data.id;
    expect(fieldsOf(await as(p).patch(`/campaigns/${fresh}`, { abTest }))).toEqual(['variants']);
    const sending = (await draft(p)).body.data.id;
    await as(p).post(`/campaigns/${sending}/send`, {});
    expect((await as(p).patch(`/campaigns/${sending}`, { abTest: { ...abTest, testShare: 30 } })).status).toBe(409);
    await as(p).post(`/campaigns/${sending}/cancel`, {});
  });
});

describe('picking the winner', () => {
  test('409 unless SENDING in its test, 422 for no such variant; once only; the report shows the decision', async () => {
    const p = await createTestProject(ctx.api.database);
    expect(
      (await as(p).post('/webhooks/endpoints', { url: 'http://127.0.0.1:9/hooks', eventTypes: ['campaign.*'] })).status,
    ).toBe(201);
    const id = (await draft(p)).body.data.id;
    const early = await as(p).post(`/campaigns/${id}/winner`, {});
    expect(early.status).toBe(409);
    expect(early.body.error.code).toBe('INVALID_STATE');
    const plain = (
      await as(p).post('/campaigns', {
        name: 'x',
        subject: 's',
        body: '<p>b</p>',
        from: `n@${p.domain}`,
        audienceType: 'ALL',
      })
    ).body.data.id;
    expect((await as(p).post(`/campaigns/${plain}/winner`, {})).status).toBe(409);
    expect((await as(p).get(`/campaigns/${plain}/variants`)).status).toBe(409);

    const sent = await as(p).post(`/campaigns/${id}/send`, {});
    expect(sent.body.data).toMatchObject({ status: 'SENDING', abTest: { phase: 'TESTING', winner: null } });
    const bad = await as(p).post(`/campaigns/${id}/winner`, { variant: 2 });
    expect(bad.status).toBe(422);
    expect(fieldsOf(bad)).toEqual(['variant']);
    expect(fieldsOf(await as(p).post(`/campaigns/${id}/winner`, { variant: -1 }))).toEqual(['variant']);

    const other = await createTestProject(ctx.api.database);
    expect((await as(other).post(`/campaigns/${id}/winner`, { variant: 1 })).status).toBe(404);
    expect((await as(other).get(`/campaigns/${id}/variants`)).status).toBe(404);

    const picked = await as(p).post(`/campaigns/${id}/winner`, { variant: 1 });
    expect(picked.status).toBe(200);
    const hooks = await ctx.api.database.db.execute<{ payload: { data: Record<string, unknown> } }>(
      sql`select payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type = 'campaign.winner'`,
    );
    expect(hooks.rows.map((r) => r.payload.data)).toEqual([
      { campaignId: id, winner: 1, by: 'manual', basis: 'choice', metric: 'clicks', pValue: null, withinNoise: true },
    ]);
    expect(picked.body.data.abTest).toMatchObject({
      phase: 'TESTING',
      winner: 1,
      decision: { winner: 1, by: 'manual', basis: 'choice', metric: 'clicks', pValue: null, withinNoise: true },
    });
    expect(picked.body.data.abTest.decision.variants).toEqual([
      { variant: 0, sent: 0, conversions: 0, rate: 0 },
      { variant: 1, sent: 0, conversions: 0, rate: 0 },
    ]);
    const again = await as(p).post(`/campaigns/${id}/winner`, {});
    expect(again.status).toBe(409);
    expect(again.body.error.message).toContain('already variant 1');

    const report = await as(p).get(`/campaigns/${id}/variants`);
    expect(report.status).toBe(200);
    expect(report.body.data).toMatchObject({
      campaignId: id,
      phase: 'TESTING',
      metric: 'clicks',
      testShare: 20,
      winner: 1,
    });
    expect(
      report.body.data.variants.map((v: { name: string; winner: boolean; subject: string }) => [
        v.name,
        v.winner,
        v.subject,
      ]),
    ).toEqual([
      ['A', false, variants[0].subject],
      ['B', true, 'B subject'],
    ]);

    await as(p).post(`/campaigns/${id}/cancel`, {});
    expect((await as(p).post(`/campaigns/${id}/winner`, {})).status).toBe(409);
  });

  test('pick now without a variant: the highest rate so far, ties to the first', async () => {
    const p = await createTestProject(ctx.api.database);
    const id = (await draft(p)).body.data.id;
    await as(p).post(`/campaigns/${id}/send`, {});
    const picked = await as(p).post(`/campaigns/${id}/winner`, {});
    expect(picked.status).toBe(200);
    expect(picked.body.data.abTest.decision).toMatchObject({
      winner: 0,
      by: 'manual',
      basis: 'metric',
      withinNoise: true,
      note: expect.stringContaining('Not enough data'),
    });
    await as(p).post(`/campaigns/${id}/cancel`, {});
  });
});

test("the fan-out's SQL bucket is the reference bucket", async () => {
  const rows = await ctx.api.database.db.execute<{ id: string; bucket: string }>(sql`
    select g.id::text as id, ${abBucketSql('0190A6B4-8A4E-7000-8000-00000000000A', sql.raw('g.id'))}::int as bucket
    from (select gen_random_uuid() as id from generate_series(1, 500)) g`);
  for (const r of rows.rows) expect(Number(r.bucket)).toBe(abBucket('0190a6b4-8a4e-7000-8000-00000000000a', r.id));
});
