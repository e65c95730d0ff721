/**
 * `POST /webhooks/ses`: SNS signature checks (forged, tampered, unsigned, foreign topic, untrusted certificate
 * host: refused, nothing changes), redelivered messages (no second effect), subscription confirmation, and every
 * SES event type's effect: forward-only status, atomic open/click counts, the timeline, contact events,
 * suppression (hard, soft after the limit, complaint + unsubscribe), campaign statistics (complaints and bounces
 * are not unsubscribes; an unsubscribe counts once per email) and tenant safety.
 */
import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { events } from '@mailroom/db/schema/events';
import { suppressions } from '@mailroom/db/schema/feedback';
import { projects } from '@mailroom/db/schema';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { newId } from '@mailroom/platform/ids';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';

let sns: SnsHarness;
let ctx: ReturnType<typeof useApiWithProject>;
{
  // The API must know the harness's topic and certificate host before it starts.
  const env: Record<string, string> = {};
  beforeAll(async () => {
    sns = await startSnsHarness();
    Object.assign(env, {
      SNS_TOPIC_ARNS: sns.topicArn,
      SNS_CERT_HOSTS: `sns.*.amazonaws.com,${sns.certHost}`,
      SOFT_BOUNCE_LIMIT: '3',
      SOFT_BOUNCE_WINDOW_HOURS: '24',
    });
  });
  ctx = useApiWithProject(env);
  afterAll(() => sns.close());
}

const post = (body: object | string, contentType = 'text/plain; charset=UTF-8') =>
  request(ctx.api.app)
    .post('/webhooks/ses')
    .set('Content-Type', contentType)
    .set('x-amz-sns-message-type', 'Notification')
    .send(typeof body === 'string' ? body : JSON.stringify(body));

/** An email accepted by /v1/send and recorded as handed to SES with a fresh SES message id (what the worker does). */
async function sentEmail(
  p: TestProject,
  to = recipient('fb'),
): Promise<{ id: string; to: string; messageId: string; contactId: string }> {
  const res = await client(ctx.api.app, p).post('/v1/send', {
    to,
    from: `n@${p.domain}`,
    subject: 'S',
    body: '<p>B</p>',
  });
  expect(res.status).toBe(202);
  const id = res.body.data.emails[0].email as string;
  const messageId = `0100018f${randomUUID().replace(/-/g, '')}-000000`;
  await ctx.api.database.db
    .update(emails)
    .set({ status: 'sent', messageId, sentAt: new Date() })
    .where(eq(emails.id, id));
  return { id, to, messageId, contactId: res.body.data.emails[0].contact.id };
}

const emailRow = async (id: string) => (await ctx.api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const contactEvents = async (contactId: string) =>
  (
    await ctx.api.database.db
      .select({ name: events.name, data: events.data })
      .from(events)
      .where(eq(events.contactId, contactId))
  )
    .map((e) => e.name)
    .filter((n) => n.startsWith('email.'));
const suppressionOf = async (projectId: string, email: string) =>
  (
    await ctx.api.database.db
      .select()
      .from(suppressions)
      .where(sql`${suppressions.projectId} = ${projectId}::uuid and ${suppressions.emailKey} = ${email.toLowerCase()}`)
  )[0];

describe('SNS authenticity', () => {
  test('a Delivery signed with SignatureVersion 1 or 2 is accepted; the email moves to delivered', async () => {
    for (const version of ['1', '2'] as const) {
      const e = await sentEmail(ctx.p);
      const res = await post(sns.notification(sesEvent('Delivery', e), { version }));
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({
        type: 'Notification',
        duplicate: false,
        emailId: e.id,
        status: 'delivered',
      });
      expect((await emailRow(e.id)).deliveredAt).not.toBeNull();
    }
  });

  test("Plunk's path POST /webhooks/sns is the same endpoint: a signed Delivery moves the email, a forged one is 403", async () => {
    const e = await sentEmail(ctx.p);
    const viaSns = (body: string) =>
      request(ctx.api.app)
        .post('/webhooks/sns')
        .set('Content-Type', 'text/plain; charset=UTF-8')
        .set('x-amz-sns-message-type', 'Notification')
        .send(body);
    const res = await viaSns(JSON.stringify(sns.notification(sesEvent('Delivery', e))));
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ type: 'Notification', duplicate: false, emailId: e.id, status: 'delivered' });
    expect((await emailRow(e.id)).deliveredAt).not.toBeNull();
    // The same message again through our own path is a redelivery: one endpoint, one dedup.
    const again = await post(sns.notification(sesEvent('Delivery', e)));
    expect(again.status).toBe(200);
    const other = await sentEmail(ctx.p);
    const forged = {
      ...sns.notification(sesEvent('Bounce', other)),
      Signature: Buffer.from('x'.repeat(256)).toString('base64'),
    };
    const refused = await viaSns(JSON.stringify(forged));
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'FORBIDDEN', retryable: false });
    expect((await emailRow(other.id)).status).toBe('sent');
  });

  test('forged, tampered, unsigned or re-pointed messages are refused with 403 and change nothing', async () => {
    const e = await sentEmail(ctx.p);
    const good = sns.notification(sesEvent('Bounce', e, { bounceType: 'Permanent' }));
    const tampered = { ...good, Message: good.Message.replace('Permanent', 'Transient') };
    const forgedSignature = { ...good, Signature: Buffer.from('x'.repeat(256)).toString('base64') };
    const without = (...fields: string[]) =>
      Object.fromEntries(Object.entries(good).filter(([k]) => !fields.includes(k)));
    const unsigned = without('Signature');
    const foreignCert = sns.sign({
      ...good,
      SigningCertURL: 'https://evil.example.com/SimpleNotificationService-x.pem',
    });
    const lookalikeCert = sns.sign({
      ...good,
      SigningCertURL: 'https://sns.us-east-1.amazonaws.com.evil.example/cert.pem',
    });
    const foreignTopic = sns.notification(sesEvent('Bounce', e), {
      topicArn: 'arn:aws:sns:us-east-1:999999999999:other',
    });
    // Correctly signed, but older than the redelivery memory: a replay of a captured message.
    const stale = sns.sign({
      ...good,
      MessageId: randomUUID(),
      Timestamp: new Date(Date.now() - 31 * 86_400_000).toISOString(),
    });
    // Signed by another key, served from the trusted host: the signature does not verify against the real certificate.
    const otherKey = { ...good, MessageId: randomUUID() };

    for (const [what, m, status] of [
      ['tampered', tampered, 403],
      ['forged signature', forgedSignature, 403],
      ['unsigned', unsigned, 403],
      ['no signature fields at all', without('Signature', 'SignatureVersion', 'SigningCertURL'), 403],
      ['no SignatureVersion', without('SignatureVersion'), 403],
      ['unknown SignatureVersion', { ...good, SignatureVersion: '3' }, 403],
      ['no SigningCertURL', without('SigningCertURL'), 403],
      ['empty Signature', { ...good, Signature: '' }, 403],
      ['certificate off SNS hosts', foreignCert, 403],
      ['look-alike host', lookalikeCert, 403],
      ['unknown topic', foreignTopic, 403],
      ['older than the retention', stale, 403],
      ['message id changed after signing', otherKey, 403],
    ] as const) {
      const res = await post(m);
      expect({ what, status: res.status }).toEqual({ what, status });
      expect(res.body.success).toBe(false);
    }
    expect(await post('not json').then((r) => r.status)).toBe(400);
    expect(await post({ Type: 'Notification' }).then((r) => r.status)).toBe(400);
    // Malformed stays malformed even when it is also unsigned: the shape is checked first.
    expect(await post(without('Signature', 'MessageId')).then((r) => r.status)).toBe(400);
    expect(await post({ ...good, Type: 'Nonsense' }).then((r) => r.status)).toBe(400);
    const unsignedAnswer = await post(unsigned);
    expect(unsignedAnswer.body.error).toMatchObject({ code: 'FORBIDDEN', statusCode: 403 });
    expect(unsignedAnswer.body.error.message).toMatch(/unsigned/);
    const row = await emailRow(e.id);
    expect(row.status).toBe('sent');
    expect(await suppressionOf(ctx.p.id, e.to)).toBeUndefined();
    expect(await contactEvents(e.contactId)).toEqual([]);
  });

  test('a redelivered message (same MessageId) changes nothing twice', async () => {
    const e = await sentEmail(ctx.p);
    const open = sns.notification(sesEvent('Open', e));
    const first = await post(open);
    const again = await post(open);
    expect(first.body.data.duplicate).toBe(false);
    expect(again.status).toBe(200);
    expect(again.body.data.duplicate).toBe(true);
    const row = await emailRow(e.id);
    expect(row.openCount).toBe(1);
    expect(await contactEvents(e.contactId)).toEqual(['email.opened']);
  });

  test('SubscriptionConfirmation is confirmed by fetching SubscribeURL; UnsubscribeConfirmation is acknowledged only', async () => {
    const before = sns.confirmations.length;
    const res = await post(sns.confirmation('SubscriptionConfirmation'));
    expect(res.status).toBe(200);
    expect(sns.confirmations.length).toBe(before + 1);
    expect(sns.confirmations.at(-1)).toContain('Action=ConfirmSubscription');
    const unsub = await post(sns.confirmation('UnsubscribeConfirmation'));
    expect(unsub.status).toBe(200);
    expect(sns.confirmations.length).toBe(before + 1);
    // A confirmation whose SubscribeURL is off the trusted hosts is refused, even when signed.
    const m = sns.confirmation('SubscriptionConfirmation');
    const evil = sns.sign({ ...m, SubscribeURL: 'https://evil.example.com/confirm' });
    expect((await post(evil)).status).toBe(403);
  });

  test('an SES record that is not an event is a 400; an event about a message that is not ours is acknowledged and ignored', async () => {
    expect((await post(sns.notification({ hello: 'world' }))).status).toBe(400);
    const res = await post(sns.notification(sesEvent('Delivery', { messageId: 'not-ours-1', to: 'x@y.test' })));
    expect(res.status).toBe(200);
    expect(res.body.data.ignored).toBe('unknown message');
  });
});

describe('event effects', () => {
  test('status only moves forward: Open after Click stays clicked, Delivery after Open stays opened; counts are exact', async () => {
    const a = await sentEmail(ctx.p);
    for (const type of ['Delivery', 'Click', 'Open', 'Open', 'Delivery'] as const) {
      expect((await post(sns.notification(sesEvent(type, a)))).status).toBe(200);
    }
    let row = await emailRow(a.id);
    expect(row).toMatchObject({ status: 'clicked', openCount: 2, clickCount: 1 });
    expect(row.openedAt).not.toBeNull();

    const b = await sentEmail(ctx.p);
    for (const type of ['Open', 'Delivery'] as const) await post(sns.notification(sesEvent(type, b)));
    row = await emailRow(b.id);
    expect(row).toMatchObject({ status: 'opened', openCount: 1, clickCount: 0 });
    expect(row.deliveredAt).not.toBeNull();

    const timeline = await client(ctx.api.app, ctx.p).get(`/emails/${b.id}`);
    expect(timeline.body.data).toMatchObject({ status: 'opened', opens: 1, clicks: 0, clickedAt: null });
    expect(timeline.body.data.deliveredAt).not.toBeNull();
    const types = timeline.body.data.timeline.map((t: { type: string }) => t.type);
    expect(types).toEqual(expect.arrayContaining(['queued', 'opened', 'delivered']));
  });

  test('concurrent opens and clicks of one email are all counted', async () => {
    const e = await sentEmail(ctx.p);
    await Promise.all(
      Array.from({ length: 12 }, (_, i) => post(sns.notification(sesEvent(i % 3 === 0 ? 'Click' : 'Open', e)))),
    );
    const row = await emailRow(e.id);
    expect(row.openCount + row.clickCount).toBe(12);
    expect(row.clickCount).toBe(4);
    expect(row.status).toBe('clicked');
  });

  test('the contact gets email.delivered / opened / clicked / bounced / complained events that segment filters see', async () => {
    const e = await sentEmail(ctx.p);
    for (const type of ['Delivery', 'Open', 'Click'] as const)
      await post(sns.notification(sesEvent(type, e, { link: 'https://shop.example/x' })));
    expect(await contactEvents(e.contactId)).toEqual(['email.delivered', 'email.opened', 'email.clicked']);
    const [clicked] = await ctx.api.database.db
      .select({ data: events.data })
      .from(events)
      .where(sql`${events.contactId} = ${e.contactId}::uuid and ${events.name} = 'email.clicked'`);
    expect(clicked.data).toMatchObject({ emailId: e.id, messageId: e.messageId, link: 'https://shop.example/x' });
    const preview = await client(ctx.api.app, ctx.p).post('/segments/preview', {
      filter: [{ field: 'email.clicked', operator: 'exists' }],
    });
    expect(preview.status).toBe(200);
    expect(preview.body.data.sample.map((c: { id: string }) => c.id)).toContain(e.contactId);
  });

  test('a permanent bounce suppresses the address at once, with its reason and source email', async () => {
    const e = await sentEmail(ctx.p);
    const res = await post(sns.notification(sesEvent('Bounce', e, { bounceType: 'Permanent' })));
    expect(res.body.data).toMatchObject({ status: 'bounced', suppressed: [e.to] });
    const s = await suppressionOf(ctx.p.id, e.to);
    expect(s).toMatchObject({ reason: 'hard_bounce', sourceEmailId: e.id });
    expect(s.details).toMatchObject({
      bounceType: 'Permanent',
      bounceSubType: 'General',
      diagnosticCode: 'smtp; 550 5.1.1 user unknown',
    });
  });

  test('email.bounced and email.delivery_delayed webhooks: data.status is the email status, the enhanced status code is smtpStatus', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const hook = (
      await as.post('/webhooks/endpoints', {
        url: 'https://hooks.example.com/ses',
        eventTypes: ['email.bounced', 'email.delivery_delayed'],
      })
    ).body.data;
    const delayed = await sentEmail(p);
    await post(sns.notification(sesEvent('DeliveryDelay', delayed)));
    const bounced = await sentEmail(p);
    expect((await post(sns.notification(sesEvent('Bounce', bounced, { bounceType: 'Permanent' })))).status).toBe(200);

    const items = (await as.get(`/webhooks/endpoints/${hook.id}/deliveries`)).body.data.items as {
      eventType: string;
      payload: { data: Record<string, unknown> };
    }[];
    const payload = (type: string) => items.find((i) => i.eventType === type)!.payload.data;
    expect(payload('email.bounced')).toMatchObject({
      emailId: bounced.id,
      status: 'bounced',
      smtpStatus: '5.1.1',
      bounceType: 'Permanent',
      bounceSubType: 'General',
      diagnosticCode: 'smtp; 550 5.1.1 user unknown',
    });
    expect(payload('email.delivery_delayed')).toMatchObject({
      emailId: delayed.id,
      status: 'sent',
      smtpStatus: '4.2.2',
    });
    // The timeline and the contact event carry the code under the same name.
    const timeline = (await as.get(`/emails/${bounced.id}`)).body.data.timeline as {
      type: string;
      data?: Record<string, unknown>;
    }[];
    expect(timeline.find((t) => t.type === 'bounced')).toMatchObject({
      data: expect.objectContaining({ smtpStatus: '5.1.1' }),
    });
    const [contactEvent] = await ctx.api.database.db
      .select({ data: events.data })
      .from(events)
      .where(sql`${events.contactId} = ${bounced.contactId}::uuid and ${events.name} = 'email.bounced'`);
    expect(contactEvent.data).toMatchObject({ smtpStatus: '5.1.1' });
    expect(contactEvent.data).not.toHaveProperty('status');
  });

  test('transient bounces suppress only at SOFT_BOUNCE_LIMIT within the window', async () => {
    const to = recipient('soft');
    for (let i = 1; i <= 3; i++) {
      const e = await sentEmail(ctx.p, to);
      const res = await post(sns.notification(sesEvent('Bounce', e, { bounceType: 'Transient' })));
      expect(res.body.data.status).toBe('bounced');
      const s = await suppressionOf(ctx.p.id, to);
      if (i < 3) expect(s).toBeUndefined();
      else
        expect(s).toMatchObject({
          reason: 'soft_bounce',
          details: expect.objectContaining({ softBounces: 3, windowHours: 24 }),
        });
    }
  });

  test('an old transient bounce outside the window does not count', async () => {
    const to = recipient('softold');
    const old = new Date(Date.now() - 30 * 3600_000);
    for (let i = 0; i < 2; i++) {
      const e = await sentEmail(ctx.p, to);
      await post(sns.notification(sesEvent('Bounce', e, { bounceType: 'Transient', at: old })));
    }
    const e = await sentEmail(ctx.p, to);
    await post(sns.notification(sesEvent('Bounce', e, { bounceType: 'Undetermined' })));
    expect(await suppressionOf(ctx.p.id, to)).toBeUndefined();
  });

  test('a complaint suppresses the address and unsubscribes the contact', async () => {
    const to = recipient('cmp');
    const as = client(ctx.api.app, ctx.p);
    await as.post('/contacts', { email: to, subscribed: true });
    const e = await sentEmail(ctx.p, to);
    const res = await post(sns.notification(sesEvent('Complaint', e)));
    expect(res.body.data).toMatchObject({ status: 'complained', suppressed: [to] });
    expect(await suppressionOf(ctx.p.id, to)).toMatchObject({ reason: 'complaint' });
    const contact = await as.get(`/contacts/${e.contactId}`);
    expect(contact.body.data.subscribed).toBe(false);
    const names = (
      await ctx.api.database.db.select({ name: events.name }).from(events).where(eq(events.contactId, e.contactId))
    ).map((r) => r.name);
    expect(names).toEqual(expect.arrayContaining(['email.complained', 'contact.unsubscribed']));
  });

  test('Reject and Rendering Failure fail the email with the reason; DeliveryDelay only adds to the timeline', async () => {
    const r = await sentEmail(ctx.p);
    await post(sns.notification(sesEvent('Reject', r)));
    expect(await emailRow(r.id)).toMatchObject({ status: 'failed', error: 'Bad content' });
    const f = await sentEmail(ctx.p);
    await post(sns.notification(sesEvent('Rendering Failure', f)));
    expect(await emailRow(f.id)).toMatchObject({ status: 'failed', error: 'Attribute name is missing' });
    const d = await sentEmail(ctx.p);
    await post(sns.notification(sesEvent('DeliveryDelay', d)));
    expect((await emailRow(d.id)).status).toBe('sent');
    const timeline = await client(ctx.api.app, ctx.p).get(`/emails/${d.id}`);
    expect(timeline.body.data.timeline.map((t: { type: string }) => t.type)).toContain('delivery_delayed');
  });

  test('an event racing the worker (message id not yet recorded) is matched by the email_id tag and leaves the row to the worker', async () => {
    const res = await client(ctx.api.app, ctx.p).post('/v1/send', {
      to: recipient('race'),
      from: `n@${ctx.p.domain}`,
      subject: 'S',
      body: 'B',
    });
    const id = res.body.data.emails[0].email as string;
    await ctx.api.database.db.update(emails).set({ status: 'sending' }).where(eq(emails.id, id));
    const out = await post(
      sns.notification(
        sesEvent('Delivery', { messageId: 'not-yet-recorded', to: 'x@y.test', emailId: id, projectId: ctx.p.id }),
      ),
    );
    expect(out.body.data.emailId).toBe(id);
    const row = await emailRow(id);
    expect(row.status).toBe('sending');
    expect(row.deliveredAt).not.toBeNull();
    // A tag naming another project's email is not trusted.
    const other = await createTestProject(ctx.api.database);
    const foreign = await post(
      sns.notification(
        sesEvent('Delivery', { messageId: 'not-yet-2', to: 'x@y.test', emailId: id, projectId: other.id }),
      ),
    );
    expect(foreign.body.data.ignored).toBe('unknown message');
  });

  test('the email_id tag (on every event of our sends) finds the email with its message id; a tag naming another email falls back to the message id', async () => {
    const a = await sentEmail(ctx.p);
    const b = await sentEmail(ctx.p);
    const tagged = await post(sns.notification(sesEvent('Delivery', { ...a, emailId: a.id, projectId: ctx.p.id })));
    expect(tagged.body.data).toMatchObject({ emailId: a.id, status: 'delivered' });
    // SES's message id decides: a tag pointing at b (b's id, a's message id) still applies the event to a, not b.
    const crossed = await post(sns.notification(sesEvent('Open', { ...a, emailId: b.id, projectId: ctx.p.id })));
    expect(crossed.body.data).toMatchObject({ emailId: a.id, status: 'opened' });
    expect((await emailRow(b.id)).status).toBe('sent');
  });
});

describe('reputation counts', () => {
  const countsOf = async (projectId: string) =>
    (
      await ctx.api.database.db.execute<{ delivered: number; hard: number; soft: number; complaints: number }>(sql`
        select sum(delivered)::int as delivered, sum(hard_bounces)::int as hard, sum(soft_bounces)::int as soft, sum(complaints)::int as complaints
        from reputation_counts where project_id = ${projectId}::uuid`)
    ).rows[0];

  test('each outcome counts once per email; a hard bounce after a soft one counts as hard and marks the email hard', async () => {
    const p = await createTestProject(ctx.api.database);
    const e = await sentEmail(p);
    for (const [type, bounceType] of [
      ['Delivery'],
      ['Delivery'],
      ['Bounce', 'Transient'],
      ['Bounce', 'Transient'],
      ['Bounce', 'Permanent'],
      ['Bounce', 'Permanent'],
      ['Complaint'],
      ['Complaint'],
    ] as const) {
      expect((await post(sns.notification(sesEvent(type, e, bounceType ? { bounceType } : {})))).status).toBe(200);
    }
    expect(await countsOf(p.id)).toEqual({ delivered: 1, hard: 1, soft: 1, complaints: 1 });
    expect((await emailRow(e.id)).bounceType).toBe('hard');
  });
});

describe('campaign counters', () => {
  /** A campaign with one email per address, each recorded as handed to SES (what the worker does). */
  async function campaignWithEmails(p: TestProject, n: number) {
    const as = client(ctx.api.app, p);
    const created = await as.post('/campaigns', {
      name: 'Counters',
      subject: 'Hi',
      body: '<p>News</p>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(created.status).toBe(201);
    const campaignId = created.body.data.id as string;
    const sent: { id: string; to: string; messageId: string; contactId: string }[] = [];
    for (let i = 0; i < n; i++) {
      const to = recipient(`cc${i}`);
      const contact = await as.post('/contacts', { email: to, subscribed: true });
      const id = newId();
      const messageId = `0100018f${randomUUID().replace(/-/g, '')}-000000`;
      await ctx.api.database.db.transaction((tx) =>
        insertQueuedEmails(tx, [
          {
            id,
            projectId: p.id,
            campaignId,
            contactId: contact.body.data.id,
            source: 'campaign',
            marketing: true,
            toEmail: to,
            fromEmail: `news@${p.domain}`,
          },
        ]),
      );
      await ctx.api.database.db
        .update(emails)
        .set({ status: 'sent', messageId, sentAt: new Date() })
        .where(eq(emails.id, id));
      sent.push({ id, to, messageId, contactId: contact.body.data.id });
    }
    return { campaignId, sent, stats: async () => (await as.get(`/campaigns/${campaignId}/stats`)).body.data };
  }

  async function oneClick(p: TestProject, emailId: string) {
    const [{ signingKey }] = await ctx.api.database.db
      .select({ signingKey: projects.signingKey })
      .from(projects)
      .where(eq(projects.id, p.id));
    return (
      await request(ctx.api.app)
        .post(`/unsubscribe/${createUnsubscribeToken(emailId, signingKey)}`)
        .set('Accept', 'application/json')
    ).body.data;
  }

  test('complaints and bounces that opt the contact out count as complaints and bounces, not unsubscribes', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = await campaignWithEmails(p, 4);
    for (const e of c.sent.slice(0, 2))
      expect((await post(sns.notification(sesEvent('Complaint', e)))).body.data).toMatchObject({
        status: 'complained',
      });
    expect(
      (await post(sns.notification(sesEvent('Bounce', c.sent[2], { bounceType: 'Permanent' })))).body.data,
    ).toMatchObject({ status: 'bounced' });
    const stats = await c.stats();
    expect(stats).toMatchObject({ sent: 4, complained: 2, bounced: 1, unsubscribed: 0 });
    expect(stats.rates).toMatchObject({ complaint: 0.5, bounce: 0.25, unsubscribe: 0 });
    // The complaints did opt their contacts out (the rule), without being counted as unsubscribes.
    expect((await client(ctx.api.app, p).get(`/contacts/${c.sent[0].contactId}`)).body.data.subscribed).toBe(false);
    // A complained contact's own link changes nothing more.
    expect(await oneClick(p, c.sent[0].id)).toMatchObject({ changed: false });
    expect((await c.stats()).unsubscribed).toBe(0);
  });

  test("feedback webhooks of an A/B-tested campaign's email carry its variant; other emails' carry none", async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const hook = (
      await as.post('/webhooks/endpoints', {
        url: 'https://hooks.example.com/ab',
        eventTypes: ['email.delivered', 'email.opened', 'email.bounced'],
      })
    ).body.data;
    const { sent } = await campaignWithEmails(p, 2);
    const [tested, plain] = sent;
    await ctx.api.database.db.update(emails).set({ variant: 1 }).where(eq(emails.id, tested.id));
    for (const e of sent) {
      expect((await post(sns.notification(sesEvent('Delivery', e)))).status).toBe(200);
      expect((await post(sns.notification(sesEvent('Open', e)))).status).toBe(200);
    }
    expect((await post(sns.notification(sesEvent('Bounce', tested, { bounceType: 'Transient' })))).status).toBe(200);
    const items = (await as.get(`/webhooks/endpoints/${hook.id}/deliveries`)).body.data.items as {
      eventType: string;
      payload: { data: Record<string, unknown> };
    }[];
    const of = (emailId: string) => items.filter((i) => i.payload.data.emailId === emailId);
    expect(
      of(tested.id)
        .map((i) => i.eventType)
        .sort(),
    ).toEqual(['email.bounced', 'email.delivered', 'email.opened']);
    for (const i of of(tested.id)) expect(i.payload.data.variant).toBe(1);
    expect(
      of(plain.id)
        .map((i) => i.eventType)
        .sort(),
    ).toEqual(['email.delivered', 'email.opened']);
    for (const i of of(plain.id)) expect(i.payload.data).not.toHaveProperty('variant');
  });

  test('an unsubscribe counts once per email, even when the contact re-subscribes and opts out again through it', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = await campaignWithEmails(p, 2);
    const [e] = c.sent;
    expect(await oneClick(p, e.id)).toMatchObject({ unsubscribed: true, changed: true });
    expect((await c.stats()).unsubscribed).toBe(1);
    expect((await client(ctx.api.app, p).patch(`/contacts/${e.contactId}`, { subscribed: true })).status).toBe(200);
    expect(await oneClick(p, e.id)).toMatchObject({ unsubscribed: true, changed: true });
    const stats = await c.stats();
    expect(stats.unsubscribed).toBe(1);
    expect(stats.rates.unsubscribe).toBe(0.5);
  });
});
