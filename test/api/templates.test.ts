/**
 * Templates CRUD and both list forms; errors; tenant isolation.
 */
import request from 'supertest';
import { createTestProject, useApiWithProject, client, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const as = (project: TestProject) => client(ctx.api.app, project);

describe('happy path', () => {
  test('create, read, update, delete', async () => {
    const c = await as(ctx.p).post('/templates', { name: 'Welcome', subject: 'Hi {{name}}', body: '<p>{{name}}</p>', from: `a@${ctx.p.domain}` });
    expect(c.status).toBe(201);
    expect(c.body.data).toMatchObject({ name: 'Welcome', type: 'TRANSACTIONAL', from: `a@${ctx.p.domain}`, fromName: null, replyTo: null });
    const id = c.body.data.id;
    expect((await as(ctx.p).get(`/templates/${id}`)).body.data).toEqual(c.body.data);
    const u = await as(ctx.p).patch(`/templates/${id}`, { subject: 'Hello {{name}}', type: 'MARKETING', from: null });
    expect(u.status).toBe(200);
    expect(u.body.data).toMatchObject({ subject: 'Hello {{name}}', type: 'MARKETING', from: null, body: '<p>{{name}}</p>' });
    const d = await as(ctx.p).del(`/templates/${id}`);
    expect(d.status).toBe(200);
    expect(d.body.data).toEqual({ id, deleted: true });
    expect((await as(ctx.p).get(`/templates/${id}`)).status).toBe(404);
  });

  test('list: keyset pages newest first, both forms, filters and page numbers', async () => {
    const q = await createTestProject(ctx.api.database);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await as(q).post('/templates', { name: `T${i} ${i % 2 ? 'odd' : 'even'}`, subject: `S${i}`, body: 'b', type: i < 2 ? 'MARKETING' : 'TRANSACTIONAL' });
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

describe('errors', () => {
  test.each([
    [{ subject: 's', body: 'b' }, 'name', 'invalid_type'],
    [{ name: 'n', subject: 's', body: 'b', type: 'OTHER' }, 'type', 'invalid_enum_value'],
    [{ name: 'n', subject: 's', body: 'b', from: 'nope' }, 'from', 'invalid_string'],
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
    for (const res of [await as(ctx.p).get(`/templates/${unknown}`), await as(ctx.p).patch(`/templates/${unknown}`, { name: 'x' }), await as(ctx.p).del(`/templates/${unknown}`)]) {
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('NOT_FOUND');
    }
    const malformed = await as(ctx.p).get('/templates/not-a-uuid');
    expect(malformed.status).toBe(400);
    expect(malformed.body.error).toMatchObject({ code: 'INVALID_PARAMETERS', errors: [{ field: 'id', code: 'invalid_string' }] });
    for (const qs of ['limit=0', 'limit=101', 'limit=abc', 'type=X', 'cursor=bogus', 'page=0']) {
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
