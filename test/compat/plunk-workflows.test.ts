/**
 * Plunk v2 compatibility of workflows: the requests a Plunk v2 integration makes (written from Plunk v2's
 * Workflows controller, WorkflowService and zod schemas: `eventName` / `triggerType` / `triggerConfig` on the
 * workflow, steps with `position`, `templateId` and `autoConnect`, Plunk's step configurations, transitions with
 * `condition` / `waitOutcome` / `priority`, `page` / `pageSize` lists, `DELETE …/executions/{id}` to cancel)
 * replayed against the API, on a database of its own with the real worker: the workflow runs end to end (a
 * tracked event starts it, the email goes to the SES emulator, the awaited event resumes it, the Plunk CONDITION
 * picks its branch, UPDATE_CONTACT and a WEBHOOK with an object body run). Each answer is checked for our fields
 * and Plunk's beside them; then the refusals of what has no equivalent here.
 */
import { loadConfig } from '@mailroom/config/config';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import {
  client,
  createTestProject,
  isolatedDatabase,
  recipient,
  sesSendsTo,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { startReceiver, type Receiver } from '../support/receiver';

let iso: { url: string; drop: () => Promise<void> };
let api: TestApi;
let worker: RunningWorker | undefined;
let receiver: Receiver;

beforeAll(async () => {
  iso = await isolatedDatabase();
  const config = loadConfig(
    testEnv({
      DATABASE_URL: iso.url,
      SES_MAX_SEND_RATE: '50',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WORKFLOW_LEASE_MS: '1500',
      WORKFLOW_RETRY_BACKOFF_MS: '200',
      WORKFLOW_INBOX_POLL_MS: '200',
      RECONCILE_INTERVAL_MS: '500',
      RECONCILE_AFTER_MS: '1000',
    }),
  );
  api = await startTestApi(config);
  receiver = await startReceiver();
  worker = await startWorker(config, { healthPort: null });
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await receiver?.close();
  await iso?.drop();
});

const as = (p: TestProject) => client(api.app, p);
const fieldsOf = (r: { body: { error: { errors?: { field: string }[] } } }) =>
  (r.body.error.errors ?? []).map((e) => e.field);

async function template(p: TestProject) {
  const res = await as(p).post('/templates', {
    name: 'welcome',
    subject: 'Welcome {{trigger.plan}}',
    body: '<p>Hi {{email}}</p>',
    type: 'TRANSACTIONAL',
    from: `wf@${p.domain}`,
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

/** A workflow step as GET /workflows/{id} shows it (the fields these tests read). */
type StepView = {
  name: string;
  position: unknown;
  incomingTransitions: unknown;
  outgoingTransitions: Array<{ waitOutcome: string; toStepId: string; condition: { branch: string } }>;
};
type Exec = {
  id: string;
  status: string;
  contactId: string;
  currentStep: { id: string; name: string; type: string } | null;
};

/** Waits for the execution of `email`'s contact (read through Plunk's page form) to reach `status`. */
async function executionOf(p: TestProject, wid: string, email: string, status: string): Promise<Exec> {
  return waitFor(
    async () => {
      const res = await as(p).get(`/workflows/${wid}/executions?page=1&pageSize=50`);
      const x = (res.body.data.executions as (Exec & { contact: { email: string } | null })[]).find(
        (e) => e.contact?.email === email,
      );
      return x && x.status === status ? x : undefined;
    },
    20_000,
    `execution of ${email} ${status}`,
  );
}

test('a Plunk v2 integration builds a workflow step by step, enables it, and it runs through the worker', async () => {
  const p = await createTestProject(api.database);
  const tpl = await template(p);

  // POST /workflows as Plunk's WorkflowSchemas.create: eventName, enabled: false.
  const created = await as(p).post('/workflows', {
    name: 'Onboarding',
    description: 'Plunk flow',
    eventName: 'signup',
    enabled: false,
    allowReentry: false,
  });
  expect(created.status).toBe(201);
  expect(created.body.data).toMatchObject({
    name: 'Onboarding',
    enabled: false,
    allowReentry: false,
    trigger: { type: 'EVENT', event: 'signup' },
    triggerType: 'EVENT',
    triggerConfig: { eventName: 'signup' },
    steps: [],
  });
  const wid = created.body.data.id as string;

  // POST /workflows/{id}/steps as Plunk's addStep: type, name, position, config, templateId; autoConnect defaults on.
  const send = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'SEND_EMAIL',
    name: 'Welcome',
    position: { x: 100, y: 250 },
    config: {},
    templateId: tpl,
  });
  expect(send.status).toBe(201);
  expect(send.body.data).toMatchObject({
    type: 'SEND_EMAIL',
    name: 'Welcome',
    workflowId: wid,
    position: { x: 100, y: 250 },
    templateId: tpl,
    config: { templateId: tpl },
  });
  const wait = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'WAIT_FOR_EVENT',
    name: 'Wait for purchase',
    position: { x: 100, y: 400 },
    config: { eventName: 'purchase', timeout: 3600 },
    autoConnect: true,
  });
  expect(wait.status).toBe(201);
  expect(wait.body.data.config).toEqual({ event: 'purchase', timeout: { amount: 3600, unit: 'seconds' } });
  const cond = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'CONDITION',
    name: 'Pro plan?',
    position: { x: 100, y: 550 },
    config: { field: 'event.plan', operator: 'equals', value: 'pro' },
  });
  expect(cond.status).toBe(201);
  expect(cond.body.data.config).toEqual({
    filter: [{ field: 'context.trigger.data.plan', operator: 'equals', value: 'pro' }],
  });
  const update = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'UPDATE_CONTACT',
    name: 'Mark VIP',
    position: { x: 0, y: 700 },
    config: { updates: { vip: true }, subscriptionAction: 'none' },
    autoConnect: false,
  });
  expect(update.status).toBe(201);
  expect(update.body.data.config).toEqual({ data: { vip: true } });
  const exit = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'EXIT',
    name: 'Not pro',
    position: { x: 200, y: 700 },
    config: { reason: 'not pro' },
    autoConnect: false,
  });
  expect(exit.status).toBe(201);
  // After UPDATE_CONTACT (the last step leading nowhere; an EXIT leads nowhere by nature), a WEBHOOK with Plunk's object body.
  const hook = await as(p).post(`/workflows/${wid}/steps`, {
    type: 'WEBHOOK',
    name: 'Tell CRM',
    position: { x: 0, y: 850 },
    config: {
      url: receiver.url,
      method: 'POST',
      headers: { 'x-source': 'plunk' },
      body: { who: '{{email}}', plan: '{{event.plan}}', vip: '{{data.vip}}' },
    },
  });
  expect(hook.status).toBe(201);
  expect(typeof hook.body.data.config.body).toBe('string');

  // POST /workflows/{id}/transitions as Plunk's createTransition: condition {branch}, priority.
  const yes = await as(p).post(`/workflows/${wid}/transitions`, {
    fromStepId: cond.body.data.id,
    toStepId: update.body.data.id,
    condition: { branch: 'yes' },
    priority: 0,
  });
  expect(yes.status).toBe(201);
  expect(yes.body.data).toMatchObject({ branch: 'yes', condition: { branch: 'yes' }, waitOutcome: null, priority: 0 });
  const no = await as(p).post(`/workflows/${wid}/transitions`, {
    fromStepId: cond.body.data.id,
    toStepId: exit.body.data.id,
    condition: { branch: 'no' },
    priority: 1,
  });
  expect(no.status).toBe(201);
  expect(no.body.data.branch).toBe('no');

  // GET /workflows/{id}: steps carry position and outgoing/incoming transitions, as Plunk's include gives them.
  const got = await as(p).get(`/workflows/${wid}`);
  expect(got.status).toBe(200);
  const byName = Object.fromEntries((got.body.data.steps as StepView[]).map((s) => [s.name, s]));
  expect(byName['Welcome'].position).toEqual({ x: 100, y: 250 });
  expect(byName['Welcome'].incomingTransitions).toEqual([
    expect.objectContaining({ fromStepId: null, branch: 'next' }),
  ]);
  expect(byName['Welcome'].outgoingTransitions).toEqual([
    expect.objectContaining({ toStepId: wait.body.data.id, branch: 'next', condition: null, waitOutcome: null }),
  ]);
  expect(
    byName['Wait for purchase'].outgoingTransitions
      .map((t: { waitOutcome: string; toStepId: string }) => [t.waitOutcome, t.toStepId])
      .sort(),
  ).toEqual([
    ['EVENT', cond.body.data.id],
    ['TIMEOUT', cond.body.data.id],
  ]);
  expect(
    byName['Pro plan?'].outgoingTransitions.map((t: { condition: { branch: string } }) => t.condition.branch).sort(),
  ).toEqual(['no', 'yes']);
  expect(byName['Mark VIP'].outgoingTransitions).toEqual([expect.objectContaining({ toStepId: hook.body.data.id })]);
  expect(byName['Not pro'].outgoingTransitions).toEqual([]);

  // PATCH /workflows/{id} {enabled: true} checks the graph Plunk's calls built.
  const enabled = await as(p).patch(`/workflows/${wid}`, { enabled: true });
  expect(enabled.status).toBe(200);
  expect(enabled.body.data.enabled).toBe(true);

  // Plunk's SDK tracks the trigger event; the worker runs the execution to the wait.
  const pro = recipient('plunk-pro');
  const free = recipient('plunk-free');
  expect((await as(p).post('/v1/track', { event: 'signup', email: pro, data: { plan: 'pro' } })).status).toBe(200);
  expect((await as(p).post('/v1/track', { event: 'signup', email: free, data: { plan: 'free' } })).status).toBe(200);
  const waiting = await executionOf(p, wid, pro, 'WAITING');
  expect(waiting.currentStep).toEqual({ id: wait.body.data.id, name: 'Wait for purchase', type: 'WAIT_FOR_EVENT' });
  await executionOf(p, wid, free, 'WAITING');
  const sent = await waitFor(async () => {
    const s = await sesSendsTo([pro]);
    return s.length > 0 && s;
  });
  expect(sent).toHaveLength(1);

  // Executions list in Plunk's page form.
  const list = await as(p).get(`/workflows/${wid}/executions?page=1&pageSize=1`);
  expect(list.status).toBe(200);
  expect(list.body.data).toMatchObject({ total: 2, page: 1, pageSize: 1, totalPages: 2, hasMore: true });
  expect(list.body.data.executions).toEqual(list.body.data.items);
  expect(list.body.data.executions).toHaveLength(1);
  const second = await as(p).get(`/workflows/${wid}/executions?page=2&pageSize=1`);
  expect(second.body.data).toMatchObject({ page: 2, totalPages: 2, hasMore: false });
  expect(second.body.data.executions[0].id).not.toBe(list.body.data.executions[0].id);

  // The awaited event resumes the pro contact: CONDITION yes → UPDATE_CONTACT → WEBHOOK → COMPLETED.
  expect((await as(p).post('/v1/track', { event: 'purchase', email: pro, data: { total: 49 } })).status).toBe(200);
  const done = await executionOf(p, wid, pro, 'COMPLETED');
  const detail = await as(p).get(`/workflows/${wid}/executions/${done.id}`);
  expect(detail.status).toBe(200);
  // Here a finished execution keeps the step it ended on (Plunk clears it).
  expect(detail.body.data).toMatchObject({
    status: 'COMPLETED',
    currentStep: { id: hook.body.data.id, name: 'Tell CRM', type: 'WEBHOOK' },
    contact: { email: pro },
  });
  expect(detail.body.data.completedAt).toEqual(detail.body.data.finishedAt);
  expect(detail.body.data.completedAt).not.toBeNull();
  expect(
    detail.body.data.stepExecutions.map((r: { step: { name: string }; status: string; executionId: string }) => [
      r.step.name,
      r.status,
      r.executionId,
    ]),
  ).toEqual([
    ['Welcome', 'COMPLETED', done.id],
    ['Wait for purchase', 'COMPLETED', done.id],
    ['Pro plan?', 'COMPLETED', done.id],
    ['Mark VIP', 'COMPLETED', done.id],
    ['Tell CRM', 'COMPLETED', done.id],
  ]);
  expect(detail.body.data.stepExecutions.find((r: { type: string }) => r.type === 'CONDITION').branch).toBe('yes');
  const contact = (await as(p).get(`/contacts?search=${encodeURIComponent(pro)}`)).body.data.items[0];
  expect(contact.data).toMatchObject({ plan: 'pro', vip: true });
  const call = receiver.received.find((r) => r.body.includes(pro));
  expect(call?.headers['x-source']).toBe('plunk');
  expect(JSON.parse(call!.body)).toEqual({ who: pro, plan: 'pro', vip: 'true' });

  // DELETE /workflows/{id}/executions/{executionId} cancels (Plunk's form); a second cancel is 409.
  const freeX = await executionOf(p, wid, free, 'WAITING');
  const cancelled = await as(p).del(`/workflows/${wid}/executions/${freeX.id}`);
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.data).toMatchObject({ id: freeX.id, status: 'CANCELLED', contact: { email: free } });
  expect(cancelled.body.data.completedAt).not.toBeNull();
  const again = await as(p).del(`/workflows/${wid}/executions/${freeX.id}`);
  expect(again.status).toBe(409);
  expect(again.body.error.code).toBe('INVALID_STATE');
  // A purchase after the cancel moves nothing.
  expect((await as(p).post('/v1/track', { event: 'purchase', email: free, data: {} })).status).toBe(200);
  const kept = await as(p).get(`/workflows/${wid}/executions/${freeX.id}`);
  expect(kept.body.data.status).toBe('CANCELLED');
  expect(
    kept.body.data.stepExecutions.map((r: { step: { name: string }; status: string }) => [r.step.name, r.status]),
  ).toEqual([
    ['Welcome', 'COMPLETED'],
    ['Wait for purchase', 'CANCELLED'],
  ]);
});

describe('the rest of Plunk v2 workflow requests', () => {
  test('triggerType/triggerConfig on create and update; list in page form with search; manual start with context', async () => {
    const p = await createTestProject(api.database);
    const created = await as(p).post('/workflows', {
      name: 'By config',
      triggerType: 'EVENT',
      triggerConfig: { eventName: 'trial.started' },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      trigger: { type: 'EVENT', event: 'trial.started' },
      triggerType: 'EVENT',
      triggerConfig: { eventName: 'trial.started' },
    });
    const id = created.body.data.id as string;
    const renamed = await as(p).patch(`/workflows/${id}`, { triggerConfig: { eventName: 'trial.ended' } });
    expect(renamed.status).toBe(200);
    expect(renamed.body.data).toMatchObject({
      triggerType: 'EVENT',
      triggerConfig: { eventName: 'trial.ended' },
      trigger: { type: 'EVENT', event: 'trial.ended' },
    });
    const manual = await as(p).patch(`/workflows/${id}`, { triggerType: 'MANUAL', triggerConfig: null });
    expect(manual.body.data).toMatchObject({
      triggerType: 'MANUAL',
      triggerConfig: null,
      trigger: { type: 'MANUAL', event: null },
    });

    for (const name of ['Alpha flow', 'Beta flow'])
      expect((await as(p).post('/workflows', { name, eventName: 'x' })).status).toBe(201);
    const page = await as(p).get('/workflows?page=2&pageSize=2');
    expect(page.status).toBe(200);
    expect(page.body.data).toMatchObject({ total: 3, page: 2, pageSize: 2, totalPages: 2 });
    expect(page.body.data.workflows.map((w: { name: string }) => w.name)).toEqual(['By config']);
    expect(page.body.data.workflows).toEqual(page.body.data.items);
    const found = await as(p).get('/workflows?search=BETA&page=1&pageSize=20');
    expect(found.body.data.workflows.map((w: { name: string }) => w.name)).toEqual(['Beta flow']);

    // A one-step MANUAL workflow connected from Plunk's trigger stand-in (the workflow's own id), started with `context`.
    const step = await as(p).post(`/workflows/${id}/steps`, {
      type: 'UPDATE_CONTACT',
      name: 'tag',
      config: { updates: { tagged: true } },
    });
    expect(step.status).toBe(201);
    const entry = await as(p).post(`/workflows/${id}/transitions`, {
      fromStepId: id,
      toStepId: step.body.data.id,
      priority: 0,
    });
    expect(entry.status).toBe(201);
    expect(entry.body.data).toMatchObject({ fromStepId: null, branch: 'next', condition: null, priority: 0 });
    expect((await as(p).patch(`/workflows/${id}`, { enabled: true })).status).toBe(200);
    const email = recipient('manual');
    const contact = await as(p).post('/contacts', { email });
    const started = await as(p).post(`/workflows/${id}/executions`, {
      contactId: contact.body.data.id,
      context: { source: 'plunk' },
    });
    expect(started.status).toBe(201);
    expect(started.body.data).toMatchObject({
      status: 'RUNNING',
      context: { trigger: { data: { source: 'plunk' } } },
      contact: { id: contact.body.data.id, email },
    });
    const x = await waitFor(async () => {
      const r = await as(p).get(`/workflows/${id}/executions/${started.body.data.id}`);
      return r.body.data.status === 'COMPLETED' && r.body.data;
    });
    expect(x.stepExecutions).toEqual([
      expect.objectContaining({
        step: { id: step.body.data.id, name: 'tag', type: 'UPDATE_CONTACT' },
        status: 'COMPLETED',
      }),
    ]);
  });

  test('step updates in Plunk form: position and templateId', async () => {
    const p = await createTestProject(api.database);
    const [t1, t2] = [await template(p), await template(p)];
    const wid = (await as(p).post('/workflows', { name: 'w', eventName: 'go' })).body.data.id as string;
    const step = await as(p).post(`/workflows/${wid}/steps`, {
      type: 'SEND_EMAIL',
      name: 'mail',
      position: { x: 1, y: 2 },
      config: {},
      templateId: t1,
    });
    const moved = await as(p).patch(`/workflows/${wid}/steps/${step.body.data.id}`, {
      position: { x: 5, y: 6 },
      templateId: t2,
    });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ position: { x: 5, y: 6 }, templateId: t2, config: { templateId: t2 } });
    const renamed = await as(p).patch(`/workflows/${wid}/steps/${step.body.data.id}`, { name: 'renamed' });
    expect(renamed.body.data).toMatchObject({ name: 'renamed', position: { x: 5, y: 6 }, templateId: t2 });
    const unset = await as(p).patch(`/workflows/${wid}/steps/${step.body.data.id}`, { templateId: null });
    expect(unset.status).toBe(422);
    expect(fieldsOf(unset)).toEqual(['templateId']);
  });

  test('what has no equivalent here is refused with 422 naming the field', async () => {
    const p = await createTestProject(api.database);
    const schedule = await as(p).post('/workflows', {
      name: 'cron',
      triggerType: 'SCHEDULE',
      triggerConfig: { schedule: '0 9 * * *' },
    });
    expect(schedule.status).toBe(422);
    expect(fieldsOf(schedule)).toEqual(['triggerType']);
    const both = await as(p).post('/workflows', { name: 'both', trigger: { type: 'MANUAL' }, eventName: 'x' });
    expect(fieldsOf(both)).toEqual(['eventName']);
    const none = await as(p).post('/workflows', { name: 'none' });
    expect(none.status).toBe(422);
    expect(fieldsOf(none)).toEqual(['trigger']);
    const on = await as(p).post('/workflows', { name: 'on', eventName: 'x', enabled: true });
    expect(fieldsOf(on)).toEqual(['enabled']);

    const wid = (await as(p).post('/workflows', { name: 'w', eventName: 'go' })).body.data.id as string;
    const add = (body: object) =>
      as(p).post(`/workflows/${wid}/steps`, { name: 's', position: { x: 0, y: 0 }, autoConnect: false, ...body });
    const trigger = await add({ type: 'TRIGGER', config: { eventName: 'go' } });
    expect(trigger.status).toBe(422);
    expect(fieldsOf(trigger)).toEqual(['type']);
    expect(
      fieldsOf(
        await add({
          type: 'CONDITION',
          config: {
            mode: 'multi',
            field: 'data.plan',
            branches: [{ id: 'a', name: 'A', operator: 'equals', value: 'a' }],
          },
        }),
      ),
    ).toEqual(['config.mode']);
    expect(
      fieldsOf(await add({ type: 'CONDITION', config: { field: 'data.plan', operator: 'startsWith', value: 'a' } })),
    ).toEqual(['config.operator']);
    const tpl = await template(p);
    expect(
      fieldsOf(
        await add({
          type: 'SEND_EMAIL',
          config: { recipient: { type: 'CUSTOM', customEmail: 'ops@example.com' } },
          templateId: tpl,
        }),
      ),
    ).toEqual(['config.recipient']);
    expect(fieldsOf(await add({ type: 'DELAY', config: { amount: 1, unit: 'hours' }, templateId: tpl }))).toEqual([
      'templateId',
    ]);
    expect(fieldsOf(await add({ type: 'WAIT_FOR_EVENT', config: { eventName: 'x', timeout: 40_000_000 } }))).toEqual([
      'config.timeout',
    ]);
    expect(fieldsOf(await add({ type: 'UPDATE_CONTACT', config: { subscriptionAction: 'pause' } }))).toEqual([
      'config.subscriptionAction',
    ]);

    // Transitions: a waitOutcome from a step that does not wait; a CONDITION branch Plunk did not name; a taken branch.
    const delay = await add({ type: 'DELAY', config: { amount: 1, unit: 'hours' } });
    const cond = await add({ type: 'CONDITION', config: { field: 'data.plan', operator: 'exists' } });
    expect(cond.status).toBe(201);
    const outcome = await as(p).post(`/workflows/${wid}/transitions`, {
      fromStepId: delay.body.data.id,
      toStepId: cond.body.data.id,
      waitOutcome: 'EVENT',
    });
    expect(outcome.status).toBe(422);
    expect(fieldsOf(outcome)).toEqual(['waitOutcome']);
    const unnamed = await as(p).post(`/workflows/${wid}/transitions`, {
      fromStepId: cond.body.data.id,
      toStepId: delay.body.data.id,
      priority: 0,
    });
    expect(fieldsOf(unnamed)).toEqual(['condition.branch']);
    const wrong = await as(p).post(`/workflows/${wid}/transitions`, {
      fromStepId: delay.body.data.id,
      toStepId: cond.body.data.id,
      condition: { branch: 'yes' },
    });
    expect(fieldsOf(wrong)).toEqual(['condition.branch']);
    expect(
      (
        await as(p).post(`/workflows/${wid}/transitions`, {
          fromStepId: cond.body.data.id,
          toStepId: delay.body.data.id,
          condition: { branch: 'yes' },
        })
      ).status,
    ).toBe(201);
    const taken = await as(p).post(`/workflows/${wid}/transitions`, {
      fromStepId: cond.body.data.id,
      toStepId: delay.body.data.id,
      condition: { branch: 'yes' },
      priority: 1,
    });
    expect(taken.status).toBe(409);

    // Another project's execution id through Plunk's DELETE is 404, as through ours.
    const other = await createTestProject(api.database);
    const foreign = await as(other).del(`/workflows/${wid}/executions/0190a0a0-0000-7000-8000-000000000001`);
    expect(foreign.status).toBe(404);
  });
});
