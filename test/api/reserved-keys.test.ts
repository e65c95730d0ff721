/**
 * Reserved keys in data: `__proto__`, `constructor` and `prototype` (at any depth) are refused with 422 naming the
 * key on every route that takes a data object (contacts, `/v1/send`, `/v1/track`, `/events/track`, template
 * previews, workflow runs) and in contact imports (a CSV column so named refuses the upload), and nothing is
 * written: a `data.__proto__` was accepted and silently dropped before.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { client, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const c = () => client(ctx.api.app, ctx.p);
/** A body as a client sends it: `__proto__` must be a JSON key, which an object literal cannot make. */
const raw = (method: 'post' | 'patch', path: string, json: string) =>
  request(ctx.api.app)
    [method](path)
    .set('Authorization', ctx.p.auth)
    .set('Content-Type', 'application/json')
    .send(json);

async function contactCount(email: string): Promise<number> {
  const rows = await ctx.api.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from contacts where project_id = ${ctx.p.id}::uuid and email = ${email}`,
  );
  return rows.rows[0].n;
}

function expectRefused(res: request.Response, fields: string[]) {
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.errors.map((e: { field: string }) => e.field)).toEqual(fields);
  for (const e of res.body.error.errors)
    expect(e).toMatchObject({ code: 'unrecognized_keys', message: expect.stringContaining('reserved key') });
}

describe.each(['__proto__', 'constructor', 'prototype'])('data key %s', (key) => {
  test('POST /contacts: 422 naming data.<key> (also nested), no contact created', async () => {
    const email = recipient('rk');
    expectRefused(
      await raw('post', '/contacts', `{"email":"${email}","data":{"${key}":{"isAdmin":true},"plan":"pro"}}`),
      [`data.${key}`],
    );
    expectRefused(await raw('post', '/contacts', `{"email":"${email}","data":{"a":{"b":[{"${key}":1}]}}}`), [
      `data.a.b.0.${key}`,
    ]);
    expect(await contactCount(email)).toBe(0);
  });

  test('PATCH /contacts/{id}: 422, the stored data unchanged', async () => {
    const email = recipient('rk');
    const created = await c().post('/contacts', { email, data: { plan: 'free' } });
    expect(created.status).toBe(201);
    expectRefused(await raw('patch', `/contacts/${created.body.data.id}`, `{"data":{"${key}":"x","plan":"pro"}}`), [
      `data.${key}`,
    ]);
    expect((await c().get(`/contacts/${created.body.data.id}`)).body.data.data).toEqual({ plan: 'free' });
  });

  test('POST /v1/send: 422 on data, no contact or email written', async () => {
    const to = recipient('rk');
    expectRefused(
      await raw(
        'post',
        '/v1/send',
        `{"to":"${to}","from":"x@${ctx.p.domain}","subject":"s","body":"b","data":{"${key}":{"value":"v","persistent":false}}}`,
      ),
      [`data.${key}`],
    );
    expect(await contactCount(to)).toBe(0);
    const emails = await ctx.api.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from emails where project_id = ${ctx.p.id}::uuid and to_email = ${to}`,
    );
    expect(emails.rows[0].n).toBe(0);
  });

  test('POST /v1/track and /events/track: 422 on data, no contact or event written', async () => {
    const email = recipient('rk');
    expectRefused(await raw('post', '/v1/track', `{"email":"${email}","event":"signup","data":{"${key}":"x"}}`), [
      `data.${key}`,
    ]);
    expectRefused(
      await raw('post', '/events/track', `{"email":"${email}","event":"signup","data":{"ok":1,"${key}":"x"}}`),
      [`data.${key}`],
    );
    expect(await contactCount(email)).toBe(0);
  });

  test('POST /templates/render: 422 on data', async () => {
    expectRefused(await raw('post', '/templates/render', `{"subject":"s","body":"{{a}}","data":{"${key}":"x"}}`), [
      `data.${key}`,
    ]);
  });

  test('CSV import: a column so named refuses the upload with 422 naming it', async () => {
    const res = await request(ctx.api.app)
      .post('/contacts/import')
      .set('Authorization', ctx.p.auth)
      .attach('file', Buffer.from(`email,${key},plan\n${recipient('rk')},x,pro\n`), 'contacts.csv');
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({
      field: 'file',
      code: 'unrecognized_keys',
      message: expect.stringContaining(`"${key}"`),
    });
  });
});

test('every reserved key of a body is listed, and look-alikes pass', async () => {
  const email = recipient('rk');
  expectRefused(
    await raw('post', '/contacts', `{"email":"${email}","data":{"__proto__":1,"x":{"constructor":2},"prototype":3}}`),
    ['data.__proto__', 'data.x.constructor', 'data.prototype'],
  );
  const ok = await raw(
    'post',
    '/contacts',
    `{"email":"${email}","data":{"Constructor":1,"proto":2,"note":"__proto__"}}`,
  );
  expect(ok.status).toBe(201);
  expect(ok.body.data.data).toEqual({ Constructor: 1, proto: 2, note: '__proto__' });
});
