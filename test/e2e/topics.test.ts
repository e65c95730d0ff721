/**
 * Topics and double opt-in end to end (API → Postgres → worker → SES emulator): a campaign to a topic reaches
 * exactly the contacts subscribed to it (explicitly or by the opt-out default) and globally subscribed; the
 * List-Unsubscribe one-click (RFC 8058) of topic mail leaves that topic only; a double opt-in's confirmation email
 * arrives, its link's page confirms nothing, the page's POST confirms and records the proof, and the worker's
 * expiry pass erases an unconfirmed contact it created (and only marks one that existed before).
 *
 * One database of the file's own: the worker's reconciler adopts every SENDING campaign of its database.
 */
import request from 'supertest';
import { and, eq, sql } from 'drizzle-orm';
import { emailEvents, emails } from '@mailroom/db/schema/emails';
import { events } from '@mailroom/db/schema/events';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import {
  client,
  createTestProject,
  parseMail,
  recipient,
  sesSendsTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({
  isolated: true,
  env: {
    SES_MAX_SEND_RATE: '50',
    CAMPAIGN_TICK_MS: '100',
    SEND_BACKOFF_MS: '100',
    DOUBLE_OPT_IN_SWEEP_INTERVAL_MS: '300',
    DOUBLE_OPT_IN_EXPIRY_HOURS: '48',
  },
});

async function topic(p: TestProject, name: string, defaultSubscription: 'opt_in' | 'opt_out'): Promise<string> {
  const res = await client(e2e.api.app, p).post('/topics', { name, defaultSubscription });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function contact(p: TestProject, email: string, body: object = {}): Promise<string> {
  const res = await client(e2e.api.app, p).post('/contacts', { email, subscribed: true, ...body });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function sendCampaign(p: TestProject, body: object): Promise<{ id: string; recipients: number }> {
  const as = client(e2e.api.app, p);
  const created = await as.post('/campaigns', {
    name: 'c',
    subject: 'News',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">Preferences</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    ...body,
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  expect((await as.post(`/campaigns/${id}/send`, {})).status).toBe(200);
  return waitFor(
    async () => {
      const c = (await as.get(`/campaigns/${id}`)).body.data;
      return c.status === 'SENT' ? { id, recipients: c.recipients as number } : undefined;
    },
    30_000,
    'campaign SENT',
  );
}

const acceptedTo = async (addresses: string[]) =>
  (await sesSendsTo(addresses)).map((s) => s.to[0].toLowerCase()).sort();

test('a campaign to a topic reaches exactly its subscribers; its one-click unsubscribe leaves that topic only', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const news = await topic(p, 'News', 'opt_out');
  const deals = await topic(p, 'Deals', 'opt_in');
  const byDefault = recipient('tdef');
  const optedOut = recipient('tout');
  const optedIn = recipient('tin');
  const globallyOff = recipient('toff');
  const inDeals = recipient('tdeal');
  await contact(p, byDefault);
  await contact(p, optedOut, { topics: [{ topicId: news, subscribed: false }] });
  const optedInId = await contact(p, optedIn, { topics: [{ topicId: news, subscribed: true }] });
  await contact(p, globallyOff, {
    subscribed: false,
    topics: [
      { topicId: news, subscribed: true },
      { topicId: deals, subscribed: true },
    ],
  });
  await contact(p, inDeals, { topics: [{ topicId: deals, subscribed: true }] });
  const everyone = [byDefault, optedOut, optedIn, globallyOff, inDeals];

  const first = await sendCampaign(p, { topicId: news });
  expect(first.recipients).toBe(3);
  expect(await acceptedTo(everyone)).toEqual([byDefault, optedIn, inDeals].sort());
  const dealsCampaign = await sendCampaign(p, { topicId: deals });
  expect(dealsCampaign.recipients).toBe(1);
  expect((await sesSendsTo([inDeals])).length).toBe(2);

  // The topic mail's List-Unsubscribe carries the topic in its token (64 characters).
  const [send] = (await sesSendsTo([optedIn])).slice(-1);
  const mail = await parseMail(send);
  const header = mail.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '';
  const url = /<(http[^>]+)>/.exec(header)?.[1];
  expect(url).toMatch(new RegExp(`^${e2e.config.publicUrl}/unsubscribe/[A-Za-z0-9_-]{64}$`));
  const path = new URL(url!).pathname;
  const oneClick = await request(e2e.api.app)
    .post(path)
    .set('Accept', 'application/json')
    .type('form')
    .send('List-Unsubscribe=One-Click');
  expect(oneClick.status).toBe(200);
  expect(oneClick.body.data).toMatchObject({ topicId: news, changed: true });

  // Only News changed: the contact stays globally subscribed and in Deals' default.
  const after = (await as.get(`/contacts/${optedInId}`)).body.data;
  expect(after.subscribed).toBe(true);
  expect(after.topics).toEqual([
    { topicId: news, name: 'News', subscribed: false, explicit: true },
    { topicId: deals, name: 'Deals', subscribed: false, explicit: false },
  ]);
  const [emailRow] = await e2e.api.database.db
    .select({ id: emails.id, topicId: emails.topicId })
    .from(emails)
    .where(and(eq(emails.campaignId, first.id), eq(emails.contactId, optedInId)));
  expect(emailRow.topicId).toBe(news);
  const evs = await e2e.api.database.db
    .select()
    .from(events)
    .where(and(eq(events.contactId, optedInId), eq(events.name, 'contact.topic_unsubscribed')));
  expect(evs.map((e) => e.data)).toEqual([
    { topicId: news, topicName: 'News', method: 'one-click', emailId: emailRow.id },
  ]);
  expect(
    await e2e.api.database.db
      .select()
      .from(events)
      .where(and(eq(events.contactId, optedInId), eq(events.name, 'contact.unsubscribed'))),
  ).toEqual([]);
  // Leaving the campaign's topic through its email counts on the campaign, once, and shows on the email's timeline.
  const unsubscribedOn = async () => (await as.get(`/campaigns/${first.id}/stats`)).body.data.unsubscribed as number;
  expect(await unsubscribedOn()).toBe(1);
  const timeline = await e2e.api.database.db
    .select({ data: emailEvents.data })
    .from(emailEvents)
    .where(and(eq(emailEvents.emailId, emailRow.id), eq(emailEvents.type, 'unsubscribed')));
  expect(timeline.map((t) => t.data)).toEqual([
    { emailId: emailRow.id, campaignId: first.id, method: 'one-click', topicId: news },
  ]);
  const again = await request(e2e.api.app)
    .post(path)
    .set('Accept', 'application/json')
    .type('form')
    .send('List-Unsubscribe=One-Click');
  expect(again.body.data).toMatchObject({ topicId: news, changed: false });
  expect(await unsubscribedOn()).toBe(1);

  // The next News campaign skips them; a campaign without a topic still reaches them.
  expect((await sendCampaign(p, { topicId: news })).recipients).toBe(2);
  const all = await sendCampaign(p, {});
  expect(all.recipients).toBe(4);
  expect((await sesSendsTo([optedIn])).length).toBe(2);
});

test('an email of a topic left between fan-out and sending is held back at send time (suppressed, topic_unsubscribed)', async () => {
  const p = await createTestProject(e2e.api.database);
  const news = await topic(p, 'News', 'opt_out');
  const to = recipient('tlate');
  const id = await contact(p, to);
  // A paused campaign holds its fanned-out emails queued; the contact leaves the topic meanwhile.
  const as = client(e2e.api.app, p);
  const created = await as.post('/campaigns', {
    name: 'c',
    subject: 'S',
    body: '<a href="{{unsubscribeUrl}}">u</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    topicId: news,
  });
  const campaignId = created.body.data.id as string;
  await e2e.api.database.db.execute(
    sql`insert into contact_topics (contact_id, topic_id, project_id, subscribed) values (${id}::uuid, ${news}::uuid, ${p.id}::uuid, false)`,
  );
  await e2e.api.database.db.execute(sql`
    insert into emails (id, project_id, contact_id, campaign_id, marketing, source, to_email, from_email, status, topic_id)
    values (gen_random_uuid(), ${p.id}::uuid, ${id}::uuid, ${campaignId}::uuid, true, 'campaign', ${to}, ${`news@${p.domain}`}, 'queued', ${news}::uuid)`);
  const [row] = await e2e.api.database.db
    .select({ id: emails.id })
    .from(emails)
    .where(eq(emails.campaignId, campaignId));
  await e2e.api.queues.send.add('send', { emailId: row.id, projectId: p.id }, { jobId: row.id });
  const done = await waitFor(
    async () => {
      const e = (await as.get(`/emails/${row.id}`)).body.data;
      return e.status === 'suppressed' ? e : undefined;
    },
    20_000,
    'email suppressed',
  );
  expect(done.timeline.at(-1)).toMatchObject({ type: 'suppressed', data: { cause: 'topic_unsubscribed' } });
  expect(await sesSendsTo([to])).toEqual([]);
});

test('double opt-in: the confirmation email arrives, its page confirms nothing, the POST confirms with proof, once', async () => {
  const p = await createTestProject(e2e.api.database);
  await createWebhookEndpoint(e2e.api.database.db, p.id, {
    url: 'https://hooks.example.com/c',
    eventTypes: ['contact.*'],
    secret: 'whsec_x',
  });
  const as = client(e2e.api.app, p);
  const news = await topic(p, 'News', 'opt_out');
  const to = recipient('doi');
  const created = await as.post('/contacts', {
    email: to,
    doubleOptIn: true,
    topicIds: [news],
    confirmationFrom: `hello@${p.domain}`,
  });
  expect(created.status).toBe(201);
  expect(created.body.data.subscribed).toBe(false);
  const { id: confirmationId, emailId } = created.body.data._meta.confirmation;
  const id = created.body.data.id as string;
  // Unconfirmed: unsubscribed globally, and from the topic despite its opt-out default.
  expect((await as.get(`/contacts/${id}`)).body.data.topics[0]).toMatchObject({ topicId: news, subscribed: false });
  expect((await sendCampaign(p, { topicId: news })).recipients).toBe(0);

  const [send] = await waitFor(
    async () => {
      const s = await sesSendsTo([to]);
      return s.length > 0 ? s : undefined;
    },
    20_000,
    'confirmation email',
  );
  const mail = await parseMail(send);
  expect(mail.subject).toBe('Please confirm your subscription');
  // The template engine escapes the link for the attribute (`=` as `&#x3D;`), as a browser reads it back.
  const link = /href="([^"]+\/confirm\?token[^"]+)"/.exec(String(mail.html))?.[1];
  expect(link).toBeDefined();
  const url = new URL(link!.replace(/&#x3D;/g, '=').replace(/&amp;/g, '&'));
  const token = url.searchParams.get('token')!;

  const pageRes = await request(e2e.api.app).get(`${url.pathname}${url.search}`);
  expect(pageRes.status).toBe(200);
  expect(pageRes.text).toContain('<form method="post"');
  expect(pageRes.headers['content-security-policy']).toContain("default-src 'none'");
  expect((await as.get(`/contacts/${id}`)).body.data.subscribed).toBe(false);
  expect(
    (
      await request(e2e.api.app)
        .post('/confirm')
        .type('form')
        // One character changed in the middle: a base64url string's last character may carry
        // only padding bits, and changing those leaves the decoded token as it was.
        .send({ token: `${token.slice(0, 30)}${token[30] === 'A' ? 'B' : 'A'}${token.slice(31)}` })
    ).status,
  ).toBe(404);

  const confirmed = await request(e2e.api.app)
    .post('/confirm')
    .set('User-Agent', 'ConsentBrowser/1.0')
    .type('form')
    .send({ token });
  expect(confirmed.status).toBe(200);
  expect(confirmed.text).toContain('Subscription confirmed');
  const again = await request(e2e.api.app)
    .post('/confirm')
    .set('Accept', 'application/json')
    .type('form')
    .send({ token });
  expect(again.body.data).toEqual({ email: to, confirmed: true, changed: false });

  const after = (await as.get(`/contacts/${id}`)).body.data;
  expect(after.subscribed).toBe(true);
  expect(after.topics[0]).toMatchObject({ topicId: news, subscribed: true, explicit: true });
  expect(after.confirmations).toEqual([
    expect.objectContaining({
      id: confirmationId,
      status: 'confirmed',
      emailId,
      topicIds: [news],
      userAgent: 'ConsentBrowser/1.0',
      ip: expect.any(String),
      confirmedAt: expect.any(String),
    }),
  ]);
  const names = (
    await e2e.api.database.db.select({ name: events.name }).from(events).where(eq(events.contactId, id))
  ).map((e) => e.name);
  expect(names.filter((n) => n === 'contact.confirmed')).toHaveLength(1);
  // One statement writes both deliveries: their UUIDv7 ids can share a millisecond, so the order is by type.
  const hooks = await e2e.api.database.db.execute<{ event_type: string; payload: { data: Record<string, unknown> } }>(
    sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type in ('contact.confirmed', 'contact.topic_subscribed') order by event_type, id`,
  );
  expect(hooks.rows.map((h) => h.event_type)).toEqual(['contact.confirmed', 'contact.topic_subscribed']);
  expect(hooks.rows[1].payload.data).toMatchObject({ contactId: id, topicId: news, method: 'confirmation', emailId });
  expect(hooks.rows[0].payload.data).toMatchObject({
    contactId: id,
    email: to,
    confirmationId,
    topicIds: [news],
    userAgent: 'ConsentBrowser/1.0',
  });
  expect((await sendCampaign(p, { topicId: news })).recipients).toBe(1);
});

test("double opt-in expiry: the worker erases an unconfirmed contact it created, and only marks an older contact's confirmation", async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const fresh = await as.post('/contacts', {
    email: recipient('doix'),
    doubleOptIn: true,
    confirmationFrom: `hello@${p.domain}`,
  });
  const existingId = await contact(p, recipient('doie'), { subscribed: false });
  const existing = await as.post('/contacts', {
    email: (await as.get(`/contacts/${existingId}`)).body.data.email,
    doubleOptIn: true,
    confirmationFrom: `hello@${p.domain}`,
  });
  expect(existing.status).toBe(200);
  const recent = await as.post('/contacts', {
    email: recipient('doir'),
    doubleOptIn: true,
    confirmationFrom: `hello@${p.domain}`,
  });
  // Both older than DOUBLE_OPT_IN_EXPIRY_HOURS (48); the third is not.
  await e2e.api.database.db.execute(sql`update contact_confirmations set created_at = now() - interval '49 hours'
    where id in (${fresh.body.data._meta.confirmation.id}::uuid, ${existing.body.data._meta.confirmation.id}::uuid)`);

  await waitFor(
    async () => (await as.get(`/contacts/${fresh.body.data.id}`)).status === 404,
    20_000,
    'the unconfirmed new contact erased',
  );
  const kept = await waitFor(
    async () => {
      const c = (await as.get(`/contacts/${existingId}`)).body.data;
      return c.confirmations[0]?.status === 'expired' ? c : undefined;
    },
    20_000,
    "the older contact's confirmation expired",
  );
  expect(kept.subscribed).toBe(false);
  expect((await as.get(`/contacts/${recent.body.data.id}`)).body.data.confirmations[0].status).toBe('pending');
});

test('workflow SEND_EMAIL with a topic: a MARKETING template skips a contact outside the topic; a TRANSACTIONAL one ignores it', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  const news = await topic(p, 'News', 'opt_in');
  const tpl = async (type: string) =>
    (
      await as.post('/templates', {
        name: type,
        subject: type,
        body: '<p>Hi</p><a href="{{unsubscribeUrl}}">u</a>',
        type,
        from: `wf@${p.domain}`,
      })
    ).body.data.id as string;
  const [marketing, transactional] = [await tpl('MARKETING'), await tpl('TRANSACTIONAL')];
  const created = await as.post('/workflows', { name: 'wf', trigger: { type: 'MANUAL' } });
  const wid = created.body.data.id as string;
  const foreign = await topic(await createTestProject(e2e.api.database), 'Theirs', 'opt_out');
  const refused = await as.put(`/workflows/${wid}/graph`, {
    steps: [{ key: 'm', type: 'SEND_EMAIL', config: { templateId: marketing, topicId: foreign } }],
    transitions: [{ from: null, to: 'm' }],
  });
  expect(refused.status).toBe(422);
  expect(refused.body.error.errors[0].field).toMatch(/topicId$/);
  const graph = {
    steps: [
      { key: 'm', type: 'SEND_EMAIL', config: { templateId: marketing, topicId: news } },
      { key: 't', type: 'SEND_EMAIL', config: { templateId: transactional, topicId: news } },
    ],
    transitions: [
      { from: null, to: 'm' },
      { from: 'm', to: 't', branch: 'next' },
    ],
  };
  expect((await as.put(`/workflows/${wid}/graph`, graph)).status).toBe(200);
  expect((await as.patch(`/workflows/${wid}`, { enabled: true })).status).toBe(200);
  const member = recipient('wfin');
  const outsider = recipient('wfout');
  await contact(p, member, { topics: [{ topicId: news, subscribed: true }] });
  await contact(p, outsider);
  const run = async (email: string) => {
    const started = await as.post(`/workflows/${wid}/executions`, { email });
    expect(started.status).toBe(201);
    const eid = started.body.data.id as string;
    return waitFor(
      async () => {
        const x = (await as.get(`/workflows/${wid}/executions/${eid}`)).body.data;
        return x.status === 'COMPLETED' ? (x.steps as { status: string }[]).map((s) => s.status) : undefined;
      },
      20_000,
      'execution COMPLETED',
    );
  };
  expect(await run(member)).toEqual(['COMPLETED', 'COMPLETED']);
  expect(await run(outsider)).toEqual(['SKIPPED', 'COMPLETED']);
  await waitFor(async () => (await sesSendsTo([member, outsider])).length === 3, 20_000, 'three emails sent');
  expect((await sesSendsTo([outsider])).length).toBe(1);
  const [row] = await e2e.api.database.db
    .select({ topicId: emails.topicId, marketing: emails.marketing })
    .from(emails)
    .where(and(eq(emails.toEmail, member), eq(emails.marketing, true)));
  expect(row.topicId).toBe(news);
});
