/**
 * Scheduled sending through the API: `scheduledAt` on POST /v1/send (stored `scheduled`, a job delayed to its time;
 * at most 30 days ahead; a time not in the future sends at once), POST /emails/{id}/cancel and PATCH /emails/{id}
 * (409 once sending or final; 404 for another project's email), and inline attachments' `contentId` and
 * `disposition` (422 naming the field). Delivery through the worker: test/e2e/schedule.test.ts.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { createTestProject, client, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const api = () => client(ctx.api.app, ctx.p);
const inSeconds = (s: number) => new Date(Date.now() + s * 1000).toISOString();

async function schedule(at: string, to = recipient('sch')) {
  const res = await api().post('/v1/send', {
    to,
    from: `s@${ctx.p.domain}`,
    subject: 'later',
    body: '<p>later</p>',
    scheduledAt: at,
  });
  expect(res.status).toBe(202);
  return res.body.data.emails[0] as { email: string; status: string; scheduledAt?: string };
}

const status = async (id: string) =>
  (await ctx.api.database.db.execute<{ status: string }>(sql`select status from emails where id = ${id}::uuid`)).rows[0]
    ?.status;

describe('happy', () => {
  test('a future scheduledAt: the email is scheduled, shown with its time, and its job waits delayed until then', async () => {
    const at = inSeconds(3600);
    const email = await schedule(at);
    expect(email).toMatchObject({ status: 'scheduled', scheduledAt: at });
    const got = await api().get(`/emails/${email.email}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({ status: 'scheduled', scheduledAt: at, sentAt: null });
    expect(got.body.data.timeline).toEqual([{ type: 'scheduled', at: expect.any(String), data: { scheduledAt: at } }]);
    const job = await ctx.api.queues.send.getJob(email.email);
    expect(await job!.getState()).toBe('delayed');
    expect(Math.abs(job!.timestamp + job!.delay - Date.parse(at))).toBeLessThan(5_000);
  });

  test('a time in the past, or now, sends at once (queued, no scheduledAt)', async () => {
    for (const at of [new Date(Date.now() - 60_000).toISOString(), new Date().toISOString()]) {
      const email = await schedule(at);
      expect(email.status).toBe('queued');
      expect(email.scheduledAt).toBeUndefined();
      expect((await api().get(`/emails/${email.email}`)).body.data.scheduledAt).toBeNull();
    }
  });

  test('concurrent scheduled sends (written in one batch) are each scheduled at their own time', async () => {
    const times = Array.from({ length: 8 }, (_, i) => inSeconds(600 + i * 60));
    const sent = await Promise.all(times.map((at) => schedule(at)));
    sent.forEach((e, i) => expect(e).toMatchObject({ status: 'scheduled', scheduledAt: times[i] }));
    for (const [i, e] of sent.entries())
      expect((await api().get(`/emails/${e.email}`)).body.data.scheduledAt).toBe(times[i]);
  });

  test('cancel: the scheduled email becomes cancelled with a timeline entry, and its job is gone', async () => {
    const email = await schedule(inSeconds(3600));
    const res = await api().post(`/emails/${email.email}/cancel`, {});
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: email.email, status: 'cancelled', error: 'cancelled by request' });
    expect(res.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['scheduled', 'cancelled']);
    expect(await ctx.api.queues.send.getJob(email.email)).toBeUndefined();
  });

  test('cancel: a queued email no worker has tried yet can be cancelled too', async () => {
    await ctx.api.queues.send.pause();
    try {
      const res = await api().post('/v1/send', {
        to: recipient('q'),
        from: `s@${ctx.p.domain}`,
        subject: 's',
        body: 'b',
      });
      const id = res.body.data.emails[0].email;
      const cancelled = await api().post(`/emails/${id}/cancel`, {});
      expect(cancelled.status).toBe(200);
      expect(cancelled.body.data.status).toBe('cancelled');
    } finally {
      await ctx.api.queues.send.resume();
    }
  });

  test('deleting the contact cancels its scheduled email', async () => {
    const res = await api().post('/v1/send', {
      to: recipient('erase'),
      from: `s@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      scheduledAt: inSeconds(3600),
    });
    const { email, contact } = res.body.data.emails[0];
    expect((await api().del(`/contacts/${contact.id}`)).status).toBe(200);
    expect(await status(email)).toBe('cancelled');
  });

  test('reschedule: the time moves (a rescheduled entry with both times), and so does the delayed job', async () => {
    const first = inSeconds(3600);
    const email = await schedule(first);
    const next = inSeconds(7200);
    const res = await api().patch(`/emails/${email.email}`, { scheduledAt: next });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ status: 'scheduled', scheduledAt: next });
    expect(res.body.data.timeline.at(-1)).toMatchObject({
      type: 'rescheduled',
      data: { scheduledAt: next, previous: first },
    });
    const job = await ctx.api.queues.send.getJob(email.email);
    expect(await job!.getState()).toBe('delayed');
    expect(job!.delay).toBeGreaterThan(3_600_000);
  });
});

describe('errors', () => {
  test.each([
    [inSeconds(31 * 86_400), 'too_big'],
    ['tomorrow', 'invalid_string'],
    ['2030-01-01', 'invalid_string'],
  ])('422 VALIDATION_ERROR naming scheduledAt for %s, and nothing is written', async (at, code) => {
    const to = recipient('bad');
    const res = await api().post('/v1/send', {
      to,
      from: `s@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      scheduledAt: at,
    });
    expect(res.status).toBe(422);
    expect(res.body.error.code).toBe('VALIDATION_ERROR');
    expect(res.body.error.errors).toEqual(
      expect.arrayContaining([expect.objectContaining({ field: 'scheduledAt', code })]),
    );
    const written = await ctx.api.database.db.execute(
      sql`select 1 from emails where project_id = ${ctx.p.id}::uuid and to_email = ${to}`,
    );
    expect(written.rows).toHaveLength(0);
  });

  test('30 days ahead exactly less a minute is accepted; PATCH beyond 30 days or without a date is 422', async () => {
    const email = await schedule(inSeconds(30 * 86_400 - 60));
    expect(email.status).toBe('scheduled');
    const far = await api().patch(`/emails/${email.email}`, { scheduledAt: inSeconds(31 * 86_400) });
    expect(far.status).toBe(422);
    expect(far.body.error.errors[0]).toMatchObject({ field: 'scheduledAt', code: 'too_big' });
    for (const body of [{}, { scheduledAt: 'soon' }, { scheduledAt: inSeconds(60), extra: 1 }]) {
      const res = await api().patch(`/emails/${email.email}`, body);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
    }
    expect(await status(email.email)).toBe('scheduled');
  });

  test('409 INVALID_STATE: cancel or reschedule once cancelled, sending or sent; reschedule of a queued email', async () => {
    const cancelled = await schedule(inSeconds(3600));
    expect((await api().post(`/emails/${cancelled.email}/cancel`, {})).status).toBe(200);
    for (const res of [
      await api().post(`/emails/${cancelled.email}/cancel`, {}),
      await api().patch(`/emails/${cancelled.email}`, { scheduledAt: inSeconds(60) }),
    ]) {
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('INVALID_STATE');
      expect(res.body.error.message).toContain('cancelled');
    }
    for (const state of ['sending', 'sent'] as const) {
      const e = await schedule(inSeconds(3600));
      await ctx.api.database.db.execute(sql`update emails set status = ${state} where id = ${e.email}::uuid`);
      const cancel = await api().post(`/emails/${e.email}/cancel`, {});
      expect(cancel.status).toBe(409);
      expect(cancel.body.error.message).toContain(state);
      expect((await api().patch(`/emails/${e.email}`, { scheduledAt: inSeconds(60) })).status).toBe(409);
      expect(await status(e.email)).toBe(state);
    }
    // A queued email that a worker already tried (sent back by a throttle) may be at SES: not cancelled.
    const tried = await schedule(inSeconds(3600));
    await ctx.api.database.db.execute(
      sql`update emails set status = 'queued', attempts = 1 where id = ${tried.email}::uuid`,
    );
    expect((await api().post(`/emails/${tried.email}/cancel`, {})).status).toBe(409);
    expect((await api().patch(`/emails/${tried.email}`, { scheduledAt: inSeconds(60) })).status).toBe(409);
  });

  test('400 for a malformed id, 404 for an unknown one', async () => {
    expect((await api().post('/emails/123/cancel', {})).status).toBe(400);
    expect(
      (await api().patch('/emails/0190aaaa-0000-7000-8000-000000000000', { scheduledAt: inSeconds(60) })).status,
    ).toBe(404);
    expect((await api().post('/emails/0190aaaa-0000-7000-8000-000000000000/cancel', {})).status).toBe(404);
  });

  test.each([
    [{ filename: 'a.png', content: 'YQ==', contentId: '<logo>' }, 'attachments.0.contentId'],
    [{ filename: 'a.png', content: 'YQ==', contentId: 'my logo' }, 'attachments.0.contentId'],
    [{ filename: 'a.png', content: 'YQ==', contentId: '' }, 'attachments.0.contentId'],
    [{ filename: 'a.png', content: 'YQ==', contentId: 'x'.repeat(256) }, 'attachments.0.contentId'],
    [{ filename: 'a.png', content: 'YQ==', disposition: 'hidden' }, 'attachments.0.disposition'],
  ])('422 for an inline attachment %j naming %s', async (attachment, field) => {
    const res = await api().post('/v1/send', {
      to: recipient(),
      from: `s@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      attachments: [attachment],
    });
    expect(res.status).toBe(422);
    expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  test('422 for a contentId used twice in one email (case-insensitive), naming the second', async () => {
    const res = await api().post('/v1/send', {
      to: recipient(),
      from: `s@${ctx.p.domain}`,
      subject: 's',
      body: '<img src="cid:logo@x">',
      attachments: [
        { filename: 'a.png', content: 'YQ==', contentId: 'logo@x' },
        { filename: 'b.png', content: 'YQ==', contentId: 'LOGO@x' },
      ],
    });
    expect(res.status).toBe(422);
    expect(res.body.error.errors).toEqual([expect.objectContaining({ field: 'attachments.1.contentId' })]);
  });

  test('inline attachments count in the 10-attachment limit', async () => {
    const attachments = Array.from({ length: 11 }, (_, i) => ({
      filename: `${i}.png`,
      content: 'YQ==',
      contentId: `i${i}`,
    }));
    const res = await api().post('/v1/send', {
      to: recipient(),
      from: `s@${ctx.p.domain}`,
      subject: 's',
      body: 'b',
      attachments,
    });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'attachments', code: 'too_big' });
  });
});

describe('security', () => {
  test("another project's email: cancel and reschedule answer 404 and change nothing", async () => {
    const other = await createTestProject(ctx.api.database);
    const res = await client(ctx.api.app, other).post('/v1/send', {
      to: recipient(),
      from: `o@${other.domain}`,
      subject: 's',
      body: 'b',
      scheduledAt: inSeconds(3600),
    });
    const id = res.body.data.emails[0].email;
    expect((await api().post(`/emails/${id}/cancel`, {})).status).toBe(404);
    expect((await api().patch(`/emails/${id}`, { scheduledAt: inSeconds(60) })).status).toBe(404);
    const got = await client(ctx.api.app, other).get(`/emails/${id}`);
    expect(got.body.data).toMatchObject({ status: 'scheduled', scheduledAt: res.body.data.emails[0].scheduledAt });
    expect(got.body.data.timeline).toHaveLength(1);
  });

  test('a public key gets 403, no key 401', async () => {
    const email = await schedule(inSeconds(3600));
    const pub = `Bearer ${ctx.p.publicKey}`;
    expect((await request(ctx.api.app).post(`/emails/${email.email}/cancel`).set('Authorization', pub)).status).toBe(
      403,
    );
    expect(
      (
        await request(ctx.api.app)
          .patch(`/emails/${email.email}`)
          .set('Authorization', pub)
          .send({ scheduledAt: inSeconds(60) })
      ).status,
    ).toBe(403);
    expect((await request(ctx.api.app).post(`/emails/${email.email}/cancel`)).status).toBe(401);
    expect(await status(email.email)).toBe('scheduled');
  });
});
