/**
 * Test mode end to end (API → Postgres → Redis → worker → sink): a test key's email is built exactly as a live
 * one and stored in `test_messages` instead of reaching SES (no SES request, no rate-gate slot), ends `sent` with
 * `test: true`, and announces `email.sent` with `test: true`. A test campaign fans out test emails and announces its
 * `campaign.*` events with `test: true`. The stored MIME equals a live send's of the same request byte for byte,
 * apart from what is per message by design:
 *
 * - `Message-ID` (`<email id@sender domain>`) and `Date`;
 * - in marketing mail only, the unsubscribe token (body and `List-Unsubscribe`). It must differ per email: it names
 *   the email it was sent in (so the unsubscribe is attributed to that email and its campaign, and a test email's
 *   link records a *test* `contact.unsubscribed`), signed with the project's key. A token per contact would lose
 *   both. The MIME boundaries follow from the content without the token (`mimeBaseBoundary`), so they are equal.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { addDomain, createProject, type CreatedProject } from '@mailroom/projects/queries/projects';
import { emails } from '@mailroom/db/schema/emails';
import { projects } from '@mailroom/db/schema/projects';
import { testMessages } from '@mailroom/db/schema/deliverability';
import { type RunningWorker } from '../../apps/worker/src/main';
import { recipient, sesRecordedTo, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, type Receiver } from '../support/receiver';

// A database of its own: the worker's reconciler adopts every pending email of its database.
const e2e = useE2e({
  isolated: true,
  env: { SES_MAX_SEND_RATE: '50', CAMPAIGN_TICK_MS: '100', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' },
});
let receiver: Receiver;
let p: CreatedProject & { domain: string };
const startedAt = Math.floor(Date.now() / 1000) - 1;

beforeAll(async () => {
  receiver = await startReceiver();
  e2e.onTeardown(() => receiver.close());
  const created = await createProject(e2e.api.database.db, 'test mode e2e');
  const domain = `tm${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(e2e.api.database.db, created.id, domain, true);
  p = { ...created, domain };
  const hook = await request(e2e.api.app)
    .post('/webhooks/endpoints')
    .set('Authorization', `Bearer ${p.secretKey}`)
    .send({ url: receiver.url, eventTypes: ['email.*', 'campaign.*'] });
  expect(hook.status).toBe(201);
});

const as = (key: string) => ({
  post: (path: string, body: object) =>
    request(e2e.api.app).post(path).set('Authorization', `Bearer ${key}`).send(body),
  get: (path: string) => request(e2e.api.app).get(path).set('Authorization', `Bearer ${key}`),
});
const emailRow = async (id: string) => (await e2e.api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const waitSent = (id: string) =>
  waitFor(async () => ((await emailRow(id)).status === 'sent' ? emailRow(id) : undefined), 20_000, `email ${id} sent`);
/** Observations of a worker histogram (all label values). */
const observations = async (h: RunningWorker['metrics']['gateWait']) =>
  (await h.get()).values.filter((v) => v.metricName?.endsWith('_count')).reduce((n, v) => n + v.value, 0);
const rawOf = async (id: string) => {
  const res = await as(p.testSecretKey)
    .get(`/emails/${id}/raw`)
    .buffer(true)
    .parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });
  expect(res.status).toBe(200);
  expect(res.headers['content-type']).toMatch(/^message\/rfc822/);
  return res.body as Buffer;
};
const hooksFor = (emailId: string) =>
  receiver.received
    .map((r) => JSON.parse(r.body) as { type: string; data: Record<string, unknown> })
    .filter((h) => h.data.emailId === emailId);

test("a test key's email reaches no SES call and no rate-gate slot, ends sent with test: true, and announces email.sent with test: true", async () => {
  const gateBefore = await observations(e2e.worker.metrics.gateWait);
  const sesBefore = await observations(e2e.worker.metrics.sesSend);
  const to = recipient('sink');
  const res = await as(p.testSecretKey).post('/v1/send', {
    to,
    from: `hello@${p.domain}`,
    subject: 'Test {{n}}',
    body: '<p>n = {{n}}</p>',
    data: { n: 7 },
  });
  expect(res.status).toBe(202);
  const id = res.body.data.emails[0].email as string;
  const row = await waitSent(id);
  expect(row).toMatchObject({ test: true, messageId: `test-${id}`, renderedSubject: 'Test 7' });
  expect((await as(p.secretKey).get(`/emails/${id}`)).body.data).toMatchObject({
    status: 'sent',
    test: true,
    messageId: `test-${id}`,
  });

  const hook = await waitFor(
    async () => hooksFor(id).find((h) => h.type === 'email.sent'),
    20_000,
    'the email.sent webhook',
  );
  expect(hook.data).toMatchObject({ emailId: id, messageId: `test-${id}`, status: 'sent', to, test: true });

  const raw = (await rawOf(id)).toString('utf8');
  expect(raw).toContain(`Message-ID: <${id}@${p.domain}>`);
  expect(raw).toContain('Subject: Test 7');
  const [stored] = await e2e.api.database.db.select().from(testMessages).where(eq(testMessages.emailId, id));
  expect(stored.projectId).toBe(p.id);

  // Nothing reached SES: not the recording proxy, not the emulator's store, and no gate slot or SES call here.
  expect(await sesRecordedTo([to])).toEqual([]);
  const store = await (await fetch(`${process.env.TEST_SES_EMULATOR}/store?since=${startedAt}`)).json();
  expect(JSON.stringify(store)).not.toContain(to);
  expect(await observations(e2e.worker.metrics.gateWait)).toBe(gateBefore);
  expect(await observations(e2e.worker.metrics.sesSend)).toBe(sesBefore);
});

/** Replaces what is per message by design (see the module notes) so that two builds of one request compare. */
function normalise(raw: string, email: { id: string; token?: string }): string {
  const s = raw
    .replace(`Message-ID: <${email.id}@${p.domain}>\r\n`, 'Message-ID: <MESSAGE-ID>\r\n')
    .replace(/^Date: [^\r\n]+\r\n/m, 'Date: DATE\r\n');
  if (!email.token) return s;
  // The token may be cut by a quoted-printable soft line break (`=` CRLF) in the body; it is the same length in
  // both messages, so it is cut at the same place in both.
  const token = new RegExp(
    email.token
      .split('')
      .map((c) => c.replace(/[-_]/g, '\\$&'))
      .join('(?:=\\r\\n)?'),
    'g',
  );
  return s.replace(token, 'UNSUBSCRIBE-TOKEN');
}
const boundariesOf = (raw: string) => [...new Set([...raw.matchAll(/boundary="([^"]+)"/g)].map((m) => m[1]))];

test("the stored MIME equals a live send's of the same request, apart from Message-ID, Date and a marketing email's unsubscribe token", async () => {
  const tpl = await as(p.secretKey).post('/templates', {
    name: 'news',
    type: 'MARKETING',
    subject: 'News for {{name ?? "you"}} – café ☕',
    body: '<h1>Hi {{name}}</h1><p>{{note}}</p><div>{{{banner}}}</div><p>{{user.city}}</p><p><a href="{{unsubscribeUrl}}">Unsubscribe</a></p>',
    from: `news@${p.domain}`,
    fromName: 'Newsroom Ünïcode',
    replyTo: `Support <support@${p.domain}>`,
  });
  expect(tpl.status).toBe(201);
  const to = recipient('same');
  const request = {
    to: { name: 'Bo Ström', email: to },
    template: tpl.body.data.id,
    // Marketing mail goes only to a subscribed contact; /v1/send creates contacts unsubscribed unless told.
    subscribed: true,
    data: {
      name: 'Bo',
      note: '<script>x</script> & co',
      banner: '<b>bold</b>',
      user: { city: 'Oslo' },
      once: { value: 1, persistent: false },
    },
    headers: { 'X-Campaign-Ref': 'ref-42' },
    attachments: [
      { filename: 'data.bin', content: randomBytes(3000).toString('base64'), contentType: 'application/octet-stream' },
      { filename: 'notes.txt', content: Buffer.from('hello').toString('base64') },
    ],
  };
  const testSend = await as(p.testSecretKey).post('/v1/send', request);
  const liveSend = await as(p.secretKey).post('/v1/send', request);
  expect([testSend.status, liveSend.status]).toEqual([202, 202]);
  const testId = testSend.body.data.emails[0].email as string;
  const liveId = liveSend.body.data.emails[0].email as string;
  expect((await waitSent(testId)).test).toBe(true);
  expect((await waitSent(liveId)).test).toBe(false);

  const testRaw = (await rawOf(testId)).toString('utf8');
  const [live] = await waitFor(
    async () => {
      const sends = await sesSendsTo([to]);
      return sends.length > 0 ? sends : undefined;
    },
    20_000,
    'the live send at SES',
  );
  expect(await sesRecordedTo([to])).toHaveLength(1); // only the live one reached SES
  expect(live.raw).toContain(`Message-ID: <${liveId}@${p.domain}>`);
  expect(testRaw).toContain(`Message-ID: <${testId}@${p.domain}>`);
  expect(testRaw).toContain('List-Unsubscribe-Post: List-Unsubscribe=One-Click');

  const [{ signingKey }] = await e2e.api.database.db
    .select({ signingKey: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  const a = normalise(testRaw, { id: testId, token: createUnsubscribeToken(testId, signingKey) });
  const b = normalise(live.raw, { id: liveId, token: createUnsubscribeToken(liveId, signingKey) });
  // Each normalisation really happened; the boundaries (multipart/mixed and multipart/alternative) are the same.
  expect(a.match(/UNSUBSCRIBE-TOKEN/g)?.length).toBeGreaterThanOrEqual(2);
  expect(boundariesOf(testRaw)).toHaveLength(2);
  expect(boundariesOf(live.raw)).toEqual(boundariesOf(testRaw));
  expect(a).not.toContain(testId);
  expect(a).toBe(b);

  // Transactional mail (no unsubscribe link): only Message-ID and Date differ.
  const txRequest = {
    ...request,
    template: undefined,
    from: `Billing <billing@${p.domain}>`,
    subject: 'Receipt {{note}}',
    body: '<p>Total {{user.city}} – 12 €</p>',
  };
  const txTest = await as(p.testSecretKey).post('/v1/send', txRequest);
  const txLive = await as(p.secretKey).post('/v1/send', txRequest);
  expect([txTest.status, txLive.status]).toEqual([202, 202]);
  const [txTestId, txLiveId] = [txTest.body.data.emails[0].email as string, txLive.body.data.emails[0].email as string];
  await waitSent(txTestId);
  await waitSent(txLiveId);
  const txTestRaw = (await rawOf(txTestId)).toString('utf8');
  const txLiveRaw = await waitFor(
    async () => (await sesSendsTo([to])).find((x) => x.raw.includes(`Message-ID: <${txLiveId}@`))?.raw,
    20_000,
    'the live transactional send at SES',
  );
  expect(txTestRaw).not.toContain('List-Unsubscribe');
  expect(boundariesOf(txTestRaw)).toHaveLength(2);
  expect(normalise(txTestRaw, { id: txTestId })).toBe(normalise(txLiveRaw, { id: txLiveId }));

  // Webhooks: the live email's payload has no `test`; the test email's says so.
  const liveHook = await waitFor(
    async () => hooksFor(liveId).find((h) => h.type === 'email.sent'),
    20_000,
    'the live email.sent',
  );
  expect(liveHook.data).not.toHaveProperty('test');
  const testHook = await waitFor(
    async () => hooksFor(testId).find((h) => h.type === 'email.sent'),
    20_000,
    'the test email.sent',
  );
  expect(testHook.data.test).toBe(true);
});

test('a campaign sent with a test key fans out test emails, all to the sink, and completes', async () => {
  const audience = [recipient('camp'), recipient('camp'), recipient('camp')];
  for (const email of audience)
    expect((await as(p.secretKey).post('/contacts', { email, subscribed: true })).status).toBeLessThan(300);
  const draft = await as(p.testSecretKey).post('/campaigns', {
    name: 'Test campaign',
    subject: 'Hello {{email}}',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(draft.status).toBe(201);
  const started = await as(p.testSecretKey).post(`/campaigns/${draft.body.data.id}/send`, {});
  expect(started.body.data).toMatchObject({ status: 'SENDING', test: true });
  const done = await waitFor(
    async () => {
      const c = (await as(p.secretKey).get(`/campaigns/${draft.body.data.id}`)).body.data;
      return c.status === 'SENT' ? c : undefined;
    },
    30_000,
    'the test campaign to complete',
  );
  expect(done.test).toBe(true);
  const rows = await e2e.api.database.db.select().from(emails).where(eq(emails.campaignId, draft.body.data.id));
  expect(rows.length).toBe(done.recipients);
  expect(rows.length).toBeGreaterThanOrEqual(audience.length);
  for (const row of rows) expect(row).toMatchObject({ test: true, status: 'sent', messageId: `test-${row.id}` });
  expect(await sesRecordedTo(audience)).toEqual([]);
  const mine = rows.find((r) => r.toEmail === audience[0])!;
  const raw = (await rawOf(mine.id)).toString('utf8');
  expect(raw).toContain(`Subject: Hello ${audience[0]}`);
  expect(raw).toMatch(/^List-Unsubscribe:\s+<[^>]*\/unsubscribe\//m); // the header is folded
  // Its campaign.* webhooks say it is a test campaign, as its emails' do.
  const campaignHooks = await waitFor(
    async () => {
      const got = receiver.received
        .map((r) => JSON.parse(r.body) as { type: string; data: Record<string, unknown> })
        .filter((h) => h.data.campaignId === draft.body.data.id && h.type.startsWith('campaign.'));
      return got.some((h) => h.type === 'campaign.sent') ? got : undefined;
    },
    20_000,
    'the campaign.sent webhook',
  );
  expect(campaignHooks.map((h) => h.type).sort()).toEqual(['campaign.sending', 'campaign.sent']);
  for (const h of campaignHooks) expect(h.data.test).toBe(true);
});
