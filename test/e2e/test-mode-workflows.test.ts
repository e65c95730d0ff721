/**
 * Test mode in workflows end to end (API → events → inbox → worker → sink or SES emulator), on a database of its
 * own: an event recorded with a test key starts a test execution whose SEND_EMAIL email is a test email (sink, raw
 * MIME stored, no SES request) and whose WEBHOOK call and `workflow.*` webhooks say `test: true`; the same event
 * with a live key, for the same contact, starts a live execution that sends through SES (test entries never block
 * live ones). The wake rule: a WAITING execution is woken only by an event of its own mode. A test key's manual
 * start, and a test key's contact creation (its `contact.subscribed` event), start test executions.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { addDomain, createProject, type CreatedProject } from '@mailroom/projects/queries/projects';
import { emails } from '@mailroom/db/schema/emails';
import { testMessages } from '@mailroom/db/schema/deliverability';
import { recipient, sesRecordedTo, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, type Receiver } from '../support/receiver';

const e2e = useE2e({
  isolated: true,
  env: {
    SES_MAX_SEND_RATE: '50',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WORKFLOW_INBOX_POLL_MS: '200',
    WORKFLOW_LEASE_MS: '1500',
  },
});
let receiver: Receiver;
let p: CreatedProject & { domain: string };

beforeAll(async () => {
  receiver = await startReceiver();
  e2e.onTeardown(() => receiver.close());
  const created = await createProject(e2e.api.database.db, 'test mode workflows e2e');
  const domain = `tw${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(e2e.api.database.db, created.id, domain, true);
  p = { ...created, domain };
  const hook = await as(p.secretKey).post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['workflow.*'] });
  expect(hook.status).toBe(201);
});

function as(key: string) {
  return {
    post: (path: string, body: object) =>
      request(e2e.api.app).post(path).set('Authorization', `Bearer ${key}`).send(body),
    get: (path: string) => request(e2e.api.app).get(path).set('Authorization', `Bearer ${key}`),
    put: (path: string, body: object) =>
      request(e2e.api.app).put(path).set('Authorization', `Bearer ${key}`).send(body),
    patch: (path: string, body: object) =>
      request(e2e.api.app).patch(path).set('Authorization', `Bearer ${key}`).send(body),
  };
}

type Exec = {
  id: string;
  status: string;
  test: boolean;
  contactId: string;
  exitReason: string | null;
  steps: { type: string; status: string; branch: string | null; output: Record<string, unknown> | null }[];
};
type Hook = { type: string; data: Record<string, unknown> } & Record<string, unknown>;

async function workflow(
  trigger: object,
  graph: { steps: object[]; transitions: object[] },
  extra: object = {},
): Promise<string> {
  const created = await as(p.secretKey).post('/workflows', { name: 'wf', trigger, ...extra });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  const put = await as(p.secretKey).put(`/workflows/${id}/graph`, graph);
  expect([put.status, put.body.error]).toEqual([200, undefined]);
  expect((await as(p.secretKey).patch(`/workflows/${id}`, { enabled: true })).status).toBe(200);
  return id;
}

async function template(): Promise<string> {
  const res = await as(p.secretKey).post('/templates', {
    name: 't',
    subject: 'Welcome {{trigger.plan}}',
    body: '<p>Hi {{email}}</p>',
    from: `wf@${p.domain}`,
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

/** The execution of `wid` for `contactId` with `test`, once its status is one of `statuses`, with its step history. */
async function settled(wid: string, contactId: string, test: boolean, statuses: string[]): Promise<Exec> {
  return waitFor(
    async () => {
      const list = (await as(p.secretKey).get(`/workflows/${wid}/executions?limit=100&contactId=${contactId}`)).body
        .data.items as Exec[];
      const x = list.find((e) => e.test === test && statuses.includes(e.status));
      return x && ((await as(p.secretKey).get(`/workflows/${wid}/executions/${x.id}`)).body.data as Exec);
    },
    30_000,
    `${test ? 'test' : 'live'} execution of ${contactId} in ${statuses.join('/')}`,
  );
}

const emailRow = async (id: string) => (await e2e.api.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const waitSent = (id: string) =>
  waitFor(async () => ((await emailRow(id))?.status === 'sent' ? emailRow(id) : undefined), 30_000, `email ${id} sent`);
const hooks = (): Hook[] => receiver.received.map((r) => JSON.parse(r.body) as Hook);

test('a test-key event starts a test execution: its email goes to the sink, its WEBHOOK call and workflow.* webhooks say test; the live event sends through SES', async () => {
  const tpl = await template();
  const wid = await workflow(
    { type: 'EVENT', event: 'signup' },
    {
      steps: [
        { key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl } },
        { key: 'call', type: 'WEBHOOK', config: { url: receiver.url } },
        { key: 'end', type: 'EXIT', config: { reason: 'welcomed' } },
      ],
      transitions: [
        { from: null, to: 'send' },
        { from: 'send', to: 'call' },
        { from: 'call', to: 'end' },
      ],
    },
  );
  const to = recipient('wftest');

  // A public test key, as a browser would track.
  const tracked = await as(p.testPublicKey).post('/v1/track', { email: to, event: 'signup', data: { plan: 'trial' } });
  expect(tracked.status).toBe(200);
  const contactId = tracked.body.data.contact as string;
  const events = (await as(p.secretKey).get(`/events?contactId=${contactId}&name=signup`)).body.data.items;
  expect(events.map((e: { test: boolean }) => e.test)).toEqual([true]);

  const tx = await settled(wid, contactId, true, ['EXITED']);
  expect(tx.steps.map((s) => [s.type, s.status])).toEqual([
    ['SEND_EMAIL', 'COMPLETED'],
    ['WEBHOOK', 'COMPLETED'],
    ['EXIT', 'COMPLETED'],
  ]);
  const testEmailId = tx.steps[0].output!.emailId as string;
  const testRow = await waitSent(testEmailId);
  expect(testRow).toMatchObject({
    test: true,
    source: 'workflow',
    workflowExecutionId: tx.id,
    messageId: `test-${testEmailId}`,
    renderedSubject: 'Welcome trial',
  });
  const [stored] = await e2e.api.database.db.select().from(testMessages).where(eq(testMessages.emailId, testEmailId));
  expect(stored.raw.toString('utf8')).toContain('Subject: Welcome trial');
  const raw = await as(p.testSecretKey).get(`/emails/${testEmailId}/raw`);
  expect(raw.status).toBe(200);
  expect(await sesRecordedTo([to])).toEqual([]); // the sink took it: no SES request at all

  // The WEBHOOK step still called the (user's own) URL, and said it was a test; so did workflow.started/exited.
  const call = await waitFor(
    async () => hooks().find((h) => h.type === 'workflow.webhook' && h.executionId === tx.id),
    20_000,
    'the test WEBHOOK call',
  );
  expect(call.test).toBe(true);
  const testHooks = await waitFor(
    async () => {
      const got = hooks().filter(
        (h) => h.type.startsWith('workflow.') && h.type !== 'workflow.webhook' && h.data.executionId === tx.id,
      );
      return got.length >= 2 && got;
    },
    20_000,
    'workflow.* webhooks of the test execution',
  );
  expect(testHooks.map((h) => [h.type, h.data.test]).sort()).toEqual([
    ['workflow.exited', true],
    ['workflow.started', true],
  ]);

  // The same event with a live key, for the same contact: a live execution (the test entry did not use up the
  // contact's one entry), whose email reaches SES.
  expect((await as(p.publicKey).post('/v1/track', { email: to, event: 'signup', data: { plan: 'pro' } })).status).toBe(
    200,
  );
  const lx = await settled(wid, contactId, false, ['EXITED']);
  expect(lx.id).not.toBe(tx.id);
  const liveEmailId = lx.steps[0].output!.emailId as string;
  const liveRow = await waitSent(liveEmailId);
  expect(liveRow).toMatchObject({ test: false, renderedSubject: 'Welcome pro' });
  expect(liveRow.messageId).not.toMatch(/^test-/);
  const sends = await waitFor(
    async () => {
      const s = await sesSendsTo([to]);
      return s.length > 0 && s;
    },
    20_000,
    'the live email at SES',
  );
  expect(sends).toHaveLength(1);
  expect(sends[0].raw).toContain('Subject: Welcome pro');
  expect(await sesRecordedTo([to])).toHaveLength(1);
  const liveCall = await waitFor(
    async () => hooks().find((h) => h.type === 'workflow.webhook' && h.executionId === lx.id),
    20_000,
    'the live WEBHOOK call',
  );
  expect(liveCall).not.toHaveProperty('test');
  const liveStarted = await waitFor(
    async () => hooks().find((h) => h.type === 'workflow.started' && h.data.executionId === lx.id),
    20_000,
    'live workflow.started',
  );
  expect(liveStarted.data).not.toHaveProperty('test');
  expect(
    (await as(p.secretKey).get(`/workflows/${wid}/executions?contactId=${contactId}`)).body.data.items,
  ).toHaveLength(2);
});

test('wake rule: a WAITING execution takes only an event of its own mode (test wakes test, live wakes live)', async () => {
  // Long enough for all four to wait and get their `confirm` on a busy machine; the cross-mode ones then time out.
  const waitMs = 15_000;
  const wid = await workflow(
    { type: 'EVENT', event: 'start' },
    {
      steps: [
        {
          key: 'wait',
          type: 'WAIT_FOR_EVENT',
          config: { event: 'confirm', timeout: { amount: waitMs / 1000, unit: 'seconds' } },
        },
        { key: 'viaEvent', type: 'EXIT', config: { reason: 'event' } },
        { key: 'viaTimeout', type: 'EXIT', config: { reason: 'timeout' } },
      ],
      transitions: [
        { from: null, to: 'wait' },
        { from: 'wait', to: 'viaEvent', branch: 'event' },
        { from: 'wait', to: 'viaTimeout', branch: 'timeout' },
      ],
    },
  );
  const live = { key: p.publicKey, test: false };
  const test = { key: p.testPublicKey, test: true };
  // [who starts it, who sends `confirm`, the branch the wait must take]
  const cases = [
    { start: live, confirm: test, branch: 'timeout' },
    { start: test, confirm: live, branch: 'timeout' },
    { start: live, confirm: live, branch: 'event' },
    { start: test, confirm: test, branch: 'event' },
  ].map((c) => ({ ...c, email: recipient('wake') }));
  const contacts: string[] = [];
  for (const c of cases) {
    const res = await as(c.start.key).post('/v1/track', { email: c.email, event: 'start' });
    expect(res.status).toBe(200);
    contacts.push(res.body.data.contact as string);
  }
  // All four wait; then each gets its `confirm`, well inside the wait.
  const waiting = await Promise.all(cases.map((c, i) => settled(wid, contacts[i], c.start.test, ['WAITING'])));
  for (const c of cases)
    expect(
      (
        await as(c.confirm.key).post('/v1/track', {
          email: c.email,
          event: 'confirm',
          data: { by: c.confirm.test ? 'test' : 'live' },
        })
      ).status,
    ).toBe(200);
  const ended = await Promise.all(cases.map((c, i) => settled(wid, contacts[i], c.start.test, ['EXITED'])));
  ended.forEach((x, i) => {
    expect(x.id).toBe(waiting[i].id);
    expect([x.test, x.exitReason, x.steps[0].type, x.steps[0].branch]).toEqual([
      cases[i].start.test,
      cases[i].branch,
      'WAIT_FOR_EVENT',
      cases[i].branch,
    ]);
  });
  // Woken by its own mode's event: the context carries it.
  const woken = await as(p.secretKey).get(`/workflows/${wid}/executions/${ended[3].id}`);
  expect(woken.body.data.context.event.data).toEqual({ by: 'test' });
});

test("a test key's manual start, and a test key's new subscribed contact, start test executions whose email goes to the sink", async () => {
  const tpl = await template();
  const graph = {
    steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl } }],
    transitions: [{ from: null, to: 'send' }],
  };
  const manual = await workflow({ type: 'MANUAL' }, graph);
  const onSubscribe = await workflow({ type: 'EVENT', event: 'contact.subscribed' }, graph);

  // POST /contacts with a test key: its contact.subscribed event is a test event.
  const to = recipient('sub');
  const created = await as(p.testSecretKey).post('/contacts', { email: to, subscribed: true });
  expect(created.status).toBe(201);
  const contactId = created.body.data.id as string;
  const bySubscribe = await settled(onSubscribe, contactId, true, ['COMPLETED']);

  // A manual start with a test key answers test: true; with a live key, test: false.
  const started = await as(p.testSecretKey).post(`/workflows/${manual}/executions`, {
    contactId,
    data: { plan: 'manual' },
  });
  expect(started.status).toBe(201);
  expect(started.body.data).toMatchObject({ status: 'RUNNING', test: true });
  const byHand = await settled(manual, contactId, true, ['COMPLETED']);

  for (const x of [bySubscribe, byHand]) {
    const row = await waitSent(x.steps[0].output!.emailId as string);
    expect(row).toMatchObject({ test: true, toEmail: to, messageId: `test-${row.id}` });
  }
  expect(await sesRecordedTo([to])).toEqual([]);
  // The contact entered the manual workflow in test mode only: a live start is still possible (no re-entry).
  const liveStart = await as(p.secretKey).post(`/workflows/${manual}/executions`, { contactId });
  expect(liveStart.status).toBe(201);
  expect(liveStart.body.data.test).toBe(false);
});
