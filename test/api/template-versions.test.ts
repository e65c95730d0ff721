/**
 * Template versions through the API (no worker): a new template is version 1, published; `PATCH` publishes a new
 * version at once and the next `/v1/send` records it; `PATCH ?draft=true` writes (and rewrites) one draft while the
 * live version stays; publish makes it live; 409 for publishing without a draft and for a live edit while a draft
 * exists; discard; the version list (keyset pages, newest first) and one version; render preview of any version;
 * workflow steps and campaigns pinning a version (422 naming the field for a draft or unknown number); tenant
 * isolation; and the backfill of a template written without its version row (as an older process would).
 */
import { sql } from 'drizzle-orm';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

async function template(p: TestProject) {
  const as = client(ctx.api.app, p);
  const created = await as.post('/templates', {
    name: 'Welcome',
    subject: 'v1 {{name ?? "you"}}',
    body: '<p>one</p>',
    from: `hi@${p.domain}`,
  });
  expect(created.status).toBe(201);
  return { as, id: created.body.data.id as string, created: created.body.data };
}

test('a new template is version 1; PATCH publishes version 2 at once; /v1/send records the live version', async () => {
  const { as, id, created } = await template(ctx.p);
  expect(created).toMatchObject({ version: 1, draftVersion: null });
  const sent1 = await as.post('/v1/send', { to: recipient('tv'), template: id });
  expect((await as.get(`/emails/${sent1.body.data.emails[0].email}`)).body.data).toMatchObject({
    templateId: id,
    templateVersion: 1,
  });

  const patched = await as.patch(`/templates/${id}`, { subject: 'v2 subject' });
  expect(patched.status).toBe(200);
  expect(patched.body.data).toMatchObject({
    version: 2,
    subject: 'v2 subject',
    body: '<p>one</p>',
    draftVersion: null,
  });
  const sent2 = await as.post('/v1/send', { to: recipient('tv'), template: id });
  const email2 = (await as.get(`/emails/${sent2.body.data.emails[0].email}`)).body.data;
  expect(email2).toMatchObject({ templateVersion: 2, subject: 'v2 subject' });

  // Name only: no new version.
  expect((await as.patch(`/templates/${id}`, { name: 'Renamed' })).body.data).toMatchObject({
    name: 'Renamed',
    version: 2,
  });
  const list = (await as.get(`/templates/${id}/versions`)).body.data;
  expect(
    list.items.map((v: { version: number; status: string; live: boolean }) => [v.version, v.status, v.live]),
  ).toEqual([
    [2, 'published', true],
    [1, 'published', false],
  ]);
  expect(list.total).toBe(2);
  expect((await as.get(`/templates/${id}/versions/1`)).body.data).toMatchObject({
    version: 1,
    subject: 'v1 {{name ?? "you"}}',
    status: 'published',
  });
});

test('drafts: PATCH ?draft=true writes one draft, the live version stays; publish; 409s; discard', async () => {
  const p = await createTestProject(ctx.api.database);
  const { as, id } = await template(p);
  const d1 = await as.patch(`/templates/${id}?draft=true`, { body: '<p>draft</p>' });
  expect(d1.status).toBe(200);
  expect(d1.body.data).toMatchObject({ version: 1, draftVersion: 2, body: '<p>one</p>' });
  const d2 = await as.patch(`/templates/${id}?draft=true`, { subject: 'draft subject' });
  expect(d2.body.data).toMatchObject({ version: 1, draftVersion: 2 });
  expect((await as.get(`/templates/${id}/versions/2`)).body.data).toMatchObject({
    status: 'draft',
    live: false,
    subject: 'draft subject',
    body: '<p>draft</p>',
    publishedAt: null,
  });
  // The live version is what sends use meanwhile.
  const sent = await as.post('/v1/send', { to: recipient('tvd'), template: id });
  expect((await as.get(`/emails/${sent.body.data.emails[0].email}`)).body.data).toMatchObject({
    templateVersion: 1,
    subject: 'v1 {{name ?? "you"}}',
  });

  const live = await as.patch(`/templates/${id}`, { subject: 'live edit' });
  expect(live.status).toBe(409);
  expect(live.body.error.code).toBe('INVALID_STATE');
  // A rendering preview of the draft and of version 1.
  const draftRender = await as.post(`/templates/${id}/render?version=2`, {});
  expect(draftRender.status).toBe(200);
  expect(draftRender.body.data.subject).toBe('draft subject');
  expect((await as.post(`/templates/${id}/render`, { version: 1, data: { name: 'Ada' } })).body.data.subject).toBe(
    'v1 Ada',
  );
  const noVersion = await as.post(`/templates/${id}/render`, { version: 9 });
  expect(noVersion.status).toBe(422);
  expect(noVersion.body.error.errors[0].field).toBe('version');

  const published = await as.post(`/templates/${id}/publish`, {});
  expect(published.status).toBe(200);
  expect(published.body.data).toMatchObject({
    version: 2,
    draftVersion: null,
    subject: 'draft subject',
    body: '<p>draft</p>',
  });
  const again = await as.post(`/templates/${id}/publish`, {});
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('INVALID_STATE');

  await as.patch(`/templates/${id}?draft=true`, { subject: 'to throw away' });
  const discarded = await as.del(`/templates/${id}/draft`);
  expect(discarded.status).toBe(200);
  expect(discarded.body.data).toMatchObject({ version: 2, draftVersion: null, subject: 'draft subject' });
  expect((await as.del(`/templates/${id}/draft`)).status).toBe(409);
  // The live edit works again once no draft is left.
  expect((await as.patch(`/templates/${id}`, { subject: 'v3' })).body.data.version).toBe(3);
});

test('the version list pages by keyset, newest first; a bad cursor is 400', async () => {
  const p = await createTestProject(ctx.api.database);
  const { as, id } = await template(p);
  for (let i = 2; i <= 5; i++) await as.patch(`/templates/${id}`, { subject: `v${i}` });
  const seen: number[] = [];
  let cursor: string | null = null;
  do {
    const res = await as.get(`/templates/${id}/versions?limit=2${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.status).toBe(200);
    expect(res.body.data.total).toBe(5);
    seen.push(...res.body.data.items.map((v: { version: number }) => v.version));
    cursor = res.body.data.nextCursor;
  } while (cursor);
  expect(seen).toEqual([5, 4, 3, 2, 1]);
  expect((await as.get(`/templates/${id}/versions?cursor=nonsense`)).status).toBe(400);
  expect((await as.get(`/templates/${id}/versions/0`)).status).toBe(400);
  expect((await as.get(`/templates/${id}/versions/99`)).status).toBe(404);
});

test('tenant isolation: another project sees no versions, cannot publish, patch or render', async () => {
  const { id } = await template(ctx.p);
  const other = client(ctx.api.app, await createTestProject(ctx.api.database));
  expect((await other.get(`/templates/${id}/versions`)).status).toBe(404);
  expect((await other.get(`/templates/${id}/versions/1`)).status).toBe(404);
  expect((await other.post(`/templates/${id}/publish`, {})).status).toBe(404);
  expect((await other.patch(`/templates/${id}?draft=true`, { subject: 'x' })).status).toBe(404);
  expect((await other.del(`/templates/${id}/draft`)).status).toBe(404);
  expect((await other.post(`/templates/${id}/render?version=1`, {})).status).toBe(404);
});

test('pinning: a workflow step and a campaign take a published version; a draft or unknown number is 422 naming the field', async () => {
  const p = await createTestProject(ctx.api.database);
  const { as, id } = await template(p);
  await as.patch(`/templates/${id}`, { subject: 'v2' });
  await as.patch(`/templates/${id}?draft=true`, { subject: 'draft 3' });

  const wf = (await as.post('/workflows', { name: 'wf', trigger: { type: 'MANUAL' } })).body.data.id as string;
  const graph = (templateVersion: number) => ({
    steps: [{ key: 's', type: 'SEND_EMAIL', config: { templateId: id, templateVersion } }],
    transitions: [{ from: null, to: 's' }],
  });
  expect((await as.put(`/workflows/${wf}/graph`, graph(1))).status).toBe(200);
  for (const n of [3, 7]) {
    const bad = await as.put(`/workflows/${wf}/graph`, graph(n));
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toMatch(/config\.templateVersion$/);
  }

  const base = { name: 'c', from: `news@${p.domain}`, audienceType: 'ALL' };
  const pinned = await as.post('/campaigns', { ...base, templateId: id, templateVersion: 1 });
  expect(pinned.status).toBe(201);
  expect(pinned.body.data).toMatchObject({
    templateId: id,
    templateVersion: 1,
    contentVersion: 1,
    subject: 'v1 {{name ?? "you"}}',
  });
  const latest = await as.post('/campaigns', { ...base, templateId: id });
  expect(latest.body.data).toMatchObject({ templateVersion: null, contentVersion: 2, subject: 'v2' });
  for (const [body, field] of [
    [{ ...base, templateId: id, templateVersion: 3 }, 'templateVersion'],
    [{ ...base, templateId: id, subject: 'mine' }, 'subject'],
    [{ ...base }, 'subject'],
    [{ ...base, subject: 's', body: 'b', templateVersion: 1 }, 'templateVersion'],
  ] as const) {
    const res = await as.post('/campaigns', body);
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
  }
  const foreign = await createTestProject(ctx.api.database);
  const notOurs = await client(ctx.api.app, foreign).post('/campaigns', {
    ...base,
    from: `news@${foreign.domain}`,
    templateId: id,
  });
  expect(notOurs.status).toBe(422);
  expect(notOurs.body.error.errors[0].field).toBe('templateId');
  // Detaching keeps the content and lets it be written by hand.
  const detached = await as.patch(`/campaigns/${latest.body.data.id}`, { templateId: null, subject: 'by hand' });
  expect(detached.body.data).toMatchObject({
    templateId: null,
    templateVersion: null,
    contentVersion: null,
    subject: 'by hand',
  });
});

test('a template written without its version row (an older process, an import) gets it on first use', async () => {
  const p = await createTestProject(ctx.api.database);
  const { as, id } = await template(p);
  await ctx.api.database.db.execute(sql`delete from template_versions where template_id = ${id}::uuid`);
  expect((await as.get(`/templates/${id}/versions/1`)).body.data).toMatchObject({
    version: 1,
    status: 'published',
    live: true,
  });
  expect((await as.patch(`/templates/${id}`, { body: '<p>two</p>' })).body.data.version).toBe(2);
  expect(
    (await as.get(`/templates/${id}/versions`)).body.data.items.map((v: { version: number }) => v.version),
  ).toEqual([2, 1]);
});
