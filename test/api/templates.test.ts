/**
 * Templates CRUD and both list forms; Plunk v2 forms (description, mailbox strings in from/replyTo, pageSize);
 * internationalised sender domains; errors; tenant isolation.
 */
import request from 'supertest';
import { createTestProject, useApiWithProject, client, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const as = (project: TestProject) => client(ctx.api.app, project);

describe('happy path', () => {
  test('create, read, update, delete', async () => {
    const c = await as(ctx.p).post('/templates', {
      name: 'Welcome',
      subject: 'Hi {{name}}',
      body: '<p>{{name}}</p>',
      from: `a@${ctx.p.domain}`,
    });
    expect(c.status).toBe(201);
    expect(c.body.data).toMatchObject({
      name: 'Welcome',
      description: null,
      type: 'TRANSACTIONAL',
      from: `a@${ctx.p.domain}`,
      fromName: null,
      replyTo: null,
    });
    const id = c.body.data.id;
    expect((await as(ctx.p).get(`/templates/${id}`)).body.data).toEqual(c.body.data);
    const u = await as(ctx.p).patch(`/templates/${id}`, { subject: 'Hello {{name}}', type: 'MARKETING', from: null });
    expect(u.status).toBe(200);
    expect(u.body.data).toMatchObject({
      subject: 'Hello {{name}}',
      type: 'MARKETING',
      from: null,
      body: '<p>{{name}}</p>',
    });
    const d = await as(ctx.p).del(`/templates/${id}`);
    expect(d.status).toBe(200);
    expect(d.body.data).toEqual({ id, deleted: true });
    expect((await as(ctx.p).get(`/templates/${id}`)).status).toBe(404);
  });

  test('list: keyset pages newest first, both forms, filters and page numbers', async () => {
    const q = await createTestProject(ctx.api.database);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await as(q).post('/templates', {
        name: `T${i} ${i % 2 ? 'odd' : 'even'}`,
        subject: `S${i}`,
        body: 'b',
        type: i < 2 ? 'MARKETING' : 'TRANSACTIONAL',
      });
      ids.push(r.body.data.id);
    }
    const first = await as(q).get('/templates?limit=2');
    expect(first.status).toBe(200);
    expect(first.body.data).toMatchObject({ hasMore: true, total: 5, page: 1, pageSize: 2, totalPages: 3 });
    expect(first.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[4], ids[3]]);
    expect(first.body.data.templates).toEqual(first.body.data.items);
    const second = await as(q).get(`/templates?limit=2&cursor=${first.body.data.nextCursor}`);
    expect(second.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[1]]);
    expect(second.body.data.page).toBe(2);
    const third = await as(q).get(`/templates?limit=2&cursor=${second.body.data.nextCursor}`);
    expect(third.body.data).toMatchObject({ hasMore: false, nextCursor: null, page: 3 });
    expect(third.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[0]]);
    const byPage = await as(q).get('/templates?limit=2&page=2');
    expect(byPage.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[1]]);
    const marketing = await as(q).get('/templates?type=MARKETING');
    expect(marketing.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[1], ids[0]]);
    const search = await as(q).get('/templates?search=ODD');
    expect(search.body.data).toMatchObject({ total: 2 });
    const subject = await as(q).get('/templates?search=S4');
    expect(subject.body.data.items.map((t: { id: string }) => t.id)).toEqual([ids[4]]);
    expect((await as(q).get('/templates?search=%25')).body.data.total).toBe(0);
  });
});

describe('Plunk v2 forms', () => {
  test('description is stored, answered in GET and lists, searchable, updated and cleared', async () => {
    const q = await createTestProject(ctx.api.database);
    const c = await as(q).post('/templates', {
      name: 'Receipt',
      description: 'Sent after checkout',
      subject: 's',
      body: 'b',
    });
    expect(c.status).toBe(201);
    expect(c.body.data.description).toBe('Sent after checkout');
    expect((await as(q).get(`/templates/${c.body.data.id}`)).body.data.description).toBe('Sent after checkout');
    const list = await as(q).get('/templates?search=checkout');
    expect(list.body.data.templates.map((t: { id: string; description: string }) => [t.id, t.description])).toEqual([
      [c.body.data.id, 'Sent after checkout'],
    ]);
    expect(
      (await as(q).patch(`/templates/${c.body.data.id}`, { description: 'After payment' })).body.data.description,
    ).toBe('After payment');
    expect((await as(q).patch(`/templates/${c.body.data.id}`, { description: null })).body.data.description).toBeNull();
  });

  test('from as a mailbox string: the display name becomes fromName unless fromName is given; replyTo keeps its name', async () => {
    const d = ctx.p.domain;
    const c = await as(ctx.p).post('/templates', {
      name: 'n',
      subject: 's',
      body: 'b',
      from: `Acme <Hello@${d.toUpperCase()}>`,
      replyTo: '"Acme, Support" <help@x.test>',
    });
    expect(c.status).toBe(201);
    expect(c.body.data).toMatchObject({
      from: `Hello@${d}`,
      fromName: 'Acme',
      replyTo: '"Acme, Support" <help@x.test>',
    });
    const explicit = await as(ctx.p).post('/templates', {
      name: 'n',
      subject: 's',
      body: 'b',
      from: `Acme <hello@${d}>`,
      fromName: 'Acme Billing',
    });
    expect(explicit.body.data).toMatchObject({ from: `hello@${d}`, fromName: 'Acme Billing' });
    const id = c.body.data.id;
    // A bare address leaves the stored name alone; a mailbox string replaces it; fromName: null wins and clears.
    expect((await as(ctx.p).patch(`/templates/${id}`, { from: `news@${d}` })).body.data).toMatchObject({
      from: `news@${d}`,
      fromName: 'Acme',
    });
    expect((await as(ctx.p).patch(`/templates/${id}`, { from: `Acme News <news@${d}>` })).body.data).toMatchObject({
      fromName: 'Acme News',
    });
    expect(
      (await as(ctx.p).patch(`/templates/${id}`, { from: `Acme <news@${d}>`, fromName: null })).body.data,
    ).toMatchObject({ fromName: null });
    expect((await as(ctx.p).patch(`/templates/${id}`, { replyTo: 'help@x.test' })).body.data.replyTo).toBe(
      'help@x.test',
    );
  });

  test('an internationalised from domain is stored in punycode', async () => {
    const c = await as(ctx.p).post('/templates', {
      name: 'n',
      subject: 's',
      body: 'b',
      from: 'Bücher <post@bücher.de>',
    });
    expect(c.status).toBe(201);
    expect(c.body.data).toMatchObject({ from: 'post@xn--bcher-kva.de', fromName: 'Bücher' });
  });

  test('pageSize is an alias of limit', async () => {
    const q = await createTestProject(ctx.api.database);
    for (let i = 0; i < 3; i++) await as(q).post('/templates', { name: `T${i}`, subject: 's', body: 'b' });
    const r = await as(q).get('/templates?page=2&pageSize=2');
    expect(r.body.data).toMatchObject({ page: 2, pageSize: 2, totalPages: 2, total: 3 });
    expect(r.body.data.templates.map((t: { name: string }) => t.name)).toEqual(['T0']);
  });
});

describe('errors', () => {
  test.each([
    [{ subject: 's', body: 'b' }, 'name', 'invalid_type'],
    [{ name: 'n', subject: 's', body: 'b', type: 'OTHER' }, 'type', 'invalid_enum_value'],
    [{ name: 'n', subject: 's', body: 'b', from: 'nope' }, 'from', 'invalid_string'],
    [{ name: 'n', subject: 's', body: 'b', from: 'Acme <nope>' }, 'from', 'invalid_string'],
    [{ name: 'n', subject: 's', body: 'b', from: 'a@b.test, c@d.test' }, 'from', 'invalid_string'],
    [{ name: 'n', subject: 's', body: 'b', from: 'Jürgen <jürgen@bücher.de>' }, 'from', 'invalid_string'],
    [{ name: 'n', subject: 's', body: 'b', replyTo: 'Help <help>' }, 'replyTo', 'invalid_string'],
    [{ name: 'n', subject: 's', body: 'b', description: 'x'.repeat(2001) }, 'description', 'too_big'],
    [{ name: 'n', subject: 's', body: 'b', colour: 'red' }, 'colour', 'unrecognized_keys'],
    [{ name: '', subject: 's', body: 'b' }, 'name', 'too_small'],
    [{ name: 'n', subject: 's', body: '{{#each items}}' }, 'body', 'custom'],
  ])('422 on create: %j names %s', async (body, field, code) => {
    const res = await as(ctx.p).post('/templates', body);
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
  });

  test('422 on an empty or invalid update; 404 on unknown ids; 400 on malformed ids and parameters', async () => {
    const c = await as(ctx.p).post('/templates', { name: 'n', subject: 's', body: 'b' });
    const id = c.body.data.id;
    expect((await as(ctx.p).patch(`/templates/${id}`, {})).status).toBe(422);
    expect((await as(ctx.p).patch(`/templates/${id}`, { subject: '{{' })).status).toBe(422);
    const unknown = '0190aaaa-0000-7000-8000-000000000000';
    for (const res of [
      await as(ctx.p).get(`/templates/${unknown}`),
      await as(ctx.p).patch(`/templates/${unknown}`, { name: 'x' }),
      await as(ctx.p).del(`/templates/${unknown}`),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
    const malformed = await as(ctx.p).get('/templates/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({
      code: 'INVALID_PARAMETERS',
      errors: [{ field: 'id', code: 'invalid_string' }],
    });
    for (const qs of [
      'limit=0',
      'limit=101',
      'limit=abc',
      'type=X',
      'cursor=bogus',
      'page=0',
      'pageSize=0',
      'pageSize=101',
    ]) {
      const res = await as(ctx.p).get(`/templates?${qs}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('INVALID_PARAMETERS');
      expect(res.body.error.errors[0].field).toBe(qs.split('=')[0]);
    }
  });
});

describe('security', () => {
  test("another project's template is invisible: 404 on read, update and delete, absent from lists", async () => {
    const other = await createTestProject(ctx.api.database);
    const t = await as(other).post('/templates', { name: 'secret', subject: 's', body: 'b' });
    const id = t.body.data.id;
    expect((await as(ctx.p).get(`/templates/${id}`)).status).toBe(404);
    expect((await as(ctx.p).patch(`/templates/${id}`, { name: 'x' })).status).toBe(404);
    expect((await as(ctx.p).del(`/templates/${id}`)).status).toBe(404);
    const list = await as(ctx.p).get('/templates?search=secret&limit=100');
    expect(list.body.data.items.map((x: { id: string }) => x.id)).not.toContain(id);
    expect((await as(other).get(`/templates/${id}`)).body.data.name).toBe('secret');
  });

  test('public keys are refused; no key is 401', async () => {
    const res = await request(ctx.api.app).get('/templates').set('Authorization', `Bearer ${ctx.p.publicKey}`);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    expect((await request(ctx.api.app).get('/templates')).status).toBe(401);
  });
});
