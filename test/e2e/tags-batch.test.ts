/**
 * Tags and batches end to end: API → worker → SES emulator (through the recording proxy) → signed SNS feedback →
 * outbound webhooks. A batch's emails are each sent exactly once; the SES request carries the sender's tags as
 * message tags beside the platform's; `email.sent`, `email.delivered` and `email.bounced` payloads echo the tags;
 * `GET /reputation?tag=` counts the tagged emails only.
 */
import request from 'supertest';
import { eq } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { client, createTestProject, recipient, sesRecordedTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, type Receiver } from '../support/receiver';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';
import { queuesSettled } from '../support/worker-queues';

let sns: SnsHarness;
let receiver: Receiver;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    sns = await startSnsHarness();
    e2e.onTeardown(() => sns.close());
    receiver = await startReceiver();
    e2e.onTeardown(() => receiver.close());
    return {
      SES_MAX_SEND_RATE: '50',
      SNS_TOPIC_ARNS: sns.topicArn,
      SNS_CERT_HOSTS: sns.certHost,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    };
  },
});

const emailRow = async (id: string) => (await e2e.api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const postSns = (m: object) =>
  request(e2e.api.app).post('/webhooks/ses').set('Content-Type', 'text/plain; charset=UTF-8').send(JSON.stringify(m));
const hooksFor = (emailId: string, type: string) =>
  receiver.received
    .filter((r) => r.status === 200)
    .map((r) => JSON.parse(r.body) as { type: string; data: { emailId: string; tags: unknown } })
    .filter((b) => b.type === type && b.data.emailId === emailId);

test('a batch: every email sent exactly once, SES message tags carry the tags, and every email.* payload echoes them; /reputation?tag= counts them', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  expect((await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['email.*'] })).status).toBe(201);

  const receipt = [
    { name: 'category', value: 'receipt' },
    { name: 'order', value: 'A-17' },
  ];
  const to = [recipient('b0'), recipient('b1'), recipient('b2'), recipient('b3')];
  const res = await request(e2e.api.app)
    .post('/v1/send/batch')
    .set('Authorization', p.auth)
    .send([
      { to: to[0], from: `n@${p.domain}`, subject: 'Receipt 0', body: '<p>0</p>', tags: receipt },
      { to: to[1], from: `n@${p.domain}`, subject: 'Receipt 1', body: '<p>1</p>', tags: receipt },
      {
        to: to[2],
        from: `n@${p.domain}`,
        subject: 'Welcome',
        body: '<p>2</p>',
        tags: [{ name: 'category', value: 'welcome' }],
      },
      { to: to[3], from: `n@${p.domain}`, subject: 'Plain', body: '<p>3</p>' },
      {
        to: recipient('refused'),
        from: `n@${p.domain}`,
        subject: 'x',
        body: 'x',
        tags: [{ name: 'email_id', value: 'mine' }],
      },
    ]);
  expect(res.status).toBe(200);
  expect(res.body.data.errors.map((e: { index: number }) => e.index)).toEqual([4]);
  const ids: string[] = res.body.data.data.map((d: { emails: { email: string }[] }) => d.emails[0].email);
  expect(ids).toHaveLength(4);

  // Every email sent, and (once the send queue has settled) each exactly once at SES.
  await waitFor(
    async () => ((await Promise.all(ids.map(emailRow))).every((r) => r.status === 'sent') ? true : undefined),
    30_000,
    'the batch sent',
  );
  await queuesSettled(e2e.worker, ['send']);
  const recorded = await sesRecordedTo(to);
  expect(to.map((t) => recorded.filter((s) => s.to.includes(t) && s.status === 200).length)).toEqual([1, 1, 1, 1]);

  // The SES request's message tags: the platform's, then the sender's.
  const tagsOf = (address: string) =>
    Object.fromEntries(recorded.find((s) => s.to.includes(address))!.tags.map((t) => [t.Name, t.Value]));
  expect(tagsOf(to[0])).toEqual({ email_id: ids[0], project_id: p.id, category: 'receipt', order: 'A-17' });
  expect(tagsOf(to[2])).toEqual({ email_id: ids[2], project_id: p.id, category: 'welcome' });
  expect(tagsOf(to[3])).toEqual({ email_id: ids[3], project_id: p.id });

  // email.sent echoes the tags (an untagged email: []).
  const sent0 = await waitFor(async () => hooksFor(ids[0], 'email.sent')[0], 20_000, 'email.sent of the first');
  expect(sent0.data.tags).toEqual(receipt);
  expect(
    (await waitFor(async () => hooksFor(ids[3], 'email.sent')[0], 20_000, 'email.sent of the untagged')).data.tags,
  ).toEqual([]);

  // Feedback: a delivery and a bounce, each echoing the tags; counted per tag.
  const row0 = await emailRow(ids[0]);
  const row1 = await emailRow(ids[1]);
  expect(
    (
      await postSns(
        sns.notification(
          sesEvent('Delivery', { messageId: row0.messageId!, to: to[0], emailId: ids[0], projectId: p.id }),
        ),
      )
    ).status,
  ).toBe(200);
  expect(
    (
      await postSns(
        sns.notification(
          sesEvent(
            'Bounce',
            { messageId: row1.messageId!, to: to[1], emailId: ids[1], projectId: p.id },
            { bounceType: 'Permanent' },
          ),
        ),
      )
    ).status,
  ).toBe(200);
  const delivered = await waitFor(async () => hooksFor(ids[0], 'email.delivered')[0], 20_000, 'email.delivered');
  expect(delivered.data.tags).toEqual(receipt);
  const bounced = await waitFor(async () => hooksFor(ids[1], 'email.bounced')[0], 20_000, 'email.bounced');
  expect(bounced.data.tags).toEqual(receipt);

  const byTag = (await as.get('/reputation?tag=category:receipt')).body.data.last24h;
  expect(byTag.overall).toMatchObject({ sent: 2, delivered: 1, hardBounces: 1 });
  expect(byTag.domains).toEqual([expect.objectContaining({ domain: p.domain, sent: 2 })]);
  expect((await as.get('/reputation?tag=order:A-17')).body.data.last24h.overall).toMatchObject({
    sent: 2,
    delivered: 1,
    hardBounces: 1,
  });
  expect((await as.get('/reputation?tag=category:welcome')).body.data.last24h.overall).toMatchObject({
    sent: 1,
    delivered: 0,
  });
  expect((await as.get('/reputation')).body.data.last24h.overall).toMatchObject({
    sent: 4,
    delivered: 1,
    hardBounces: 1,
  });
});

test('a campaign sends its tags to SES with every email', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const to = recipient('camp');
  expect((await as.post('/contacts', { email: to, subscribed: true })).status).toBeLessThan(300);
  const created = await as.post('/campaigns', {
    name: 'Launch',
    subject: 'Hi',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    tags: [{ name: 'campaign', value: 'launch' }],
  });
  expect(created.status).toBe(201);
  expect((await as.post(`/campaigns/${created.body.data.id}/send`, {})).status).toBeLessThan(300);
  const sent = await waitFor(
    async () => (await sesRecordedTo([to])).find((s) => s.status === 200),
    30_000,
    'the campaign email at SES',
  );
  expect(sent.tags).toEqual(
    expect.arrayContaining([
      { Name: 'campaign', Value: 'launch' },
      { Name: 'email_id', Value: expect.any(String) },
    ]),
  );
});
