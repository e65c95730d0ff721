/**
 * Workflows end to end (API → events → inbox → worker → SES emulator / webhook receiver), on a database of its
 * own: tracked and system events start executions in the worker; a DELAY delays by its length; WAIT_FOR_EVENT
 * takes the event or the timeout branch exactly once, even when both arrive together; a cancelled execution
 * never resumes; 20 identical concurrent triggers start one execution; duplicate jobs and a crashed worker
 * repeat no effect; disabling stops new executions only; marketing mail skips unsubscribed contacts; WEBHOOK
 * calls are signed, carry a stable idempotency key and are retried.
 */
import { randomUUID } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import { contacts } from '@mailroom/db/schema/contacts';
import { emails } from '@mailroom/db/schema/emails';
import { projects } from '@mailroom/db/schema/projects';
import { workflowExecutions, workflowInbox } from '@mailroom/db/schema/workflows';
import {
  client,
  createTestProject,
  deletePrefix,
  exited,
  recipient,
  sesSendsTo,
  spawnWorker,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, verifyStandardWebhook, type Receiver } from '../support/receiver';

const e2e = useE2e({
  isolated: true,
  env: {
    SES_MAX_SEND_RATE: '50',
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WORKFLOW_LEASE_MS: '1500',
    WORKFLOW_RETRY_BACKOFF_MS: '200',
    WORKFLOW_INBOX_POLL_MS: '200',
    RECONCILE_INTERVAL_MS: '500',
    RECONCILE_AFTER_MS: '1000',
    SEGMENT_REFRESH_MS: '300',
  },
});
let receiver: Receiver;
beforeAll(async () => {
  receiver = await startReceiver();
  e2e.onTeardown(() => receiver.close());
});

type Exec = {
  id: string;
  status: string;
  contactId: string;
  exitReason: string | null;
  steps: {
    type: string;
    status: string;
    branch: string | null;
    output: Record<string, unknown> | null;
    startedAt: string;
    attempts: number;
    id: string;
  }[];
};

async function setup(
  p: TestProject,
  trigger: object,
  graph: { steps: object[]; transitions: object[] },
  extra: object = {},
) {
  const c = client(e2e.api.app, p);
  const created = await c.post('/workflows', { name: 'wf', trigger, ...extra });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  const put = await c.put(`/workflows/${id}/graph`, graph);
  expect(put.status).toBe(200);
  expect((await c.patch(`/workflows/${id}`, { enabled: true })).status).toBe(200);
  return id;
}

async function template(p: TestProject, type: 'TRANSACTIONAL' | 'MARKETING' = 'TRANSACTIONAL') {
  const res = await client(e2e.api.app, p).post('/templates', {
    name: 't',
    subject: 'Hello {{trigger.plan}}',
    body: '<p>Hi {{email}}</p>',
    type,
    from: `wf@${p.domain}`,
  });
  return res.body.data.id as string;
}

const track = (p: TestProject, email: string, event: string, data: object = {}, subscribed?: boolean) =>
  client(e2e.api.app, p).post('/v1/track', { email, event, data, ...(subscribed === undefined ? {} : { subscribed }) });

async function executions(
  p: TestProject,
  wid: string,
  query = '',
): Promise<{ id: string; status: string; contactId: string }[]> {
  const res = await client(e2e.api.app, p).get(`/workflows/${wid}/executions?limit=100${query}`);
  return res.body.data.items;
}

async function execution(p: TestProject, wid: string, eid: string): Promise<Exec> {
  return (await client(e2e.api.app, p).get(`/workflows/${wid}/executions/${eid}`)).body.data;
}

/**
 * Waits until the worker has taken every inbox row of the project: the events recorded so far have started or
 * woken whatever executions they will (the rows, the executions they start and the wakes commit together).
 */
async function inboxDrained(p: TestProject): Promise<void> {
  await waitFor(
    async () =>
      (
        await e2e.api.database.db
          .select({ id: workflowInbox.id })
          .from(workflowInbox)
          .where(eq(workflowInbox.projectId, p.id))
      ).length === 0,
    15_000,
    'the workflow inbox drained',
  );
}

/** Waits until no job of execution `eid` is waiting, delayed or running (finished jobs are removed at once). */
async function noJobFor(eid: string): Promise<void> {
  await waitFor(
    async () => {
      const jobs = await e2e.api.queues.workflow.getJobs(['waiting', 'prioritized', 'delayed', 'active']);
      return !jobs.some((j) => j?.data.executionId === eid);
    },
    15_000,
    `no workflow job for execution ${eid}`,
  );
}

/** Waits for the only execution of `wid` for the contact of `email` to reach one of `statuses`. */
async function settled(
  p: TestProject,
  wid: string,
  email: string,
  statuses: string[],
  timeoutMs = 15_000,
): Promise<Exec> {
  const contact = (await client(e2e.api.app, p).get(`/contacts?search=${encodeURIComponent(email)}`)).body.data
    .items[0];
  return waitFor(
    async () => {
      const list = await executions(p, wid, `&contactId=${contact.id}`);
      if (list.length !== 1 || !statuses.includes(list[0].status)) return undefined;
      return execution(p, wid, list[0].id);
    },
    timeoutMs,
    `execution of ${email} in ${statuses.join('/')}`,
  );
}

test('a tracked event starts the workflow in the worker; SEND_EMAIL sends one email; the history lists each step; workflow.* webhooks', async () => {
  const p = await createTestProject(e2e.api.database);
  const tpl = await template(p);
  const endpoint = await client(e2e.api.app, p).post('/webhooks/endpoints', {
    url: `${receiver.url}/events`,
    eventTypes: ['workflow.*'],
  });
  expect(endpoint.status).toBe(201);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'signup' },
    {
      steps: [
        { key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl } },
        { key: 'end', type: 'EXIT', config: { reason: 'welcomed' } },
      ],
      transitions: [
        { from: null, to: 'send' },
        { from: 'send', to: 'end' },
      ],
    },
  );
  const to = recipient('signup');
  const tracked = await track(p, to, 'signup', { plan: 'pro' });
  expect(tracked.status).toBe(200);
  const x = await settled(p, wid, to, ['EXITED']);
  expect(x.exitReason).toBe('welcomed');
  expect(x.steps.map((s) => [s.type, s.status])).toEqual([
    ['SEND_EMAIL', 'COMPLETED'],
    ['EXIT', 'COMPLETED'],
  ]);
  const emailId = x.steps[0].output!.emailId as string;
  const sent = await waitFor(async () => {
    const s = await sesSendsTo([to]);
    return s.length > 0 && s;
  });
  expect(sent).toHaveLength(1);
  // The row is finished after SES answers: wait for it, not just for the SES record.
  const row = await waitFor(async () => {
    const [r] = await e2e.api.database.db.select().from(emails).where(eq(emails.id, emailId));
    return r?.status === 'sent' && r;
  });
  expect(row).toMatchObject({
    source: 'workflow',
    workflowExecutionId: x.id,
    workflowStepRunId: x.steps[0].id,
    renderedSubject: 'Hello pro',
  });
  const hooks = await waitFor(async () => {
    const got = receiver.received
      .filter((r) => r.headers['webhook-id'] && r.body.includes(x.id))
      .map((r) => JSON.parse(r.body) as { type: string; data: Record<string, unknown> });
    return got.length >= 2 && got;
  });
  expect(hooks.map((h) => h.type).sort()).toEqual(['workflow.exited', 'workflow.started']);
  expect(hooks.find((h) => h.type === 'workflow.exited')!.data).toMatchObject({
    workflowId: wid,
    executionId: x.id,
    contactId: x.contactId,
    status: 'EXITED',
    reason: 'welcomed',
  });
  expect(
    verifyStandardWebhook(
      endpoint.body.data.secret,
      receiver.received.find((r) => r.body.includes('workflow.started') && r.body.includes(x.id))!,
    ),
  ).toBe(true);
  // EXITED stays EXITED: the same trigger again (no re-entry) neither starts another execution nor moves this one.
  await track(p, to, 'signup', { plan: 'pro' });
  await inboxDrained(p);
  expect(await executions(p, wid)).toHaveLength(1);
  const again = await execution(p, wid, x.id);
  expect(again).toMatchObject({
    status: 'EXITED',
    exitReason: 'welcomed',
    updatedAt: (x as unknown as { updatedAt: string }).updatedAt,
  });
  expect(again.steps).toHaveLength(2);
});

test('email.opened, recorded by delivery feedback (not the API), starts a workflow', async () => {
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'email.opened' },
    { steps: [{ key: 'x', type: 'EXIT', config: { reason: 'opened' } }], transitions: [{ from: null, to: 'x' }] },
  );
  const to = recipient('opened');
  const c = await client(e2e.api.app, p).post('/contacts', { email: to });
  // The row SES feedback writes for an Open (packages/db feedback.ts), inserted the same way: straight into events.
  await e2e.api.database.db.execute(sql`insert into events (id, project_id, contact_id, name, data, created_at)
    values (mailroom_uuid_v7(clock_timestamp()), ${p.id}::uuid, ${c.body.data.id}::uuid, 'email.opened', '{"emailId":"x"}'::jsonb, clock_timestamp())`);
  const x = await settled(p, wid, to, ['EXITED']);
  expect(x.exitReason).toBe('opened');
});

test('a DELAY of 2 seconds delays the next step by 2 seconds', async () => {
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'go' },
    {
      steps: [
        { key: 'd', type: 'DELAY', config: { amount: 2, unit: 'seconds' } },
        { key: 'u', type: 'UPDATE_CONTACT', config: { data: { delayed: true } } },
      ],
      transitions: [
        { from: null, to: 'd' },
        { from: 'd', to: 'u' },
      ],
    },
  );
  const to = recipient('delay');
  await track(p, to, 'go');
  const waiting = await settled(p, wid, to, ['WAITING']);
  expect(waiting.steps.map((s) => [s.type, s.status])).toEqual([['DELAY', 'WAITING']]);
  const x = await settled(p, wid, to, ['COMPLETED']);
  const gap = Date.parse(x.steps[1].startedAt) - Date.parse(x.steps[0].startedAt);
  expect(gap).toBeGreaterThanOrEqual(2000);
  expect(gap).toBeLessThan(3000);
  const contact = (await client(e2e.api.app, p).get(`/contacts/${x.contactId}`)).body.data;
  expect(contact.data.delayed).toBe(true);
});

describe('WAIT_FOR_EVENT', () => {
  const graph = {
    steps: [
      { key: 'w', type: 'WAIT_FOR_EVENT', config: { event: 'purchase', timeout: { amount: 1, unit: 'seconds' } } },
      { key: 'viaEvent', type: 'UPDATE_CONTACT', config: { data: { via: 'event' } } },
      { key: 'viaTimeout', type: 'UPDATE_CONTACT', config: { data: { via: 'timeout' } } },
    ],
    transitions: [
      { from: null, to: 'w' },
      { from: 'w', to: 'viaEvent', branch: 'event' },
      { from: 'w', to: 'viaTimeout', branch: 'timeout' },
    ],
  };

  test('the event branch, the timeout branch, and a cancelled execution that never resumes', async () => {
    const p = await createTestProject(e2e.api.database);
    const wid = await setup(p, { type: 'EVENT', event: 'cart' }, graph);
    const [buyer, idle, cancelled] = [recipient('buyer'), recipient('idle'), recipient('cancel')];
    await Promise.all([track(p, buyer, 'cart'), track(p, idle, 'cart'), track(p, cancelled, 'cart')]);
    await settled(p, wid, buyer, ['WAITING']);
    const c = await settled(p, wid, cancelled, ['WAITING']);
    expect((await client(e2e.api.app, p).post(`/workflows/${wid}/executions/${c.id}/cancel`, {})).status).toBe(200);
    await track(p, buyer, 'purchase', { amount: 42 });
    await track(p, cancelled, 'purchase');
    const b = await settled(p, wid, buyer, ['COMPLETED']);
    expect(b.steps.map((s) => [s.type, s.branch])).toEqual([
      ['WAIT_FOR_EVENT', 'event'],
      ['UPDATE_CONTACT', 'next'],
    ]);
    const i = await settled(p, wid, idle, ['COMPLETED']);
    expect(i.steps.map((s) => [s.type, s.branch])).toEqual([
      ['WAIT_FOR_EVENT', 'timeout'],
      ['UPDATE_CONTACT', 'next'],
    ]);
    // Past the timeout and the event: the cancelled one stays as it was. It has had its chance once the clock is
    // past its timeout, its purchase event has left the inbox, and no job of it is left to run.
    const timesOut = Date.parse(c.steps[0].startedAt) + 1000;
    await waitFor(async () => Date.now() > timesOut, 5_000, "the cancelled execution's timeout to pass");
    await inboxDrained(p);
    await noJobFor(c.id);
    const after = await execution(p, wid, c.id);
    expect(after.status).toBe('CANCELLED');
    expect(after.steps.map((s) => [s.type, s.status])).toEqual([['WAIT_FOR_EVENT', 'CANCELLED']]);
  });

  test('an event and the timeout arriving together advance each execution exactly once', async () => {
    const p = await createTestProject(e2e.api.database);
    const wid = await setup(p, { type: 'EVENT', event: 'cart' }, graph);
    const people = Array.from({ length: 12 }, (_, n) => recipient(`race${n}`));
    await Promise.all(people.map((e) => track(p, e, 'cart')));
    const waits = await Promise.all(people.map((e) => settled(p, wid, e, ['WAITING'])));
    // Fire each event around its timeout: from 100 ms before to 100 ms after.
    await Promise.all(
      people.map(async (e, n) => {
        const started = Date.parse(waits[n].steps[0].startedAt);
        const at = started + 1000 + (n % 6) * 40 - 100;
        await new Promise((r) => setTimeout(r, Math.max(0, at - Date.now())));
        await track(p, e, 'purchase');
      }),
    );
    const branches: string[] = [];
    for (const e of people) {
      const x = await settled(p, wid, e, ['COMPLETED']);
      expect(x.steps).toHaveLength(2);
      const branch = x.steps[0].branch!;
      branches.push(branch);
      expect(['event', 'timeout']).toContain(branch);
      const contact = (await client(e2e.api.app, p).get(`/contacts/${x.contactId}`)).body.data;
      expect(contact.data.via).toBe(branch);
    }
    console.log(
      `wait race: ${branches.filter((b) => b === 'event').length} by event, ${branches.filter((b) => b === 'timeout').length} by timeout`,
    );
  });
});

test('20 concurrent identical trigger events for one contact start one execution without re-entry (20 with it)', async () => {
  const p = await createTestProject(e2e.api.database);
  const graph = {
    steps: [{ key: 'd', type: 'DELAY', config: { amount: 1, unit: 'hours' } }],
    transitions: [{ from: null, to: 'd' }],
  };
  const once = await setup(p, { type: 'EVENT', event: 'burst' }, graph);
  const every = await setup(p, { type: 'EVENT', event: 'burst' }, graph, { allowReentry: true });
  const to = recipient('burst');
  await track(p, to, 'hello');
  const res = await Promise.all(Array.from({ length: 20 }, () => track(p, to, 'burst')));
  expect(res.every((r) => r.status === 200)).toBe(true);
  await waitFor(async () => (await executions(p, every)).length === 20, 15_000, '20 executions with re-entry');
  await waitFor(
    async () => (await executions(p, once, '&status=WAITING')).length === 1,
    15_000,
    'the one execution waiting',
  );
  expect(await executions(p, once)).toHaveLength(1);
});

test('duplicate and retried jobs for one execution send one email', async () => {
  const p = await createTestProject(e2e.api.database);
  const tpl = await template(p);
  const wid = await setup(
    p,
    { type: 'MANUAL' },
    { steps: [{ key: 's', type: 'SEND_EMAIL', config: { templateId: tpl } }], transitions: [{ from: null, to: 's' }] },
  );
  const to = recipient('dup');
  await client(e2e.api.app, p).post('/contacts', { email: to });
  const started = await client(e2e.api.app, p).post(`/workflows/${wid}/executions`, { email: to });
  const eid = started.body.data.id as string;
  const jobs = Array.from({ length: 6 }, () => ({
    name: 'run',
    data: { executionId: eid, projectId: p.id },
    opts: { jobId: `dup-${randomUUID()}` },
  }));
  await e2e.api.queues.workflow.addBulk(jobs);
  const x = await settled(p, wid, to, ['COMPLETED']);
  expect(x.steps).toHaveLength(1);
  // A job for the finished execution changes nothing.
  const late = `late-${randomUUID()}`;
  await e2e.api.queues.workflow.add('run', { executionId: eid, projectId: p.id }, { jobId: late });
  // The late job has run once it has completed or failed (or is gone: the engine's own jobs are removed when done).
  await waitFor(
    async () => {
      const job = await e2e.api.queues.workflow.getJob(late);
      return !job || (await job.isCompleted()) || (await job.isFailed());
    },
    15_000,
    'the late job to run',
  );
  const rows = await e2e.api.database.db
    .select()
    .from(emails)
    .where(and(eq(emails.projectId, p.id), eq(emails.workflowExecutionId, eid)));
  expect(rows).toHaveLength(1);
  await waitFor(async () => (await sesSendsTo([to])).length === 1);
});

test('disabling stops new executions; an execution in flight runs to its end', async () => {
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'trial' },
    {
      steps: [
        { key: 'd', type: 'DELAY', config: { amount: 1, unit: 'seconds' } },
        { key: 'u', type: 'UPDATE_CONTACT', config: { data: { finished: true } } },
      ],
      transitions: [
        { from: null, to: 'd' },
        { from: 'd', to: 'u' },
      ],
    },
  );
  const [early, late] = [recipient('early'), recipient('late')];
  await track(p, early, 'trial');
  await settled(p, wid, early, ['WAITING']);
  expect((await client(e2e.api.app, p).patch(`/workflows/${wid}`, { enabled: false })).status).toBe(200);
  await track(p, late, 'trial');
  await settled(p, wid, early, ['COMPLETED']);
  await inboxDrained(p);
  expect(await executions(p, wid)).toHaveLength(1);
});

test("a disabled project's executions are cancelled and run no further step", async () => {
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'later' },
    {
      steps: [
        { key: 'd', type: 'DELAY', config: { amount: 1, unit: 'seconds' } },
        { key: 'u', type: 'UPDATE_CONTACT', config: { data: { ran: true } } },
      ],
      transitions: [
        { from: null, to: 'd' },
        { from: 'd', to: 'u' },
      ],
    },
  );
  const to = recipient('disabled');
  await track(p, to, 'later');
  await settled(p, wid, to, ['WAITING']);
  await e2e.api.database.db.update(projects).set({ disabled: true }).where(eq(projects.id, p.id));
  try {
    const x = await waitFor(async () => {
      const [row] = await e2e.api.database.db
        .select()
        .from(workflowExecutions)
        .where(eq(workflowExecutions.workflowId, wid));
      return row?.status === 'CANCELLED' && row;
    });
    expect(x.error).toBe('project disabled');
    const [contact] = await e2e.api.database.db.select().from(contacts).where(eq(contacts.id, x.contactId));
    expect(contact.data.ran).toBeUndefined();
  } finally {
    await e2e.api.database.db.update(projects).set({ disabled: false }).where(eq(projects.id, p.id));
  }
});

test('CONDITION on the trigger data; a MARKETING template is never sent to an unsubscribed contact', async () => {
  const p = await createTestProject(e2e.api.database);
  const tpl = await template(p, 'MARKETING');
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'upgrade' },
    {
      steps: [
        {
          key: 'pro',
          type: 'CONDITION',
          config: { filter: [{ field: 'context.trigger.data.plan', operator: 'equals', value: 'pro' }] },
        },
        { key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl } },
        { key: 'no', type: 'EXIT', config: { reason: 'not pro' } },
      ],
      transitions: [
        { from: null, to: 'pro' },
        { from: 'pro', to: 'send', branch: 'yes' },
        { from: 'pro', to: 'no', branch: 'no' },
      ],
    },
  );
  const [optedOut, subscriber, free] = [recipient('optout'), recipient('sub'), recipient('free')];
  await track(p, optedOut, 'upgrade', { plan: 'pro' }, false);
  await track(p, subscriber, 'upgrade', { plan: 'pro' }, true);
  await track(p, free, 'upgrade', { plan: 'free' }, true);
  const skipped = await settled(p, wid, optedOut, ['COMPLETED']);
  expect(skipped.steps.map((s) => [s.type, s.status, s.branch])).toEqual([
    ['CONDITION', 'COMPLETED', 'yes'],
    ['SEND_EMAIL', 'SKIPPED', 'next'],
  ]);
  const sent = await settled(p, wid, subscriber, ['COMPLETED']);
  expect(sent.steps[1].status).toBe('COMPLETED');
  const exitedFree = await settled(p, wid, free, ['EXITED']);
  expect(exitedFree.exitReason).toBe('not pro');
  await waitFor(async () => (await sesSendsTo([subscriber])).length === 1);
  expect(await sesSendsTo([optedOut, free])).toHaveLength(0);
});

test('WEBHOOK: signed with the project secret, one idempotency key across retries, JSON-escaped body; the answer lands in the context', async () => {
  const p = await createTestProject(e2e.api.database);
  const secret = (await client(e2e.api.app, p).get('/workflows/webhook-secret')).body.data.secret as string;
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'paid' },
    {
      steps: [
        {
          key: 'hook',
          type: 'WEBHOOK',
          config: {
            url: `${receiver.url}/paid`,
            headers: { 'X-Source': 'mailroom' },
            body: '{"email":"{{contact.email}}","note":"{{trigger.note}}"}',
            retries: 3,
            timeoutMs: 2000,
          },
        },
        {
          key: 'check',
          type: 'CONDITION',
          config: { filter: [{ field: 'context.webhook.statusCode', operator: 'equals', value: 200 }] },
        },
        { key: 'ok', type: 'EXIT', config: { reason: 'hook answered' } },
        { key: 'ko', type: 'EXIT', config: { reason: 'unexpected' } },
      ],
      transitions: [
        { from: null, to: 'hook' },
        { from: 'hook', to: 'check' },
        { from: 'check', to: 'ok', branch: 'yes' },
        { from: 'check', to: 'ko', branch: 'no' },
      ],
    },
  );
  const to = recipient('hook');
  receiver.failNext(2);
  const before = receiver.received.length;
  await track(p, to, 'paid', { note: 'say "hi"\\ \n' });
  const x = await settled(p, wid, to, ['EXITED']);
  expect(x.exitReason).toBe('hook answered');
  expect(x.steps[0]).toMatchObject({ type: 'WEBHOOK', status: 'COMPLETED', attempts: 3 });
  const calls = receiver.received.slice(before).filter((r) => r.body.includes(to));
  expect(calls.map((c) => c.status)).toEqual([500, 500, 200]);
  for (const c of calls) {
    expect(c.headers['idempotency-key']).toBe(x.steps[0].id);
    expect(c.headers['webhook-id']).toBe(x.steps[0].id);
    expect(c.headers['x-source']).toBe('mailroom');
    expect(verifyStandardWebhook(secret, c)).toBe(true);
    expect(JSON.parse(c.body)).toEqual({ email: to, note: 'say "hi"\\ \n' });
  }
});

test('contact.subscribed, a system event, starts a workflow', async () => {
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'contact.subscribed' },
    { steps: [{ key: 'x', type: 'EXIT', config: { reason: 'hello' } }], transitions: [{ from: null, to: 'x' }] },
  );
  const [joined, quiet] = [recipient('joined'), recipient('quiet')];
  await client(e2e.api.app, p).post('/contacts', { email: joined, subscribed: true });
  const q = await client(e2e.api.app, p).post('/contacts', { email: quiet, subscribed: false });
  await settled(p, wid, joined, ['EXITED']);
  expect(await executions(p, wid)).toHaveLength(1);
  // Subscribing later (PATCH) is a subscription too; so is /v1/send stating it. /v1/send without it is none.
  await client(e2e.api.app, p).patch(`/contacts/${q.body.data.id}`, { subscribed: true });
  await settled(p, wid, quiet, ['EXITED']);
  const [viaSend, plainSend] = [recipient('viasend'), recipient('plainsend')];
  for (const [to, extra] of [
    [viaSend, { subscribed: true }],
    [plainSend, {}],
  ] as const) {
    const sent = await client(e2e.api.app, p).post('/v1/send', {
      to,
      from: `n@${p.domain}`,
      subject: 'Hi',
      body: '<p>Hi</p>',
      ...extra,
    });
    expect(sent.status).toBe(202);
  }
  await settled(p, wid, viaSend, ['EXITED']);
  await inboxDrained(p);
  expect(await executions(p, wid)).toHaveLength(3);
});

test('segment.<name>.entry, a system event, starts a workflow when a contact enters a tracked segment', async () => {
  const p = await createTestProject(e2e.api.database);
  const seg = await client(e2e.api.app, p).post('/segments', {
    name: 'VIPs',
    filter: [{ field: 'data.vip', operator: 'equals', value: true }],
    trackMembership: true,
  });
  expect(seg.status).toBe(201);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'segment.VIPs.entry' },
    { steps: [{ key: 'x', type: 'EXIT', config: { reason: 'vip' } }], transitions: [{ from: null, to: 'x' }] },
  );
  const [vip, regular] = [recipient('vip'), recipient('regular')];
  await client(e2e.api.app, p).post('/contacts', { email: vip, data: { vip: true } });
  await client(e2e.api.app, p).post('/contacts', { email: regular, data: { vip: false } });
  const x = await settled(p, wid, vip, ['EXITED'], 20_000);
  expect(x.exitReason).toBe('vip');
  expect(await executions(p, wid)).toHaveLength(1);
});

test('nothing of a workflow runs in the request: with no worker, a tracked event leaves an inbox row and no execution; a worker then runs it', async () => {
  await e2e.stopWorker();
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'queued' },
    {
      steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { ran: true } } }],
      transitions: [{ from: null, to: 'u' }],
    },
  );
  const to = recipient('noworker');
  const res = await track(p, to, 'queued');
  expect(res.status).toBe(200);
  const inbox = await e2e.api.database.db
    .select()
    .from(workflowInbox)
    .where(eq(workflowInbox.eventId, res.body.data.event));
  expect(inbox).toHaveLength(1);
  expect(await executions(p, wid)).toHaveLength(0);
  await e2e.startWorker();
  const x = await settled(p, wid, to, ['COMPLETED']);
  expect((await client(e2e.api.app, p).get(`/contacts/${x.contactId}`)).body.data.data.ran).toBe(true);
});

test('an execution whose job was lost (Redis flushed) is found by the reconciler and run', async () => {
  await e2e.stopWorker();
  const p = await createTestProject(e2e.api.database);
  const wid = await setup(
    p,
    { type: 'MANUAL' },
    {
      steps: [{ key: 'u', type: 'UPDATE_CONTACT', config: { data: { recovered: true } } }],
      transitions: [{ from: null, to: 'u' }],
    },
  );
  const to = recipient('lost');
  await client(e2e.api.app, p).post('/contacts', { email: to });
  const started = await client(e2e.api.app, p).post(`/workflows/${wid}/executions`, { email: to });
  expect(started.status).toBe(201);
  expect(await deletePrefix(e2e.api.redis, e2e.config.queuePrefix)).toBeGreaterThan(0);
  await e2e.startWorker();
  const x = await settled(p, wid, to, ['COMPLETED'], 20_000);
  expect(x.steps.map((s) => [s.type, s.status])).toEqual([['UPDATE_CONTACT', 'COMPLETED']]);
});

test('a worker killed during a WEBHOOK call: another resumes the step with the same idempotency key, and the next email is sent once', async () => {
  await e2e.stopWorker();
  const p = await createTestProject(e2e.api.database);
  const tpl = await template(p);
  const wid = await setup(
    p,
    { type: 'EVENT', event: 'crash' },
    {
      steps: [
        { key: 'hook', type: 'WEBHOOK', config: { url: `${receiver.url}/crash`, timeoutMs: 3000, retries: 0 } },
        { key: 'send', type: 'SEND_EMAIL', config: { templateId: tpl } },
      ],
      transitions: [
        { from: null, to: 'hook' },
        { from: 'hook', to: 'send' },
      ],
    },
  );
  const to = recipient('crash');
  const before = receiver.received.length;
  receiver.hold(true);
  const child = spawnWorker(e2e.env);
  try {
    await track(p, to, 'crash');
    await waitFor(
      async () => receiver.received.slice(before).some((r) => r.body.includes(to)),
      20_000,
      'the first call',
    );
    child.kill('SIGKILL');
    await exited(child);
  } finally {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  receiver.hold(false);
  await e2e.startWorker();
  const x = await settled(p, wid, to, ['COMPLETED'], 40_000);
  const calls = receiver.received.slice(before).filter((r) => r.body.includes(to));
  expect(calls.length).toBe(2);
  expect(new Set(calls.map((c) => c.headers['idempotency-key']))).toEqual(new Set([x.steps[0].id]));
  expect(x.steps.map((s) => [s.type, s.status])).toEqual([
    ['WEBHOOK', 'COMPLETED'],
    ['SEND_EMAIL', 'COMPLETED'],
  ]);
  await waitFor(async () => (await sesSendsTo([to])).length === 1, 20_000, 'one email');
  // No other send can follow once every email of the execution is final (a final row is never claimed again).
  await waitFor(
    async () => {
      const rows = await e2e.api.database.db
        .select({ status: emails.status })
        .from(emails)
        .where(eq(emails.workflowExecutionId, x.id));
      return rows.length > 0 && rows.every((r) => r.status !== 'queued' && r.status !== 'sending');
    },
    20_000,
    "the execution's emails final",
  );
  expect(await sesSendsTo([to])).toHaveLength(1);
}, 90_000);
