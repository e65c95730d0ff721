/**
 * Delivery feedback end to end (API → worker → SES emulator → signed SNS notification → suppression and webhooks
 * → a receiving endpoint): a bounce stops the next send and deleting the suppression lets it through; an address
 * suppressed after acceptance is caught at send time; campaigns skip suppressed contacts and count SES events;
 * an endpoint that fails three times then succeeds gets the event once with a valid signature; a bounce's
 * webhook carries the email's status and the bounce code apart; an endpoint that never succeeds is disabled.
 *
 * Runs on a database of its own: the worker's reconciler adopts every pending row of its database.
 */
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { client, createTestProject, recipient, sesSendsTo, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, verifyStandardWebhook, type Receiver } from '../support/receiver';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';
import { queuesSettled } from '../support/worker-queues';

let sns: SnsHarness;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    sns = await startSnsHarness();
    e2e.onTeardown(() => sns.close());
    return {
      SES_MAX_SEND_RATE: '50',
      CAMPAIGN_TICK_MS: '100',
      SNS_TOPIC_ARNS: sns.topicArn,
      SNS_CERT_HOSTS: sns.certHost,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_RETRY_SCHEDULE_MS: '150,150,150',
    };
  },
  worker: false,
});

let workerStarted: Promise<unknown> | undefined;
const startTheWorker = async () => {
  await (workerStarted ??= e2e.startWorker());
};

const emailRow = async (id: string) => (await e2e.api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const waitSent = (id: string) =>
  waitFor(async () => ((await emailRow(id)).status === 'sent' ? emailRow(id) : undefined), 20_000, `email ${id} sent`);
/** POSTs an SNS message the way SNS does (JSON text as text/plain). */
const postSns = (m: object) =>
  request(e2e.api.app).post('/webhooks/ses').set('Content-Type', 'text/plain; charset=UTF-8').send(JSON.stringify(m));

async function send(p: TestProject, to: string) {
  const res = await client(e2e.api.app, p).post('/v1/send', {
    to,
    from: `n@${p.domain}`,
    subject: 'Hello',
    body: '<p>Hi</p>',
  });
  expect(res.status).toBe(202);
  return res.body.data as {
    emails: { email: string; status: string; contact: { id: string } }[];
    suppressed: string[];
  };
}

test('an address suppressed after its email was accepted is caught at send time: status suppressed, nothing at SES', async () => {
  const p = await createTestProject(e2e.api.database);
  const to = recipient('late');
  const accepted = await send(p, to);
  expect(accepted.emails[0].status).toBe('queued');
  await client(e2e.api.app, p).post('/suppressions', { email: to });
  await startTheWorker();
  await waitFor(
    async () => (await emailRow(accepted.emails[0].email)).status === 'suppressed',
    20_000,
    'suppressed at claim',
  );
  expect(await sesSendsTo([to])).toHaveLength(0);
});

test('bounce → suppressed → the next /v1/send is not sent; deleting the suppression lets mail through again', async () => {
  await startTheWorker();
  const p = await createTestProject(e2e.api.database);
  const to = recipient('bounce');
  const first = await send(p, to);
  const sent = await waitSent(first.emails[0].email);
  expect(sent.messageId).toBeTruthy();
  expect(await sesSendsTo([to])).toHaveLength(1);

  const res = await postSns(
    sns.notification(sesEvent('Bounce', { messageId: sent.messageId!, to }, { bounceType: 'Permanent' })),
  );
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ status: 'bounced', suppressed: [to] });

  const second = await send(p, to);
  expect(second.suppressed).toEqual([to]);
  expect(second.emails[0].status).toBe('suppressed');
  // A control email sent after it proves the worker has drained the queue past that point.
  const control = await send(p, recipient('control'));
  await waitSent(control.emails[0].email);
  expect(await sesSendsTo([to])).toHaveLength(1);
  expect((await emailRow(second.emails[0].email)).status).toBe('suppressed');

  expect((await client(e2e.api.app, p).del(`/suppressions/${to}`)).status).toBe(200);
  const third = await send(p, to);
  expect(third.emails[0].status).toBe('queued');
  await waitSent(third.emails[0].email);
  expect(await sesSendsTo([to])).toHaveLength(2);
});

test('a campaign skips suppressed contacts, and its stats count the SES events that come back', async () => {
  await startTheWorker();
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const to = Array.from({ length: 5 }, () => recipient('camp'));
  for (const email of to) await as.post('/contacts', { email, subscribed: true });
  await as.post('/suppressions', { emails: to.slice(0, 2) });
  const created = await as.post('/campaigns', {
    name: 'c',
    subject: 'News',
    body: '<p>News</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  await as.post(`/campaigns/${created.body.data.id}/send`, {});
  const done = await waitFor(
    async () => {
      const c = (await as.get(`/campaigns/${created.body.data.id}`)).body.data;
      return c.status === 'SENT' ? c : undefined;
    },
    30_000,
    'campaign SENT',
  );
  expect(done.recipients).toBe(3);
  expect((await sesSendsTo(to)).map((s) => s.to[0]).sort()).toEqual(to.slice(2).sort());

  const rows = await e2e.api.database.db.select().from(emails).where(eq(emails.campaignId, created.body.data.id));
  const [a, b] = rows;
  for (const [row, type] of [
    [a, 'Delivery'],
    [a, 'Open'],
    [a, 'Click'],
    [b, 'Delivery'],
    [b, 'Open'],
    [b, 'Complaint'],
  ] as const) {
    expect(
      (await postSns(sns.notification(sesEvent(type, { messageId: row.messageId!, to: row.toEmail })))).status,
    ).toBe(200);
  }
  const stats = (await as.get(`/campaigns/${created.body.data.id}/stats`)).body.data;
  expect(stats).toMatchObject({
    recipients: 3,
    sent: 3,
    delivered: 2,
    opened: 2,
    clicked: 1,
    complained: 1,
    unsubscribed: 0,
  });
  // The complaint opted the contact out, but it is counted as a complaint, not as an unsubscribe.
  expect((await as.get(`/contacts/${rows[1].contactId}`)).body.data.subscribed).toBe(false);
  expect(stats.rates.open).toBeCloseTo(2 / 3, 3);
});

describe('outbound webhooks', () => {
  let receiver: Receiver;
  beforeAll(async () => {
    receiver = await startReceiver();
    await startTheWorker();
  });
  afterAll(() => receiver.close());

  test('an endpoint that fails 3 times then succeeds gets the event once, signed, with our ids next to the SES message id', async () => {
    const p = await createTestProject(e2e.api.database);
    const as = client(e2e.api.app, p);
    const endpoint = (await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['email.delivered'] })).body
      .data;
    const to = recipient('hook');
    const accepted = await send(p, to);
    const sent = await waitSent(accepted.emails[0].email);

    receiver.failNext(3);
    const before = receiver.received.length;
    await postSns(sns.notification(sesEvent('Delivery', { messageId: sent.messageId!, to })));
    const hits = await waitFor(
      async () => {
        const mine = receiver.received.slice(before);
        return mine.some((r) => r.status === 200) ? mine : undefined;
      },
      20_000,
      'a successful webhook attempt',
    );
    // No attempt can follow once the delivery is recorded succeeded and the worker holds no webhook job.
    await waitFor(
      async () =>
        (await as.get(`/webhooks/endpoints/${endpoint.id}/deliveries`)).body.data.items[0]?.status === 'succeeded',
      20_000,
      'the delivery recorded succeeded',
    );
    await queuesSettled(e2e.worker, ['webhook']);
    const all = receiver.received.slice(before);
    expect(all.map((r) => r.status)).toEqual([500, 500, 500, 200]);
    expect(hits.filter((r) => r.status === 200)).toHaveLength(1);
    expect(new Set(all.map((r) => r.headers['webhook-id'])).size).toBe(1);
    for (const r of all) expect(verifyStandardWebhook(endpoint.secret, r)).toBe(true);
    expect(verifyStandardWebhook('whsec_' + Buffer.alloc(32).toString('base64'), all[3])).toBe(false);
    const payload = JSON.parse(all[3].body);
    expect(payload).toMatchObject({
      type: 'email.delivered',
      data: {
        emailId: sent.id,
        contactId: accepted.emails[0].contact.id,
        campaignId: null,
        messageId: sent.messageId,
        to,
        status: 'delivered',
      },
    });

    const log = (await as.get(`/webhooks/endpoints/${endpoint.id}/deliveries`)).body.data.items[0];
    expect(log).toMatchObject({ status: 'succeeded', attempts: 4, lastStatusCode: 200 });
    expect(log.attemptLog.map((a: { statusCode: number }) => a.statusCode)).toEqual([500, 500, 500, 200]);
    expect(log.attemptLog[0].responseBody).toBe('temporarily broken');

    // Redelivery: one more request, same webhook-id.
    const n = receiver.received.length;
    expect((await as.post(`/webhooks/endpoints/${endpoint.id}/deliveries/${log.id}/redeliver`, {})).status).toBe(202);
    const redelivered = await waitFor(async () => receiver.received[n], 10_000, 'redelivery');
    expect(redelivered.headers['webhook-id']).toBe(all[0].headers['webhook-id']);
  });

  test('a bounce reaches the endpoint as email.bounced with data.status "bounced" and the bounce code in smtpStatus', async () => {
    const p = await createTestProject(e2e.api.database);
    const as = client(e2e.api.app, p);
    const endpoint = (await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['email.bounced'] })).body
      .data;
    const to = recipient('bounced-hook');
    const accepted = await send(p, to);
    const sent = await waitSent(accepted.emails[0].email);
    const res = await postSns(
      sns.notification(sesEvent('Bounce', { messageId: sent.messageId!, to }, { bounceType: 'Permanent' })),
    );
    expect(res.status).toBe(200);
    const got = await waitFor(
      async () =>
        receiver.received.find(
          (r) => r.status === 200 && r.body.includes(sent.id) && r.body.includes('"email.bounced"'),
        ),
      20_000,
      'email.bounced webhook',
    );
    expect(verifyStandardWebhook(endpoint.secret, got)).toBe(true);
    expect(JSON.parse(got.body)).toMatchObject({
      type: 'email.bounced',
      data: {
        emailId: sent.id,
        messageId: sent.messageId,
        to,
        status: 'bounced',
        smtpStatus: '5.1.1',
        bounceType: 'Permanent',
        diagnosticCode: 'smtp; 550 5.1.1 user unknown',
      },
    });
  });

  test('email.sent is announced by the worker; an endpoint that never succeeds is disabled after the whole schedule', async () => {
    const p = await createTestProject(e2e.api.database);
    const as = client(e2e.api.app, p);
    const broken = (
      await as.post('/webhooks/endpoints', { url: 'http://127.0.0.1:9/refused', eventTypes: ['email.sent'] })
    ).body.data;
    const healthy = (await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['email.*'] })).body.data;
    const to = recipient('sent');
    const accepted = await send(p, to);
    const sent = await waitSent(accepted.emails[0].email);
    const got = await waitFor(
      async () => receiver.received.find((r) => r.body.includes(sent.id) && r.body.includes('"email.sent"')),
      10_000,
      'email.sent webhook',
    );
    expect(verifyStandardWebhook(healthy.secret, got)).toBe(true);
    expect(JSON.parse(got.body).data).toMatchObject({ emailId: sent.id, messageId: sent.messageId, status: 'sent' });

    const disabled = await waitFor(
      async () => {
        const e = (await as.get(`/webhooks/endpoints/${broken.id}`)).body.data;
        return e.enabled ? undefined : e;
      },
      20_000,
      'endpoint disabled',
    );
    expect(disabled.disabledReason).toMatch(/every attempt failed/);
    const [d] = (await as.get(`/webhooks/endpoints/${broken.id}/deliveries`)).body.data.items;
    expect(d).toMatchObject({ status: 'failed', attempts: 4, lastStatusCode: null });
    expect(d.lastError).toMatch(/ECONNREFUSED/);

    // Disabled: new events make no deliveries for it.
    const next = await send(p, recipient('after'));
    await waitSent(next.emails[0].email);
    expect((await as.get(`/webhooks/endpoints/${broken.id}/deliveries`)).body.data.total).toBe(1);
  });
});
