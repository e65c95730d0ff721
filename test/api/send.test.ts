/**
 * POST /v1/send: happy path, every 4xx it can give, and security. No worker runs here: these tests check what
 * the API accepts, stores and queues.
 */
import request from 'supertest';
import { and, eq, sql } from 'drizzle-orm';
import { contacts } from '@mailroom/db/schema/contacts';
import { emails } from '@mailroom/db/schema/emails';
import { setProjectDisabled } from '@mailroom/projects/queries/projects';
import { createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

const send = (body: unknown, auth = ctx.p.auth) =>
  request(ctx.api.app)
    .post('/v1/send')
    .set('Authorization', auth)
    .send(body as object);
const emailCount = async (projectId: string) =>
  (
    await ctx.api.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from emails where project_id = ${projectId}`,
    )
  ).rows[0].n;

describe('happy path', () => {
  test('queues one email per distinct recipient and answers 202 with the Send result', async () => {
    const a = recipient();
    const b = recipient();
    const res = await send({
      to: [a, { name: 'B', email: b }, a.toUpperCase()],
      from: `x@${ctx.p.domain}`,
      subject: 'S',
      body: '<p>B</p>',
    });
    expect(res.status).toBe(202);
    expect(res.body.success).toBe(true);
    expect(res.body.data.emails).toHaveLength(2);
    expect(res.body.data.emails[0]).toEqual({
      contact: { id: expect.any(String), email: expect.any(String) },
      email: expect.any(String),
      status: 'queued',
    });
    expect(res.body.data.suppressed).toEqual([]);
    expect(new Date(res.body.data.timestamp).toString()).not.toBe('Invalid Date');
    const jobs = await Promise.all(
      res.body.data.emails.map((e: { email: string }) =>
        ctx.api.redis.exists(`${ctx.api.config.queuePrefix}:send:${e.email}`),
      ),
    );
    expect(jobs).toEqual([1, 1]);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[0].email));
    expect(row).toMatchObject({
      status: 'queued',
      fromEmail: `x@${ctx.p.domain}`,
      subject: 'S',
      source: 'transactional',
    });
  });

  test('a subdomain of a verified domain may send; `name` sets the display name; reply sets Reply-To', async () => {
    const res = await send({
      to: recipient(),
      from: `x@mail.${ctx.p.domain}`,
      name: 'Sender',
      reply: `r@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
    });
    expect(res.status).toBe(202);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[0].email));
    expect(row).toMatchObject({ fromName: 'Sender', replyTo: `r@${ctx.p.domain}` });
  });

  test('attachments are stored byte for byte and referenced by every email: small ones by the write statement, large ones beside it', async () => {
    const small = Buffer.from('small attachment \u0000\u00ff', 'latin1');
    const large = Buffer.alloc(300 * 1024, 7);
    for (const bytes of [small, large]) {
      const res = await send({
        to: [recipient(), recipient()],
        from: `x@${ctx.p.domain}`,
        subject: 's',
        body: 'b',
        attachments: [{ filename: 'f.txt', content: bytes.toString('base64') }],
      });
      expect(res.status).toBe(202);
      const rows = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[0].email));
      const other = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[1].email));
      expect(rows[0].attachmentIds).toHaveLength(1);
      expect(other[0].attachmentIds).toEqual(rows[0].attachmentIds);
      const stored = await ctx.api.database.db.execute<{ size: number; content: Buffer }>(
        sql`select size, content from attachments where id = ${rows[0].attachmentIds[0]}::uuid`,
      );
      expect(stored.rows[0].size).toBe(bytes.length);
      expect(Buffer.compare(stored.rows[0].content, bytes)).toBe(0);
    }
  });

  test('mailbox strings: from "Acme <x@…>" gives the sender name (an explicit `name` wins); to and reply take them too', async () => {
    const a = recipient('mb');
    const res = await send({
      to: `"Ann, A." <${a}>`,
      from: `Acme <X@${ctx.p.domain.toUpperCase()}>`,
      reply: 'Support <help@x.test>',
      subject: 's',
      body: 'b',
    });
    expect(res.status).toBe(202);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[0].email));
    expect(row).toMatchObject({
      fromEmail: `X@${ctx.p.domain}`,
      fromName: 'Acme',
      toEmail: a,
      toName: 'Ann, A.',
      replyTo: 'Support <help@x.test>',
    });
    const named = await send({
      to: recipient(),
      from: `Acme <x@${ctx.p.domain}>`,
      name: 'Acme Billing',
      subject: 's',
      body: 'b',
    });
    const [row2] = await ctx.api.database.db
      .select()
      .from(emails)
      .where(eq(emails.id, named.body.data.emails[0].email));
    expect(row2).toMatchObject({ fromEmail: `x@${ctx.p.domain}`, fromName: 'Acme Billing' });
    // The domain of a mailbox string is checked like any from: an unverified one is 422 on from.
    const refused = await send({ to: recipient(), from: 'Acme <x@unverified.example.org>', subject: 's', body: 'b' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.errors).toEqual([
      expect.objectContaining({ field: 'from', message: expect.stringContaining('unverified.example.org') }),
    ]);
  });

  test('an internationalised recipient domain is stored in punycode, on the email and the contact', async () => {
    const tag = Math.random().toString(36).slice(2, 8);
    const res = await send({
      to: [`Ann.${tag}@Bücher.de`, `ann.${tag}@xn--bcher-kva.de`],
      from: `x@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
    });
    expect(res.status).toBe(202);
    expect(res.body.data.emails).toHaveLength(1);
    expect(res.body.data.emails[0].contact.email).toBe(`Ann.${tag}@xn--bcher-kva.de`);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, res.body.data.emails[0].email));
    expect(row.toEmail).toBe(`Ann.${tag}@xn--bcher-kva.de`);
  });

  test('creates the contact unsubscribed by default, and never changes subscription when `subscribed` is omitted', async () => {
    const to = recipient();
    const first = await send({
      to,
      from: `x@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      data: { plan: 'pro', temp: { value: 1, persistent: false } },
    });
    const id = first.body.data.emails[0].contact.id;
    const read = async () => (await ctx.api.database.db.select().from(contacts).where(eq(contacts.id, id)))[0];
    expect(await read()).toMatchObject({ subscribed: false, data: { plan: 'pro' } });
    await send({ to, from: `x@${ctx.p.domain}`, subject: 's', body: 'b', subscribed: true });
    expect((await read()).subscribed).toBe(true);
    await send({ to, from: `x@${ctx.p.domain}`, subject: 's', body: 'b', data: { plan: null, seats: 3 } });
    expect(await read()).toMatchObject({ subscribed: true, data: { seats: 3 } });
  });

  test('the Plunk SDK request shape is accepted (type, headers, subscribed, name, from)', async () => {
    const res = await send({
      to: recipient(),
      subject: 'Hi',
      body: '**md**',
      type: 'markdown',
      subscribed: true,
      name: 'Plunk',
      from: `p@${ctx.p.domain}`,
      headers: { 'X-Entity-Ref-ID': '1' },
    });
    expect(res.status).toBe(202);
  });

  test('a template supplies subject, body, from and reply-to; request fields override them', async () => {
    const t = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', ctx.p.auth)
      .send({
        name: 't',
        subject: 'T {{x}}',
        body: 'B',
        from: `t@${ctx.p.domain}`,
        fromName: 'Tpl',
        replyTo: `tr@${ctx.p.domain}`,
      });
    const plain = await send({ to: recipient(), template: t.body.data.id });
    expect(plain.status).toBe(202);
    const [row] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, plain.body.data.emails[0].email));
    expect(row).toMatchObject({
      subject: 'T {{x}}',
      body: 'B',
      fromEmail: `t@${ctx.p.domain}`,
      fromName: 'Tpl',
      replyTo: `tr@${ctx.p.domain}`,
      templateId: t.body.data.id,
    });
    const over = await send({
      to: recipient(),
      template: t.body.data.id,
      subject: 'Own',
      from: `o@${ctx.p.domain}`,
      reply: `or@${ctx.p.domain}`,
    });
    const [row2] = await ctx.api.database.db.select().from(emails).where(eq(emails.id, over.body.data.emails[0].email));
    expect(row2).toMatchObject({
      subject: 'Own',
      body: 'B',
      fromEmail: `o@${ctx.p.domain}`,
      fromName: null,
      replyTo: `or@${ctx.p.domain}`,
    });
  });
});

describe('errors', () => {
  const expectError = (res: request.Response, status: number, code: string) => {
    expect(res.status).toBe(status);
    expect(res.body).toMatchObject({
      success: false,
      code,
      message: expect.any(String),
      error: { code, statusCode: status, requestId: res.headers['x-request-id'] },
    });
    expect(res.body.error.message).toBe(res.body.message);
    expect(new Date(res.body.timestamp).toString()).not.toBe('Invalid Date');
  };

  test('400 INVALID_JSON for malformed JSON', async () => {
    const res = await request(ctx.api.app)
      .post('/v1/send')
      .set('Authorization', ctx.p.auth)
      .set('Content-Type', 'application/json')
      .send('{"to": ');
    expectError(res, 400, 'INVALID_JSON');
  });

  test('400 BAD_REQUEST for a body that is not JSON', async () => {
    const res = await request(ctx.api.app)
      .post('/v1/send')
      .set('Authorization', ctx.p.auth)
      .set('Content-Type', 'text/plain')
      .send('to=a');
    expectError(res, 400, 'BAD_REQUEST');
  });

  test('413 PAYLOAD_TOO_LARGE for a body over 20 MB', async () => {
    const res = await send({
      to: recipient(),
      from: `x@${ctx.p.domain}`,
      subject: 's',
      body: 'x'.repeat(21 * 1024 * 1024),
    });
    expectError(res, 413, 'PAYLOAD_TOO_LARGE');
  });

  test.each([
    [{}, 'to', 'invalid_type'],
    [{ to: 'not-an-email', subject: 's', body: 'b' }, 'to', 'invalid_string'],
    [{ to: 42, subject: 's', body: 'b' }, 'to', 'invalid_type'],
    [{ to: { email: 'bad' }, subject: 's', body: 'b' }, 'to.email', 'invalid_string'],
    [{ to: ['a@b.test', { name: 'x', email: 'nope' }], subject: 's', body: 'b' }, 'to.1.email', 'invalid_string'],
    [{ to: [], subject: 's', body: 'b' }, 'to', 'too_small'],
    [{ to: 'a@b.test', subject: 's', body: 'b', extra: 1 }, 'extra', 'unrecognized_keys'],
    [{ to: 'a@b.test', subject: 's', body: 'b', type: 'pdf' }, 'type', 'invalid_enum_value'],
    [{ to: 'a@b.test', subject: 's', body: 'b', subscribed: 'yes' }, 'subscribed', 'invalid_type'],
    [{ to: 'a@b.test', subject: 's', body: 'b', reply: 'nope' }, 'reply', 'invalid_string'],
    [{ to: 'a@b.test', subject: 's', body: 'b', reply: 'Help <nope>' }, 'reply', 'invalid_string'],
    [{ to: 'jürgen@example.de', subject: 's', body: 'b' }, 'to', 'invalid_string'],
    [{ to: 'a@b.test', from: 'Jürgen <jürgen@bücher.de>', subject: 's', body: 'b' }, 'from', 'invalid_string'],
    [{ to: 'a@b.test', from: 'Acme <a@b.test>, Other <c@d.test>', subject: 's', body: 'b' }, 'from', 'invalid_string'],
    [{ to: 'a@b.test', from: 'Acme <a@b..test>', subject: 's', body: 'b' }, 'from', 'invalid_string'],
    [{ to: 'a@b.test', from: `Acme <${'x'.repeat(600)}@b.test>`, subject: 's', body: 'b' }, 'from', 'too_big'],
    [{ to: 'a@b.test', subject: 's', body: 'b', headers: { 'X-A': 1 } }, 'headers.X-A', 'invalid_type'],
    [{ to: 'a@b.test', subject: '', body: 'b' }, 'subject', 'too_small'],
    [{ to: Array.from({ length: 101 }, (_, i) => `a${i}@b.test`), subject: 's', body: 'b' }, 'to', 'too_big'],
    [
      {
        to: 'a@b.test',
        subject: 's',
        body: 'b',
        attachments: Array.from({ length: 11 }, () => ({ filename: 'a', content: 'YQ==' })),
      },
      'attachments',
      'too_big',
    ],
    [
      { to: 'a@b.test', subject: 's', body: 'b', attachments: [{ filename: 'a' }] },
      'attachments.0.content',
      'invalid_type',
    ],
  ])('422 VALIDATION_ERROR for schema violations: %j names %s', async (body, field, code) => {
    const res = await send(body);
    expectError(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual(expect.arrayContaining([expect.objectContaining({ field, code })]));
  });

  test.each([
    [{ to: 'a@b.test', body: 'b', from: 'x@FROM' }, 'subject'],
    [{ to: 'a@b.test', subject: 's', from: 'x@FROM' }, 'body'],
    [{ to: 'a@b.test', subject: 's', body: 'b' }, 'from'],
    [{ to: 'a@b.test', subject: 's', body: 'b', from: 'x@unverified.example.org' }, 'from'],
    [{ to: 'a@b.test', subject: 'Hi {{#if}}', body: 'b', from: 'x@FROM' }, 'subject'],
    [{ to: 'a@b.test', subject: 's', body: '{{name', from: 'x@FROM' }, 'body'],
    [{ to: 'a@b.test', subject: 's', body: 'b', from: 'x@FROM', headers: { From: 'evil@x.test' } }, 'headers.From'],
    [
      { to: 'a@b.test', subject: 's', body: 'b', from: 'x@FROM', headers: { 'X-Evil': 'a\r\nBcc: v@x.test' } },
      'headers.X-Evil',
    ],
    [{ to: 'a@b.test', subject: 's', body: 'b', from: 'x@FROM', headers: { 'Bad Name': 'v' } }, 'headers.Bad Name'],
    [
      {
        to: 'a@b.test',
        subject: 's',
        body: 'b',
        from: 'x@FROM',
        attachments: [{ filename: 'a', content: 'not base64!' }],
      },
      'attachments.0.content',
    ],
  ])('422 for business rules: %j names %s', async (body, field) => {
    const before = await emailCount(ctx.p.id);
    const res = await send(JSON.parse(JSON.stringify(body).replace(/FROM/g, ctx.p.domain)));
    expectError(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    expect(await emailCount(ctx.p.id)).toBe(before);
  });

  test('an unverified sender is refused with nothing written, also with attachments; a verified one in capitals passes', async () => {
    const before = await emailCount(ctx.p.id);
    const to = recipient();
    const res = await send({
      to,
      from: 'x@sub.unverified.example.org',
      subject: 's',
      body: 'b',
      attachments: [{ filename: 'a.txt', content: 'YQ==' }],
    });
    expectError(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual([
      {
        field: 'from',
        message: 'the domain sub.unverified.example.org is not a verified sending domain of this project',
        code: 'custom',
      },
    ]);
    expect(await emailCount(ctx.p.id)).toBe(before);
    expect(
      await ctx.api.database.db
        .select()
        .from(contacts)
        .where(and(eq(contacts.projectId, ctx.p.id), eq(contacts.emailKey, to))),
    ).toHaveLength(0);
    const files = await ctx.api.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from attachments where project_id = ${ctx.p.id}::uuid and filename = 'a.txt'`,
    );
    expect(files.rows[0].n).toBe(0);
    // A suffix that is not a parent domain is no cover.
    expect((await send({ to, from: `x@not${ctx.p.domain}`, subject: 's', body: 'b' })).status).toBe(422);
    expect((await send({ to, from: `x@Mail.${ctx.p.domain.toUpperCase()}`, subject: 's', body: 'b' })).status).toBe(
      202,
    );
  });

  test('422 for attachments over 10 MB in total, and nothing is written', async () => {
    const before = await emailCount(ctx.p.id);
    const six = Buffer.alloc(6 * 1024 * 1024, 1).toString('base64');
    const to = recipient();
    const res = await send({
      to,
      from: `x@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      attachments: [
        { filename: 'a', content: six },
        { filename: 'b', content: six },
      ],
    });
    expectError(res, 422, 'VALIDATION_ERROR');
    expect(res.body.error.errors[0]).toMatchObject({ field: 'attachments', code: 'too_big' });
    expect(await emailCount(ctx.p.id)).toBe(before);
    expect(
      await ctx.api.database.db
        .select()
        .from(contacts)
        .where(and(eq(contacts.projectId, ctx.p.id), eq(contacts.emailKey, to))),
    ).toHaveLength(0);
  });

  test('404 for an unknown template', async () => {
    expectError(await send({ to: 'a@b.test', template: '0190aaaa-0000-7000-8000-000000000000' }), 404, 'NOT_FOUND');
    expectError(await send({ to: 'a@b.test', template: 'welcome' }), 404, 'NOT_FOUND');
  });
});

describe('security', () => {
  test('401 without a key, with a malformed key, with an unknown key', async () => {
    for (const auth of [undefined, 'Basic abc', 'Bearer nonsense', `Bearer sk_${'A'.repeat(43)}`]) {
      const req = request(ctx.api.app).post('/v1/send');
      const res = await (auth ? req.set('Authorization', auth) : req).send({ to: 'a@b.test', subject: 's', body: 'b' });
      expect(res.status).toBe(401);
      expect(res.body.error.code).toBe('UNAUTHORIZED');
    }
  });

  test('403 PUBLIC_KEY_NOT_ALLOWED for a public key', async () => {
    const res = await send(
      { to: 'a@b.test', subject: 's', body: 'b', from: `x@${ctx.p.domain}` },
      `Bearer ${ctx.p.publicKey}`,
    );
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
  });

  test("another project's template is 404 and its domain is not a verified sender", async () => {
    const other = await createTestProject(ctx.api.database);
    const t = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', other.auth)
      .send({ name: 'o', subject: 's', body: 'b' });
    expect((await send({ to: 'a@b.test', template: t.body.data.id, from: `x@${ctx.p.domain}` })).status).toBe(404);
    const res = await send({ to: 'a@b.test', subject: 's', body: 'b', from: `x@${other.domain}` });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('from');
  });

  test('403 PROJECT_DISABLED for a disabled project', async () => {
    const q = await createTestProject(ctx.api.database);
    await setProjectDisabled(ctx.api.database.db, q.id, true);
    ctx.api.authCache.clear();
    const res = await send({ to: 'a@b.test', subject: 's', body: 'b', from: `x@${q.domain}` }, q.auth);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('PROJECT_DISABLED');
  });

  test('request ids: echoed when well-formed, generated otherwise', async () => {
    const res = await request(ctx.api.app).post('/v1/send').set('X-Request-Id', 'client-req-123456').send({});
    expect(res.headers['x-request-id']).toBe('client-req-123456');
    expect(res.body.error.requestId).toBe('client-req-123456');
    const bad = await request(ctx.api.app).post('/v1/send').set('X-Request-Id', 'bad id\twith spaces').send({});
    expect(bad.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });
});
