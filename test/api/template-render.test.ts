/**
 * Template previews: `POST /templates/{id}/render` and `POST /templates/render`. Happy path (the worker's context:
 * contact data under `data`, `{ value, persistent }` unwrapped, Markdown), `missingVariables`, errors (syntax 422
 * naming the field, unknown ids 404, body checked), security (public key, other project's ids).
 */
import request from 'supertest';
import { createProject } from '@mailroom/projects/queries/projects';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (p: TestProject) => client(ctx.api.app, p);

async function template(p: TestProject, fields: object = {}) {
  const res = await as(p).post('/templates', {
    name: 'Welcome',
    subject: 'Hi {{firstName ?? "there"}} from {{company}}',
    body: '<p>Hello {{firstName}} ({{email}})</p><p>{{plan.name}}</p>{{#if coupon}}<b>{{coupon}}</b>{{/if}}<a href="{{unsubscribeUrl}}">u</a>',
    type: 'MARKETING',
    ...fields,
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

describe('happy path', () => {
  test('a stored template renders against data; missingVariables lists what the data lacks', async () => {
    const id = await template(ctx.p);
    const res = await as(ctx.p).post(`/templates/${id}/render`, {
      data: { company: 'Acme & Co', plan: { name: 'Pro' } },
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      subject: 'Hi there from Acme & Co',
      html: expect.stringContaining('<p>Hello  ()</p><p>Pro</p><a href="'),
      text: expect.stringContaining('Hello ()'),
      // firstName has a default in the subject, but not in the body.
      missingVariables: ['firstName', 'email', 'coupon'],
    });
    expect(res.body.data.html).toContain(`${ctx.api.config.publicUrl}/unsubscribe/preview`);
    // Escaping as the worker does it: `{{…}}` HTML-escaped in the body, the subject left as text.
    const escaped = await as(ctx.p).post(`/templates/${id}/render`, {
      data: { company: '<b>', firstName: '<i>', email: 'e', coupon: 'C', plan: { name: 'P' } },
    });
    expect(escaped.body.data).toMatchObject({ subject: 'Hi <i> from <b>', missingVariables: [] });
    expect(escaped.body.data.html).toContain('Hello &lt;i&gt;');
  });

  test('contactId merges the contact (email and stored data) under data; data wins; persistent:false values are unwrapped', async () => {
    const id = await template(ctx.p);
    const email = recipient('render');
    const contact = await as(ctx.p).post('/contacts', {
      email,
      data: { firstName: 'Ann', company: 'Stored Inc', plan: { name: 'Basic' } },
    });
    const res = await as(ctx.p).post(`/templates/${id}/render`, {
      contactId: contact.body.data.id,
      data: { company: { value: 'Given Ltd', persistent: false } },
    });
    expect(res.status).toBe(200);
    expect(res.body.data.subject).toBe('Hi Ann from Given Ltd');
    expect(res.body.data.html).toContain(`<p>Hello Ann (${email})</p><p>Basic</p>`);
    expect(res.body.data.missingVariables).toEqual(['coupon']);
    // Rendering stored nothing on the contact.
    expect((await as(ctx.p).get(`/contacts/${contact.body.data.id}`)).body.data.data).toEqual({
      firstName: 'Ann',
      company: 'Stored Inc',
      plan: { name: 'Basic' },
    });
  });

  test('inline sources: HTML by default, Markdown on request, the same context rules', async () => {
    const html = await as(ctx.p).post('/templates/render', {
      subject: 'S {{a}}',
      body: '<p>{{#each items}}{{name}},{{/each}}</p>',
      data: { items: [{ name: 'x' }, { name: 'y' }] },
    });
    expect(html.status).toBe(200);
    expect(html.body.data).toEqual({ subject: 'S', html: '<p>x,y,</p>', text: 'x,y,', missingVariables: ['a'] });
    const md = await as(ctx.p).post('/templates/render', {
      subject: 'M',
      body: '# Hi {{name}}\n\n*{{{note ?? "none"}}}*',
      format: 'markdown',
      data: { name: 'Bo' },
    });
    expect(md.status).toBe(200);
    expect(md.body.data.html).toContain('<h1>Hi Bo</h1>');
    expect(md.body.data.html).toContain('<em>none</em>');
    expect(md.body.data.missingVariables).toEqual([]);
    // A test key may preview too: nothing is sent.
    const keys = await createProject(ctx.api.database.db, 'render test key');
    const viaTestKey = await request(ctx.api.app)
      .post('/templates/render')
      .set('Authorization', `Bearer ${keys.testSecretKey}`)
      .send({ subject: 's', body: 'b' });
    expect(viaTestKey.status).toBe(200);
  });
});

describe('errors', () => {
  test('bad template syntax is 422 naming the field', async () => {
    const subject = await as(ctx.p).post('/templates/render', { subject: 'Hi {{#if x}}', body: 'fine' });
    expect(subject.status).toBe(422);
    expect(subject.body.error.code).toBe('VALIDATION_ERROR');
    expect(subject.body.error.errors.map((e: { field: string }) => e.field)).toEqual(['subject']);
    const body = await as(ctx.p).post('/templates/render', { subject: 'ok', body: '<p>{{name}</p>' });
    expect(body.status).toBe(422);
    expect(body.body.error.errors).toEqual([
      expect.objectContaining({ field: 'body', message: expect.stringContaining('template syntax error') }),
    ]);
  });

  test('unknown template or contact 404; body checked (422 unknown field, bad contactId); bad id 400', async () => {
    const unknown = '0190aaaa-0000-7000-8000-000000000000';
    const noTemplate = await as(ctx.p).post(`/templates/${unknown}/render`, {});
    expect(noTemplate.status).toBe(404);
    expect(noTemplate.body.error.message).toBe('Template not found');
    const noContact = await as(ctx.p).post('/templates/render', { subject: 's', body: 'b', contactId: unknown });
    expect(noContact.status).toBe(404);
    expect(noContact.body.error.message).toBe('Contact not found');
    const extra = await as(ctx.p).post('/templates/render', { subject: 's', body: 'b', to: 'x' });
    expect(extra.status).toBe(422);
    expect(extra.body.error.errors[0]).toMatchObject({ code: 'unrecognized_keys' });
    const missing = await as(ctx.p).post('/templates/render', { body: 'b' });
    expect(missing.status).toBe(422);
    expect(missing.body.error.errors[0].field).toBe('subject');
    const badContact = await as(ctx.p).post('/templates/render', { subject: 's', body: 'b', contactId: 'nope' });
    expect(badContact.status).toBe(422);
    expect(badContact.body.error.errors[0].field).toBe('contactId');
    const badFormat = await as(ctx.p).post('/templates/render', { subject: 's', body: 'b', format: 'text' });
    expect(badFormat.status).toBe(422);
    expect((await as(ctx.p).post('/templates/nope/render', {})).status).toBe(400);
  });
});

describe('security', () => {
  test("public key 403, no key 401; another project's template or contact is 404", async () => {
    const id = await template(ctx.p);
    for (const path of [`/templates/${id}/render`, '/templates/render']) {
      const pk = await request(ctx.api.app)
        .post(path)
        .set('Authorization', `Bearer ${ctx.p.publicKey}`)
        .send({ subject: 's', body: 'b' });
      expect(pk.status).toBe(403);
      expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
      expect((await request(ctx.api.app).post(path).send({ subject: 's', body: 'b' })).status).toBe(401);
    }
    const other = await createTestProject(ctx.api.database);
    const foreignTemplate = await as(other).post(`/templates/${id}/render`, {});
    expect(foreignTemplate.status).toBe(404);
    const contact = await as(ctx.p).post('/contacts', { email: recipient('mine'), data: { secret: 'x' } });
    const foreignContact = await as(other).post('/templates/render', {
      subject: '{{secret}}',
      body: 'b',
      contactId: contact.body.data.id,
    });
    expect(foreignContact.status).toBe(404);
    expect(foreignContact.body.error.message).toBe('Contact not found');
  });
});
