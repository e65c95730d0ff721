/**
 * Scheduled sending end to end: API → Postgres → a delayed job → worker → SES emulator (through the recording
 * proxy, which records each message's arrival time and raw MIME). A scheduled email arrives after its time and
 * within a few seconds of it; a cancelled one never arrives; a rescheduled one arrives at the new time, not the
 * old; one whose job was lost (the worker stopped, Redis flushed, a new worker started) is sent once, at its time,
 * from Postgres; a cancel at the due second either wins (nothing sent) or is refused (sent once), never both.
 * Also: an inline image goes out as multipart/related with its Content-ID and Content-Disposition inline.
 *
 * Runs on a database of its own: the worker's reconciler adopts every scheduled email of its database.
 */
import request from 'supertest';
import { rescheduleEmail } from '@mailroom/sending/queries/scheduled-emails';
import { deletePrefix, parseMail, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

/** How late after its time an email may arrive: generous, the machine is small and shared. */
const LATE_MS = 5_000;
/** How early an arrival may read against the time (two processes reading one clock). */
const CLOCK_MS = 20;

// The periodic pass every second: it alone gives a lost scheduled email its job back (no pass on Redis loss here).
const e2e = useE2e({
  isolated: true,
  env: { SES_MAX_SEND_RATE: '100', RECONCILE_INTERVAL_MS: '1000', RECONCILE_ON_REDIS_LOSS: 'false' },
  project: true,
});

const inMs = (ms: number) => new Date(Date.now() + ms);

async function send(to: string, body: Record<string, unknown> = {}) {
  const res = await request(e2e.api.app)
    .post('/v1/send')
    .set('Authorization', e2e.p.auth)
    .send({ to, from: `s@${e2e.p.domain}`, subject: 'at a time', body: '<p>hi</p>', ...body });
  expect(res.status).toBe(202);
  return res.body.data.emails[0].email as string;
}

const schedule = (to: string, at: Date) => send(to, { scheduledAt: at.toISOString() });
const getEmail = async (id: string) =>
  (await request(e2e.api.app).get(`/emails/${id}`).set('Authorization', e2e.p.auth)).body.data;

/** Waits until `to` has an accepted send, and answers its arrival time (ms). */
async function arrival(to: string, timeoutMs = 30_000): Promise<number> {
  const [first] = await waitFor(
    async () => {
      const sends = await sesSendsTo([to]);
      return sends.length > 0 ? sends : undefined;
    },
    timeoutMs,
    `an email to ${to} at SES`,
  );
  return first.at;
}

/** A later email sent now and arrived: the worker had its chance to send everything due before it. */
async function positiveSign(): Promise<void> {
  const marker = recipient('marker');
  await send(marker);
  await arrival(marker);
}

test('a scheduled email arrives after its time, within a few seconds of it, once', async () => {
  const to = recipient('at');
  const at = inMs(3_000);
  const id = await schedule(to, at);
  expect((await getEmail(id)).status).toBe('scheduled');
  const arrived = await arrival(to);
  console.log(`schedule: arrived ${arrived - at.getTime()} ms after its time`);
  expect(arrived).toBeGreaterThanOrEqual(at.getTime() - CLOCK_MS);
  expect(arrived).toBeLessThanOrEqual(at.getTime() + LATE_MS);
  const email = await waitFor(
    async () => ((await getEmail(id)).status === 'sent' ? getEmail(id) : undefined),
    10_000,
    'sent',
  );
  expect(email.scheduledAt).toBe(at.toISOString());
  expect(email.timeline.map((t: { type: string }) => t.type)).toEqual(['scheduled', 'sent']);
  await positiveSign();
  expect(await sesSendsTo([to])).toHaveLength(1);
});

test('a cancelled email never arrives', async () => {
  const cancelled = recipient('cancel');
  const kept = recipient('kept');
  const id = await schedule(cancelled, inMs(2_000));
  await schedule(kept, inMs(3_000));
  expect((await request(e2e.api.app).post(`/emails/${id}/cancel`).set('Authorization', e2e.p.auth)).status).toBe(200);
  await arrival(kept);
  await positiveSign();
  expect(await sesSendsTo([cancelled])).toHaveLength(0);
  expect((await getEmail(id)).status).toBe('cancelled');
});

test('a rescheduled email arrives at the new time, not the old (later and earlier)', async () => {
  const later = recipient('later');
  const earlier = recipient('earlier');
  const first = inMs(2_000);
  const laterId = await schedule(later, first);
  const earlierId = await schedule(earlier, inMs(600_000));
  const newLater = inMs(6_000);
  const newEarlier = inMs(3_000);
  expect(
    (
      await request(e2e.api.app)
        .patch(`/emails/${laterId}`)
        .set('Authorization', e2e.p.auth)
        .send({ scheduledAt: newLater.toISOString() })
    ).status,
  ).toBe(200);
  expect(
    (
      await request(e2e.api.app)
        .patch(`/emails/${earlierId}`)
        .set('Authorization', e2e.p.auth)
        .send({ scheduledAt: newEarlier.toISOString() })
    ).status,
  ).toBe(200);
  const earlierAt = await arrival(earlier);
  expect(earlierAt).toBeGreaterThanOrEqual(newEarlier.getTime() - CLOCK_MS);
  expect(earlierAt).toBeLessThanOrEqual(newEarlier.getTime() + LATE_MS);
  const laterAt = await arrival(later);
  console.log(
    `schedule: rescheduled emails arrived ${earlierAt - newEarlier.getTime()} ms and ${laterAt - newLater.getTime()} ms after their new times`,
  );
  expect(laterAt).toBeGreaterThanOrEqual(newLater.getTime() - CLOCK_MS);
  expect(laterAt).toBeLessThanOrEqual(newLater.getTime() + LATE_MS);
  await positiveSign();
  expect(await sesSendsTo([later, earlier])).toHaveLength(2);
});

test("a reschedule whose job move was missed: the old time's job finds the email not due and waits for the new time", async () => {
  const to = recipient('missed');
  const id = await schedule(to, inMs(1_500));
  const newAt = inMs(5_000);
  // The row moves, the delayed job stays at the old time (as when Redis refused the move).
  expect(await rescheduleEmail(e2e.api.database.db, e2e.p.id, id, newAt)).toEqual({ moved: true });
  const arrived = await arrival(to);
  expect(arrived).toBeGreaterThanOrEqual(newAt.getTime() - CLOCK_MS);
  expect(arrived).toBeLessThanOrEqual(newAt.getTime() + LATE_MS);
  await positiveSign();
  expect(await sesSendsTo([to])).toHaveLength(1);
  expect((await getEmail(id)).attempts).toBe(1);
});

test('the worker stopped and Redis flushed between acceptance and the time: sent once, at its time, from Postgres', async () => {
  const to = recipient('lost');
  const at = inMs(6_000);
  const id = await schedule(to, at);
  await e2e.stopWorker();
  await deletePrefix(e2e.api.redis, e2e.api.config.queuePrefix);
  expect(await e2e.api.queues.send.getJob(id)).toBeUndefined();
  await e2e.startWorker();
  const arrived = await arrival(to);
  console.log(`schedule: a lost job's email arrived ${arrived - at.getTime()} ms after its time`);
  expect(arrived).toBeGreaterThanOrEqual(at.getTime() - CLOCK_MS);
  expect(arrived).toBeLessThanOrEqual(at.getTime() + LATE_MS);
  await positiveSign();
  expect(await sesSendsTo([to])).toHaveLength(1);
  expect((await getEmail(id)).status).toBe('sent');
});

test('a cancel at the due second: each email is either cancelled and never sent, or sent once and the cancel refused', async () => {
  const at = inMs(4_000);
  const to = Array.from({ length: 12 }, () => recipient('race'));
  const ids = await Promise.all(to.map((t) => schedule(t, at)));
  // Cancels spread over the due second: from 300 ms before the time to 250 ms after it.
  const answers = await Promise.all(
    ids.map(async (id, i) => {
      const fireAt = at.getTime() - 300 + i * 50;
      await waitFor(async () => Date.now() >= fireAt || undefined, 30_000, 'the cancel time');
      return (await request(e2e.api.app).post(`/emails/${id}/cancel`).set('Authorization', e2e.p.auth)).status;
    }),
  );
  const final = await Promise.all(
    ids.map((id) =>
      waitFor(
        async () => {
          const e = await getEmail(id);
          return e.status === 'sent' || e.status === 'cancelled' ? e : undefined;
        },
        30_000,
        `email ${id} final`,
      ),
    ),
  );
  await positiveSign();
  let cancelled = 0;
  for (const [i, e] of final.entries()) {
    const sends = await sesSendsTo([to[i]]);
    if (answers[i] === 200) {
      cancelled++;
      expect(e.status).toBe('cancelled');
      expect(sends).toHaveLength(0);
    } else {
      expect(answers[i]).toBe(409);
      expect(e.status).toBe('sent');
      expect(sends).toHaveLength(1);
    }
  }
  console.log(`schedule: cancels at the due second: ${cancelled} won, ${ids.length - cancelled} refused (sent)`);
});

test('an inline image: multipart/related, Content-ID and Content-Disposition inline, beside a plain attachment', async () => {
  const to = recipient('inline');
  const png = Buffer.from(
    '89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d0e1d20000000049454e44ae426082',
    'hex',
  );
  await send(to, {
    body: '<p>Logo: <img src="cid:logo@acme" alt="logo"></p>',
    attachments: [
      { filename: 'logo.png', content: png.toString('base64'), contentId: 'logo@acme', disposition: 'inline' },
      { filename: 'terms.txt', content: Buffer.from('terms').toString('base64') },
    ],
  });
  await arrival(to);
  const [sent] = await sesSendsTo([to]);
  expect(sent.raw).toMatch(/Content-Type: multipart\/related; type="text\/html"/i);
  expect(sent.raw).toMatch(/Content-Id: <logo@acme>/i);
  const mail = await parseMail(sent);
  const logo = mail.attachments.find((a) => a.filename === 'logo.png')!;
  expect(logo).toMatchObject({
    contentId: '<logo@acme>',
    contentDisposition: 'inline',
    related: true,
    contentType: 'image/png',
  });
  expect(logo.content.equals(png)).toBe(true);
  const terms = mail.attachments.find((a) => a.filename === 'terms.txt')!;
  expect(terms.contentDisposition).toBe('attachment');
  expect(terms.related).toBeFalsy();
  // The HTML refers to it (mailparser's `html` inlines it as a data: URL, so the raw part is read).
  expect(sent.raw).toContain('cid:logo@acme');
  expect(mail.html).toContain(`data:image/png;base64,${png.toString('base64')}`);
});
