/**
 * POST /v1/send/batch: each message checked as /v1/send checks it and answered by index; refused messages store
 * nothing, accepted ones are stored and queued; one Idempotency-Key covers the batch; each message counts against
 * the rate limit; tenant isolation. No worker runs here (the e2e `tags-batch` test sends).
 */
import request from 'supertest';
import { eq, inArray, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { ADMIN_TOKEN, createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();

const batch = (body: unknown, auth = ctx.p.auth, key?: string) => {
  const r = request(ctx.api.app).post('/v1/send/batch').set('Authorization', auth);
  if (key) r.set('Idempotency-Key', key);
  return r.send(body as object);
};
const message = (to: string, over: Record<string, unknown> = {}) => ({
  to,
  from: `x@${ctx.p.domain}`,
  subject: 'S',
  body: '<p>B</p>',
  ...over,
});
const rowsTo = async (addresses: string[]) =>
  ctx.api.database.db.select().from(emails).where(inArray(emails.toEmail, addresses));

describe('happy path', () => {
  test('every message is stored with its own content and tags, queued, and answered by index as /v1/send answers', async () => {
    const to = [recipient('b0'), recipient('b1'), recipient('b2')];
    const res = await batch([
      message(to[0], { subject: 'first', tags: [{ name: 'category', value: 'receipt' }] }),
      message(to[1], {
        subject: 'second',
        tags: [
          { name: 'category', value: 'receipt' },
          { name: 'order', value: 'A-17' },
        ],
      }),
      message(to[2], { subject: 'third' }),
    ]);
    expect(res.status).toBe(200);
    expect(res.body.data.errors).toEqual([]);
    expect(res.body.data.data.map((d: { index: number }) => d.index)).toEqual([0, 1, 2]);
    for (const d of res.body.data.data) {
      expect(d).toEqual({
        index: expect.any(Number),
        emails: [{ contact: expect.any(Object), email: expect.any(String), status: 'queued' }],
        suppressed: [],
        timestamp: expect.any(String),
      });
    }
    const rows = await rowsTo(to);
    const byTo = new Map(rows.map((r) => [r.toEmail, r]));
    expect(byTo.get(to[0])).toMatchObject({
      subject: 'first',
      tags: [{ name: 'category', value: 'receipt' }],
      projectId: ctx.p.id,
      source: 'transactional',
    });
    expect(byTo.get(to[1])).toMatchObject({
      subject: 'second',
      tags: [
        { name: 'category', value: 'receipt' },
        { name: 'order', value: 'A-17' },
      ],
    });
    expect(byTo.get(to[2])).toMatchObject({ subject: 'third', tags: null });
    const jobs = await Promise.all(rows.map((r) => ctx.api.redis.exists(`${ctx.api.config.queuePrefix}:send:${r.id}`)));
    expect(jobs).toEqual([1, 1, 1]);
  });

  test('two messages to one address are both stored, in order (they cannot share one statement)', async () => {
    const to = recipient('same');
    const res = await batch([
      message(to, { subject: 'one', data: { n: 1 } }),
      message(to, { subject: 'two', data: { n: 2 } }),
      message(recipient(), { subject: 'other' }),
    ]);
    expect(res.status).toBe(200);
    expect(res.body.data.data).toHaveLength(3);
    const rows = (await rowsTo([to])).sort((a, b) => (a.id < b.id ? -1 : 1));
    expect(rows.map((r) => r.subject)).toEqual(['one', 'two']);
    // The contact's data is the second message's: the writes happened one after the other.
    const contact = await ctx.api.database.db.execute<{ data: { n: number } }>(
      sql`select data from contacts where id = ${rows[0].contactId}::uuid`,
    );
    expect(contact.rows[0].data.n).toBe(2);
  });

  test('a test key makes every message a test email', async () => {
    const keys = await request(ctx.api.app)
      .post(`/admin/projects/${ctx.p.id}/rotate-keys?mode=test`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send();
    expect(keys.status).toBe(200);
    const to = recipient('t');
    const res = await batch([message(to)], `Bearer ${keys.body.data.secretKey}`);
    expect(res.status).toBe(200);
    expect((await rowsTo([to]))[0].test).toBe(true);
  });
});

describe('errors', () => {
  test('a mixed batch: refused messages are answered by index and field and store nothing; the others are sent', async () => {
    const to = [
      recipient('ok0'),
      recipient('bad1'),
      recipient('bad2'),
      recipient('ok3'),
      recipient('bad4'),
      recipient('bad5'),
    ];
    const res = await batch([
      message(to[0]),
      message(to[1], {
        tags: [
          { name: 'a', value: 'b' },
          { name: 'a', value: 'c' },
          { name: 'x', value: 'y' },
          { name: 'has space', value: 'v' },
        ],
      }),
      message(to[2], { tags: [{ name: 'email_id', value: 'mine' }] }),
      message(to[3], { tags: [{ name: 'ok', value: 'yes' }] }),
      { to: to[4], subject: 'S' },
      message(to[5], { from: 'x@unverified.example.org' }),
    ]);
    expect(res.status).toBe(200);
    expect(res.body.data.data.map((d: { index: number }) => d.index)).toEqual([0, 3]);
    const errors = res.body.data.errors as {
      index: number;
      code: string;
      statusCode: number;
      errors: { field: string }[];
    }[];
    expect(errors.map((e) => e.index)).toEqual([1, 2, 4, 5]);
    expect(errors.every((e) => e.code === 'VALIDATION_ERROR' && e.statusCode === 422)).toBe(true);
    expect(errors[0].errors.map((e) => e.field).sort()).toEqual(['tags.3.name']);
    expect(errors[2].errors.map((e) => e.field).sort()).toEqual(expect.arrayContaining(['from']));
    expect(errors[3].errors.map((e) => e.field)).toEqual(['from']);
    // A valid name given twice is refused on the second.
    const dup = await batch([
      message(recipient()),
      message(recipient(), {
        tags: [
          { name: 'a', value: 'b' },
          { name: 'a', value: 'c' },
        ],
      }),
    ]);
    expect(dup.body.data.errors[0].errors).toEqual([
      expect.objectContaining({ field: 'tags.1.name', message: expect.stringContaining('more than once') }),
    ]);
    expect(errors[1].errors).toEqual([
      expect.objectContaining({ field: 'tags.0.name', message: expect.stringContaining('set by the platform') }),
    ]);
    expect((await rowsTo(to)).map((r) => r.toEmail).sort()).toEqual([to[0], to[3]].sort());
  });

  test('a batch none of whose messages is accepted is 422 as a whole, each field named <index>.<field>; nothing stored', async () => {
    const other = await createTestProject(ctx.api.database);
    const to = [recipient('r0'), recipient('r1'), recipient('r2')];
    const res = await batch([
      message(to[0], {
        tags: [
          { name: 'ok', value: 'v' },
          { name: 'bad!', value: 'v' },
        ],
      }),
      { to: to[1], template: '01936f7e-0000-7000-8000-000000000000' },
      message(to[2], { from: `x@${other.domain}` }),
    ]);
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toEqual([
      '0.tags.1.name',
      '1.template',
      '2.from',
    ]);
    expect(await rowsTo(to)).toHaveLength(0);
  });

  test('more than 100 messages, none, or a body that is not a list: 422, nothing stored', async () => {
    const to = Array.from({ length: 101 }, () => recipient('many'));
    const many = await batch(to.map((t) => message(t)));
    expect(many.status).toBe(422);
    expect(many.body.error.code).toBe('VALIDATION_ERROR');
    expect(await rowsTo(to)).toHaveLength(0);
    expect((await batch([])).status).toBe(422);
    const single = await batch(message(recipient()));
    expect(single.status).toBe(422);
  });

  test('exactly 100 messages are accepted', async () => {
    const to = Array.from({ length: 100 }, () => recipient('hundred'));
    const res = await batch(to.map((t) => message(t)));
    expect(res.status).toBe(200);
    expect(res.body.data.data).toHaveLength(100);
    expect(await rowsTo(to)).toHaveLength(100);
  });

  test('without a key: 401', async () => {
    expect(
      (
        await request(ctx.api.app)
          .post('/v1/send/batch')
          .send([message(recipient())])
      ).status,
    ).toBe(401);
  });
});

describe('idempotency', () => {
  test('one Idempotency-Key covers the batch: a replay answers the same and stores nothing again; another body is 422', async () => {
    const to = [recipient('i0'), recipient('i1')];
    const key = `batch-${Math.random()}`;
    const body = [
      message(to[0], { tags: [{ name: 'k', value: 'v' }] }),
      message(to[1], { tags: [{ name: 'k', value: 'bad value' }] }),
    ];
    const first = await batch(body, ctx.p.auth, key);
    expect(first.status).toBe(200);
    expect(first.body.data.data).toHaveLength(1);
    const again = await batch(body, ctx.p.auth, key);
    expect(again.status).toBe(200);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body.data).toEqual(first.body.data);
    expect(await rowsTo(to)).toHaveLength(1);
    const other = await batch([message(recipient())], ctx.p.auth, key);
    expect(other.status).toBe(422);
    expect(other.body.error.code).toBe('IDEMPOTENCY_CONFLICT');
  });
});

describe('security', () => {
  test("tenant isolation: another project's template is not found for that message; emails belong to the caller's project", async () => {
    const other = await createTestProject(ctx.api.database);
    const tpl = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', other.auth)
      .send({ name: 't', subject: 's', body: 'b', from: `x@${other.domain}` });
    expect(tpl.status).toBe(201);
    const to = [recipient('iso0'), recipient('iso1'), recipient('iso2')];
    const res = await batch([
      message(to[0]),
      { to: to[1], template: tpl.body.data.id },
      message(to[2], { from: `x@${other.domain}` }),
    ]);
    expect(res.status).toBe(200);
    expect(res.body.data.errors.map((e: { index: number; code: string }) => [e.index, e.code])).toEqual([
      [1, 'NOT_FOUND'],
      [2, 'VALIDATION_ERROR'],
    ]);
    const rows = await rowsTo(to);
    expect(rows.map((r) => [r.toEmail, r.projectId])).toEqual([[to[0], ctx.p.id]]);
    // The other project cannot read it.
    expect((await request(ctx.api.app).get(`/emails/${rows[0].id}`).set('Authorization', other.auth)).status).toBe(404);
  });
});

describe('rate limit', () => {
  const limited = useApiWithProject({ RATE_LIMIT_PER_MINUTE: '5' });

  test('each message counts as one request: a batch over what is left is 429 and stores nothing', async () => {
    const send = (n: number) =>
      request(limited.api.app)
        .post('/v1/send/batch')
        .set('Authorization', limited.p.auth)
        .send(
          Array.from({ length: n }, () => ({
            to: recipient('rl'),
            from: `x@${limited.p.domain}`,
            subject: 's',
            body: 'b',
          })),
        );
    const first = await send(3);
    expect(first.status).toBe(200);
    const before = await limited.api.database.db
      .select({ id: emails.id })
      .from(emails)
      .where(eq(emails.projectId, limited.p.id));
    const second = await send(3);
    expect(second.status).toBe(429);
    expect(second.headers['retry-after']).toBeDefined();
    const after = await limited.api.database.db
      .select({ id: emails.id })
      .from(emails)
      .where(eq(emails.projectId, limited.p.id));
    expect(after).toHaveLength(before.length);
  });
});
