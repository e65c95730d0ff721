/**
 * `POST /campaigns/{id}/retry-failed` end to end (API → Postgres → campaign job → send jobs → SES emulator behind
 * the recording proxy): a campaign where SES answers 500 (transient) for some recipients and 400 MessageRejected
 * (permanent) for others, with one attempt per email, ends SENT with both kinds failed. After one transiently
 * failed recipient is suppressed, another unsubscribed and a third deleted, retry-failed sends exactly once to
 * the remaining transient failures (through the campaign's bounded window, past their first try's finished send
 * jobs), never to the others, and the campaign is SENT again; a second retry is 409. Webhooks announce it.
 *
 * A database of its own: the worker's reconciler adopts every SENDING campaign of its database.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import { createSendQueue } from '@mailroom/queues/create';
import { sendBatchJobId } from '@mailroom/queues/catalog';
import { emails } from '@mailroom/db/schema/emails';
import {
  client,
  createTestProject,
  recipient,
  sesFault,
  sesRecordedTo,
  sesSendsTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, type Receiver } from '../support/receiver';

const e2e = useE2e({
  isolated: true,
  env: {
    // One attempt: a 500 fails the email at once, as `transient`.
    SEND_MAX_ATTEMPTS: '1',
    SES_MAX_SEND_RATE: '50',
    CAMPAIGN_TICK_MS: '100',
    CAMPAIGN_BATCH_SIZE: '5',
    // A window smaller than the retried set: the retry is fed over several rounds.
    CAMPAIGN_QUEUE_WINDOW: '2',
    // The reconciler must not be what re-enqueues the retried emails: the campaign job's feed has to.
    RECONCILE_INTERVAL_MS: '600000',
    RECONCILE_AFTER_MS: '600000',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  },
});
let receiver: Receiver;
const startedAt = Math.floor(Date.now() / 1000) - 1;
beforeAll(async () => {
  receiver = await startReceiver();
  e2e.onTeardown(() => receiver.close());
});

/** Inserts subscribed contacts; returns `{ id, email }` in input order. */
async function seed(p: TestProject, tag: string, n: number): Promise<{ id: string; email: string }[]> {
  const to = Array.from({ length: n }, () => recipient(tag));
  const rows = await e2e.api.database.db.execute<{ id: string; email: string }>(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e
    returning id, email`);
  const byEmail = new Map(rows.rows.map((r) => [r.email, r.id]));
  return to.map((email) => ({ id: byEmail.get(email)!, email }));
}

const rowsOf = (campaignId: string) =>
  e2e.api.database.db.select().from(emails).where(eq(emails.campaignId, campaignId));

async function waitCampaign(p: TestProject, id: string, status: string) {
  return waitFor(
    async () => {
      const c = (await client(e2e.api.app, p).get(`/campaigns/${id}`)).body.data;
      return c.status === status ? c : undefined;
    },
    45_000,
    `campaign ${status}`,
  );
}

/** Messages in the emulator's store per recipient address (what SES accepted, counted by SES itself). */
async function storedPerRecipient(addresses: string[]): Promise<Map<string, number>> {
  const store = (await (await fetch(`${process.env.TEST_SES_EMULATOR}/store?since=${startedAt}`)).json()) as {
    emails: { destination: { to: string[] } }[];
  };
  const counts = new Map(addresses.map((a) => [a, 0]));
  for (const m of store.emails) {
    for (const a of addresses)
      if (m.destination.to.some((t) => t.toLowerCase().includes(a))) counts.set(a, counts.get(a)! + 1);
  }
  return counts;
}

test('retry-failed re-sends once to the transient failures only (never permanent, suppressed, unsubscribed or deleted), and the campaign ends SENT again', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const hook = await request(e2e.api.app)
    .post('/webhooks/endpoints')
    .set('Authorization', p.auth)
    .send({ url: receiver.url, eventTypes: ['campaign.*', 'email.sent', 'email.failed'] });
  expect(hook.status).toBe(201);

  const ok = await seed(p, 'ok', 4);
  const transient = await seed(p, 'tr', 7);
  const permanent = await seed(p, 'pe', 3);
  // Each fault answers once: a second send to the same address would reach the emulator and be accepted.
  for (const c of transient)
    await sesFault({ match: c.email, status: 500, type: 'InternalFailure', message: 'internal', times: 1 });
  for (const c of permanent)
    await sesFault({
      match: c.email,
      status: 400,
      type: 'MessageRejected',
      message: 'Email address is not verified.',
      times: 1,
    });

  const created = await as.post('/campaigns', {
    name: 'retry',
    subject: 'Hello',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  expect((await as.post(`/campaigns/${id}/send`, {})).status).toBe(200);
  await waitCampaign(p, id, 'SENT');

  const first = new Map((await rowsOf(id)).map((r) => [r.toEmail, r]));
  expect(first.size).toBe(14);
  for (const c of ok) expect(first.get(c.email)).toMatchObject({ status: 'sent', failureKind: null });
  for (const c of transient)
    expect(first.get(c.email)).toMatchObject({
      status: 'failed',
      failureKind: 'transient',
      // A bulk entry's reason names its status first (TRANSIENT_FAILURE), then SES's error.
      error: expect.stringMatching(/gave up after 1 attempts: .*InternalFailure/),
    });
  for (const c of permanent)
    expect(first.get(c.email)).toMatchObject({
      status: 'failed',
      failureKind: 'permanent',
      error: expect.stringMatching(/MessageRejected/),
    });

  // The first try's send jobs are finished and still hold their ids in the queue: an email's own (its id), or one
  // carrying several emails, named after its first (`b-<id>`), which a retried email may be again.
  const sendQueue = createSendQueue(e2e.config, e2e.api.redis);
  try {
    const jobIds = [...first.values()].flatMap((r) => [r.id, sendBatchJobId([r.id])]);
    const states = await Promise.all(jobIds.map((j) => sendQueue.getJobState(j)));
    expect(new Set(states)).toEqual(new Set(['completed', 'unknown']));
  } finally {
    await sendQueue.close();
  }

  // Since then: one transient recipient suppressed, one unsubscribed, one deleted.
  const [suppressed, unsubscribed, deleted, ...eligible] = transient;
  expect((await as.post('/suppressions', { email: suppressed.email })).status).toBe(201);
  expect((await as.patch(`/contacts/${unsubscribed.id}`, { subscribed: false })).status).toBe(200);
  expect((await as.del(`/contacts/${deleted.id}`)).status).toBe(200);

  const retriedAt = Date.now();
  const retry = await as.post(`/campaigns/${id}/retry-failed`, {});
  expect(retry.status).toBe(202);
  expect(retry.body.data).toMatchObject({
    id,
    status: 'SENDING',
    retried: eligible.length,
    skipped: 3,
    completedAt: null,
  });
  // Once per campaign: refused while the retry runs...
  const during = await as.post(`/campaigns/${id}/retry-failed`, {});
  expect(during.status).toBe(409);
  expect(during.body.error).toMatchObject({ code: 'INVALID_STATE', message: expect.stringMatching(/already retried/) });

  const done = await waitCampaign(p, id, 'SENT');
  const retryMs = Date.now() - retriedAt;
  expect(done.completedAt).not.toBeNull();
  // ...and after it.
  expect((await as.post(`/campaigns/${id}/retry-failed`, {})).status).toBe(409);

  // Rows by email id: the deleted contact's email stays in the log, erased (its address scrubbed).
  const afterById = new Map((await rowsOf(id)).map((r) => [r.id, r]));
  const after = { get: (email: string) => afterById.get(first.get(email)!.id) };
  for (const c of eligible)
    expect(after.get(c.email)).toMatchObject({
      status: 'sent',
      failureKind: null,
      error: null,
      retriedAt: expect.any(Date),
    });
  for (const c of [suppressed, unsubscribed, deleted])
    expect(after.get(c.email)).toMatchObject({ status: 'failed', failureKind: 'transient', retriedAt: null });
  expect(after.get(deleted.email)).toMatchObject({ toEmail: 'erased@erased.invalid' });
  for (const c of permanent)
    expect(after.get(c.email)).toMatchObject({ status: 'failed', failureKind: 'permanent', retriedAt: null });
  for (const c of ok) expect(after.get(c.email)).toMatchObject({ status: 'sent', retriedAt: null });

  // What SES accepted, counted twice: by the recording proxy and by the emulator's own store.
  const all = [...ok, ...transient, ...permanent].map((c) => c.email);
  const accepted = new Map(all.map((a) => [a, 0]));
  for (const s of await sesSendsTo(all)) accepted.set(s.to[0].toLowerCase(), accepted.get(s.to[0].toLowerCase())! + 1);
  const stored = await storedPerRecipient(all);
  for (const c of [...ok, ...eligible]) {
    expect([c.email, accepted.get(c.email)]).toEqual([c.email, 1]);
    expect([c.email, stored.get(c.email)]).toEqual([c.email, 1]);
  }
  for (const c of [suppressed, unsubscribed, deleted, ...permanent]) {
    expect([c.email, accepted.get(c.email)]).toEqual([c.email, 0]);
    expect([c.email, stored.get(c.email)]).toEqual([c.email, 0]);
  }
  // Every SES call: one per recipient, two for the retried ones (the 500, then the accepted retry).
  const calls = new Map(all.map((a) => [a, 0]));
  for (const s of await sesRecordedTo(all)) calls.set(s.to[0].toLowerCase(), calls.get(s.to[0].toLowerCase())! + 1);
  for (const c of eligible) expect([c.email, calls.get(c.email)]).toEqual([c.email, 2]);
  for (const c of [...ok, suppressed, unsubscribed, deleted, ...permanent])
    expect([c.email, calls.get(c.email)]).toEqual([c.email, 1]);

  // The retried email's timeline tells the story; the campaign's timeline has the retry with its counts.
  const retriedEmail = after.get(eligible[0].email)!;
  const timeline = (await as.get(`/emails/${retriedEmail.id}`)).body.data.timeline as {
    type: string;
    data: Record<string, unknown> | null;
  }[];
  expect(timeline.map((e) => e.type)).toEqual(['queued', 'failed', 'retried', 'sent']);
  expect(timeline[2].data).toEqual({ previousError: expect.stringMatching(/InternalFailure/) });
  const campaignTimeline = (await as.get(`/campaigns/${id}/timeline`)).body.data.data as {
    type: string;
    data: Record<string, unknown>;
  }[];
  expect(campaignTimeline.filter((e) => e.type === 'retry_failed')).toEqual([
    expect.objectContaining({
      data: { retried: eligible.length, skipped: 3, previousCompletedAt: expect.any(String) },
    }),
  ]);

  const stats = (await as.get(`/campaigns/${id}/stats`)).body.data;
  expect(stats).toMatchObject({
    status: 'SENT',
    recipients: 14,
    sent: ok.length + eligible.length,
    failed: 6,
    queued: 0,
  });

  // Webhooks: campaign.sending (the retry) between two campaign.sent, email.sent for each retried email.
  const hooks = () =>
    receiver.received
      .map((r) => JSON.parse(r.body) as { type: string; timestamp: string; data: Record<string, unknown> })
      .sort((a, b) => a.timestamp.localeCompare(b.timestamp));
  await waitFor(
    async () => hooks().filter((h) => h.type === 'campaign.sent' && h.data.campaignId === id).length === 2 || undefined,
    20_000,
    'two campaign.sent',
  );
  const campaignHooks = hooks().filter((h) => h.type.startsWith('campaign.') && h.data.campaignId === id);
  expect(campaignHooks.map((h) => h.type)).toEqual([
    'campaign.sending',
    'campaign.sent',
    'campaign.sending',
    'campaign.sent',
  ]);
  expect(campaignHooks[2].data).toEqual({ campaignId: id, retryFailed: true, retried: eligible.length });
  const retriedIds = eligible.map((c) => after.get(c.email)!.id);
  await waitFor(
    async () => {
      const sent = hooks().filter((h) => h.type === 'email.sent' && retriedIds.includes(h.data.emailId as string));
      return sent.length === retriedIds.length || undefined;
    },
    20_000,
    'email.sent for every retried email',
  );
  const failedHooks = hooks().filter((h) => h.type === 'email.failed' && retriedIds.includes(h.data.emailId as string));
  // One email.failed each, from the first try; the retry announced email.sent.
  expect(failedHooks).toHaveLength(retriedIds.length);
  console.log(
    `retry-failed: 14 recipients, 7 transient + 3 permanent failures; retried ${eligible.length} (skipped 3: suppressed, unsubscribed, deleted), ` +
      `SENT again ${retryMs} ms after the call (window ${e2e.config.campaignQueueWindow}); SES accepted each retried recipient once, permanent failures 0`,
  );
}, 120_000);
