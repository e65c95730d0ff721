/**
 * Workflows over the API: create (disabled), steps and transitions one by one, the whole graph by PUT, enabling
 * (graph and template checks), manual starts, executions with their history, cancel; every 4xx with its field;
 * tenant isolation. Nothing runs here (no worker): execution itself is covered in test/e2e/workflows.
 */
import request from 'supertest';
import { client, createTestProject, recipient, useApiWithProject } from '../support/harness';

const ctx = useApiWithProject();
const as = () => client(ctx.api.app, ctx.p);

async function template(
  type: 'TRANSACTIONAL' | 'MARKETING' = 'TRANSACTIONAL',
  from: string | null = `hi@${ctx.p.domain}`,
) {
  const res = await as().post('/templates', {
    name: 't',
    subject: 'Hi {{name}}',
    body: '<p>Hi</p>',
    type,
    ...(from ? { from } : {}),
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function workflow(body: object = {}) {
  const res = await as().post('/workflows', { name: 'Welcome', trigger: { type: 'EVENT', event: 'signup' }, ...body });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

/** A valid graph: trigger → send → wait for purchase (event → exit, timeout → condition → yes: update / no: end). */
async function graph(templateId: string) {
  return {
    steps: [
      { key: 'send', type: 'SEND_EMAIL', config: { templateId } },
      { key: 'wait', type: 'WAIT_FOR_EVENT', config: { event: 'purchase', timeout: { amount: 2, unit: 'days' } } },
      { key: 'bought', type: 'EXIT', config: { reason: 'converted' } },
      {
        key: 'vip',
        type: 'CONDITION',
        config: { filter: [{ field: 'context.trigger.data.plan', operator: 'equals', value: 'pro' }] },
      },
      { key: 'tag', type: 'UPDATE_CONTACT', config: { data: { nudged: true } } },
    ],
    transitions: [
      { from: null, to: 'send' },
      { from: 'send', to: 'wait' },
      { from: 'wait', to: 'bought', branch: 'event' },
      { from: 'wait', to: 'vip', branch: 'timeout' },
      { from: 'vip', to: 'tag', branch: 'yes' },
      { from: 'vip', to: 'bought', branch: 'no' },
    ],
  };
}

describe('happy path', () => {
  test('create (disabled), get, list, patch, delete', async () => {
    const created = await as().post('/workflows', {
      name: 'Onboarding',
      description: 'new users',
      trigger: { type: 'EVENT', event: 'signup' },
    });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({
      name: 'Onboarding',
      description: 'new users',
      trigger: { type: 'EVENT', event: 'signup' },
      allowReentry: false,
      enabled: false,
      steps: [],
      transitions: [],
    });
    const id = created.body.data.id;
    expect((await as().get(`/workflows/${id}`)).body.data.name).toBe('Onboarding');
    const list = await as().get('/workflows?limit=100');
    expect(list.body.data.items.map((w: { id: string }) => w.id)).toContain(id);
    const patched = await as().patch(`/workflows/${id}`, {
      name: 'Renamed',
      trigger: { type: 'MANUAL' },
      allowReentry: true,
    });
    expect(patched.body.data).toMatchObject({
      name: 'Renamed',
      trigger: { type: 'MANUAL', event: null },
      allowReentry: true,
    });
    expect((await as().del(`/workflows/${id}`)).body.data).toEqual({ id, deleted: true });
    expect((await as().get(`/workflows/${id}`)).status).toBe(404);
  });

  test('keyset pages of workflows', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = client(ctx.api.app, p);
    for (let i = 0; i < 3; i++) await c.post('/workflows', { name: `w${i}`, trigger: { type: 'MANUAL' } });
    const first = await c.get('/workflows?limit=2');
    expect(first.body.data).toMatchObject({ hasMore: true, total: 3 });
    const second = await c.get(`/workflows?limit=2&cursor=${first.body.data.nextCursor}`);
    expect(second.body.data).toMatchObject({ hasMore: false, nextCursor: null });
    expect(second.body.data.items.map((w: { name: string }) => w.name)).toEqual(['w0']);
  });

  test('steps and transitions one by one, then enable', async () => {
    const id = await workflow();
    const tpl = await template();
    const send = await as().post(`/workflows/${id}/steps`, {
      type: 'SEND_EMAIL',
      name: 'Welcome mail',
      config: { templateId: tpl },
    });
    expect(send.status).toBe(201);
    expect(send.body.data).toMatchObject({ type: 'SEND_EMAIL', name: 'Welcome mail', config: { templateId: tpl } });
    const delay = await as().post(`/workflows/${id}/steps`, { type: 'DELAY', config: { amount: 3, unit: 'days' } });
    const entry = await as().post(`/workflows/${id}/transitions`, { fromStepId: null, toStepId: send.body.data.id });
    expect(entry.status).toBe(201);
    expect(entry.body.data).toMatchObject({ fromStepId: null, toStepId: send.body.data.id, branch: 'next' });
    await as().post(`/workflows/${id}/transitions`, { fromStepId: send.body.data.id, toStepId: delay.body.data.id });
    const renamed = await as().patch(`/workflows/${id}/steps/${delay.body.data.id}`, {
      name: 'Three days',
      config: { amount: 72, unit: 'hours' },
    });
    expect(renamed.body.data).toMatchObject({ name: 'Three days', config: { amount: 72, unit: 'hours' } });
    const enabled = await as().patch(`/workflows/${id}`, { enabled: true });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data.enabled).toBe(true);
    expect(enabled.body.data.steps).toHaveLength(2);
    expect(enabled.body.data.transitions).toHaveLength(2);
  });

  test('PUT graph replaces the graph; steps given by id are kept', async () => {
    const id = await workflow();
    const tpl = await template();
    const put = await as().put(`/workflows/${id}/graph`, await graph(tpl));
    expect(put.status).toBe(200);
    expect(put.body.data.steps).toHaveLength(5);
    expect(put.body.data.transitions).toHaveLength(6);
    const send = put.body.data.steps.find((s: { type: string }) => s.type === 'SEND_EMAIL');
    const again = await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'a', id: send.id, type: 'SEND_EMAIL', config: { templateId: tpl } }],
      transitions: [{ from: null, to: 'a' }],
    });
    expect(again.status).toBe(200);
    expect(again.body.data.steps.map((s: { id: string }) => s.id)).toEqual([send.id]);
    expect((await as().patch(`/workflows/${id}`, { enabled: true })).status).toBe(200);
  });

  test('manual start, executions list and detail, cancel', async () => {
    const id = await workflow({ trigger: { type: 'MANUAL' } });
    const tpl = await template();
    await as().put(`/workflows/${id}/graph`, await graph(tpl));
    await as().patch(`/workflows/${id}`, { enabled: true });
    const email = recipient('wf');
    const contact = await as().post('/contacts', { email });
    const started = await as().post(`/workflows/${id}/executions`, { email, data: { plan: 'pro' } });
    expect(started.status).toBe(201);
    expect(started.body.data).toMatchObject({
      workflowId: id,
      contactId: contact.body.data.id,
      status: 'RUNNING',
      context: { trigger: { name: 'manual', data: { plan: 'pro' } } },
    });
    const eid = started.body.data.id;
    const again = await as().post(`/workflows/${id}/executions`, { contactId: contact.body.data.id });
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('CONFLICT');
    const list = await as().get(`/workflows/${id}/executions?status=RUNNING`);
    expect(list.body.data.items.map((x: { id: string }) => x.id)).toEqual([eid]);
    expect((await as().get(`/workflows/${id}/executions?status=COMPLETED`)).body.data).toMatchObject({
      total: 0,
      totalExact: true,
    });
    const detail = await as().get(`/workflows/${id}/executions/${eid}`);
    expect(detail.body.data).toMatchObject({ id: eid, steps: [] });
    const cancelled = await as().post(`/workflows/${id}/executions/${eid}/cancel`, {});
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.data).toMatchObject({ status: 'CANCELLED' });
    expect(cancelled.body.data.finishedAt).toBeTruthy();
    const twice = await as().post(`/workflows/${id}/executions/${eid}/cancel`, {});
    expect(twice.status).toBe(409);
    expect(twice.body.error.code).toBe('INVALID_STATE');
  });

  test('removing the step an execution stands on ends it EXITED (step removed), with workflow.exited written', async () => {
    const id = await workflow({ trigger: { type: 'MANUAL' } });
    await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'd', type: 'DELAY', config: { amount: 1, unit: 'days' } }],
      transitions: [{ from: null, to: 'd' }],
    });
    await as().patch(`/workflows/${id}`, { enabled: true });
    const email = recipient('rm');
    await as().post('/contacts', { email });
    const started = await as().post(`/workflows/${id}/executions`, { email });
    const put = await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'x', type: 'EXIT', config: {} }],
      transitions: [{ from: null, to: 'x' }],
    });
    expect(put.status).toBe(200);
    const x = await as().get(`/workflows/${id}/executions/${started.body.data.id}`);
    expect(x.body.data).toMatchObject({ status: 'EXITED', exitReason: 'step removed' });
    expect(x.body.data.finishedAt).toBeTruthy();
  });

  test('with re-entry, one contact can be started again', async () => {
    const id = await workflow({ trigger: { type: 'MANUAL' }, allowReentry: true });
    await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'x', type: 'EXIT', config: {} }],
      transitions: [{ from: null, to: 'x' }],
    });
    await as().patch(`/workflows/${id}`, { enabled: true });
    const email = recipient('re');
    await as().post('/contacts', { email });
    expect((await as().post(`/workflows/${id}/executions`, { email })).status).toBe(201);
    expect((await as().post(`/workflows/${id}/executions`, { email })).status).toBe(201);
    expect((await as().get(`/workflows/${id}/executions`)).body.data.total).toBe(2);
  });

  test('the WEBHOOK signing secret is made once per project', async () => {
    const a = await as().get('/workflows/webhook-secret');
    expect(a.status).toBe(200);
    expect(a.body.data.secret).toMatch(/^whsec_/);
    expect((await as().get('/workflows/webhook-secret')).body.data.secret).toBe(a.body.data.secret);
  });
});

describe('errors', () => {
  test('422 on bad workflow fields', async () => {
    const noEvent = await as().post('/workflows', { name: 'x', trigger: { type: 'EVENT' } });
    expect(noEvent.status).toBe(422);
    expect(noEvent.body.error.errors[0].field).toBe('trigger.event');
    const badType = await as().post('/workflows', { name: 'x', trigger: { type: 'CRON' } });
    expect(badType.status).toBe(422);
    expect(badType.body.error.errors[0]).toMatchObject({ field: 'trigger.type', code: 'invalid_enum_value' });
    const extra = await as().post('/workflows', { name: 'x', trigger: { type: 'MANUAL' }, color: 'red' });
    expect(extra.body.error.errors[0]).toMatchObject({ field: 'color', code: 'unrecognized_keys' });
  });

  test('422 on step configs, naming the field', async () => {
    const id = await workflow();
    const cases: [object, string][] = [
      [{ type: 'DELAY', config: { amount: 0, unit: 'days' } }, 'config.amount'],
      [{ type: 'DELAY', config: { amount: 2, unit: 'years' } }, 'config.unit'],
      [{ type: 'DELAY', config: { amount: 400, unit: 'days' } }, 'config'],
      [{ type: 'WAIT_FOR_EVENT', config: { event: 'x', timeout: { amount: 60, unit: 'weeks' } } }, 'config.timeout'],
      [{ type: 'SEND_EMAIL', config: { templateId: '00000000-0000-7000-8000-000000000000' } }, 'config.templateId'],
      [{ type: 'SEND_EMAIL', config: {} }, 'config.templateId'],
      [
        { type: 'CONDITION', config: { filter: [{ field: 'nope', operator: 'equals', value: 1 }] } },
        'config.filter.0.field',
      ],
      [{ type: 'WEBHOOK', config: { url: 'http://127.0.0.1:9/x' } }, 'config.url'],
      [
        { type: 'WEBHOOK', config: { url: 'https://hooks.example.com', headers: { 'Idempotency-Key': 'mine' } } },
        'config.headers.Idempotency-Key',
      ],
      [{ type: 'UPDATE_CONTACT', config: {} }, 'config'],
      [{ type: 'LOOP', config: {} }, 'type'],
    ];
    for (const [body, field] of cases) {
      const res = await as().post(`/workflows/${id}/steps`, body);
      expect({ body, status: res.status }).toEqual({ body, status: 422 });
      expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
  });

  test('a template without a from address, or with an unverified sender, is refused', async () => {
    const id = await workflow();
    const noFrom = await template('TRANSACTIONAL', null);
    const res = await as().post(`/workflows/${id}/steps`, { type: 'SEND_EMAIL', config: { templateId: noFrom } });
    expect(res.status).toBe(422);
    expect(res.body.error.errors[0].field).toBe('config.from');
    const unverified = await as().post(`/workflows/${id}/steps`, {
      type: 'SEND_EMAIL',
      config: { templateId: noFrom, from: 'a@not-ours.example' },
    });
    expect(unverified.body.error.errors[0].field).toBe('config.from');
  });

  test('transitions: unknown steps, wrong branch, a second edge (409)', async () => {
    const id = await workflow();
    const cond = await as().post(`/workflows/${id}/steps`, { type: 'CONDITION', config: { filter: [] } });
    const exit = await as().post(`/workflows/${id}/steps`, { type: 'EXIT', config: {} });
    const c = cond.body.data.id;
    const e = exit.body.data.id;
    const unknown = await as().post(`/workflows/${id}/transitions`, {
      fromStepId: c,
      toStepId: '00000000-0000-7000-8000-000000000000',
      branch: 'yes',
    });
    expect(unknown.body.error.errors[0].field).toBe('toStepId');
    const wrong = await as().post(`/workflows/${id}/transitions`, { fromStepId: c, toStepId: e });
    expect(wrong.status).toBe(422);
    expect(wrong.body.error.errors[0]).toMatchObject({ field: 'branch', message: expect.stringContaining('yes, no') });
    const fromExit = await as().post(`/workflows/${id}/transitions`, { fromStepId: e, toStepId: c });
    expect(fromExit.body.error.errors[0].message).toMatch(/EXIT/);
    expect(
      (await as().post(`/workflows/${id}/transitions`, { fromStepId: c, toStepId: e, branch: 'yes' })).status,
    ).toBe(201);
    const dup = await as().post(`/workflows/${id}/transitions`, { fromStepId: c, toStepId: e, branch: 'yes' });
    expect(dup.status).toBe(409);
  });

  test('enable refuses an incomplete graph and lists every problem; nothing changes', async () => {
    const id = await workflow();
    const cond = await as().post(`/workflows/${id}/steps`, { type: 'CONDITION', config: { filter: [] } });
    await as().post(`/workflows/${id}/steps`, { type: 'EXIT', config: {} });
    const res = await as().patch(`/workflows/${id}`, { enabled: true, name: 'changed' });
    expect(res.status).toBe(422);
    const messages = res.body.error.errors.map((e: { field: string; message: string }) => `${e.field}: ${e.message}`);
    expect(messages).toEqual(
      expect.arrayContaining([
        'graph: the trigger needs a transition to the first step',
        `steps.${cond.body.data.id}: a CONDITION step needs a yes transition`,
        `steps.${cond.body.data.id}: a CONDITION step needs a no transition`,
      ]),
    );
    const after = await as().get(`/workflows/${id}`);
    expect(after.body.data).toMatchObject({ enabled: false, name: 'Welcome' });
  });

  test('PUT graph: cycles without a delay, unreachable steps, incomplete branches, foreign ids; nothing changes', async () => {
    const id = await workflow();
    const tpl = await template();
    const good = await as().put(`/workflows/${id}/graph`, await graph(tpl));
    const before = good.body.data;
    const cycle = await as().put(`/workflows/${id}/graph`, {
      steps: [
        { key: 'a', type: 'UPDATE_CONTACT', config: { data: { n: 1 } } },
        { key: 'b', type: 'CONDITION', config: { filter: [] } },
        { key: 'lost', type: 'EXIT', config: {} },
      ],
      transitions: [
        { from: null, to: 'a' },
        { from: 'a', to: 'b' },
        { from: 'b', to: 'a', branch: 'yes' },
        { from: 'b', to: 'b', branch: 'no' },
      ],
    });
    expect(cycle.status).toBe(422);
    const fields = cycle.body.error.errors.map((e: { field: string; message: string }) => `${e.field}: ${e.message}`);
    expect(fields).toEqual(
      expect.arrayContaining([
        'steps.2: is not reachable from the trigger',
        expect.stringMatching(/cycle with no DELAY/),
      ]),
    );
    const withDelay = await as().put(`/workflows/${id}/graph`, {
      steps: [
        { key: 'a', type: 'UPDATE_CONTACT', config: { data: { n: 1 } } },
        { key: 'd', type: 'DELAY', config: { amount: 1, unit: 'days' } },
      ],
      transitions: [
        { from: null, to: 'a' },
        { from: 'a', to: 'd' },
        { from: 'd', to: 'a' },
      ],
    });
    expect(withDelay.status).toBe(200);
    const foreign = await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'a', id: before.steps[0].id, type: 'EXIT', config: {} }],
      transitions: [{ from: null, to: 'a' }],
    });
    expect(foreign.status).toBe(422);
    expect(foreign.body.error.errors[0].field).toBe('steps.0.id');
    const badKey = await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'a', type: 'EXIT', config: {} }],
      transitions: [{ from: null, to: 'zz' }],
    });
    expect(badKey.body.error.errors[0]).toMatchObject({
      field: 'transitions.0',
      message: 'to: no step zz in this workflow',
    });
    expect((await as().get(`/workflows/${id}`)).body.data.steps).toHaveLength(2);
  });

  test('an enabled workflow keeps a valid graph: breaking edits are refused', async () => {
    const id = await workflow();
    const tpl = await template();
    const g = (await as().put(`/workflows/${id}/graph`, await graph(tpl))).body.data;
    await as().patch(`/workflows/${id}`, { enabled: true });
    const add = await as().post(`/workflows/${id}/steps`, { type: 'EXIT', config: {} });
    expect(add.status).toBe(422);
    expect(add.body.error.errors[0].message).toBe('is not reachable from the trigger');
    const entry = g.transitions.find((t: { fromStepId: string | null }) => t.fromStepId === null);
    expect((await as().del(`/workflows/${id}/transitions/${entry.id}`)).status).toBe(422);
    expect((await as().get(`/workflows/${id}`)).body.data.steps).toHaveLength(5);
  });

  test('manual start: disabled workflow (409), unknown contact (422), neither or both of contactId/email (422)', async () => {
    const id = await workflow({ trigger: { type: 'MANUAL' } });
    const email = recipient('m');
    await as().post('/contacts', { email });
    const disabled = await as().post(`/workflows/${id}/executions`, { email });
    expect(disabled.status).toBe(409);
    expect(disabled.body.error.code).toBe('INVALID_STATE');
    await as().put(`/workflows/${id}/graph`, {
      steps: [{ key: 'x', type: 'EXIT', config: {} }],
      transitions: [{ from: null, to: 'x' }],
    });
    await as().patch(`/workflows/${id}`, { enabled: true });
    const unknown = await as().post(`/workflows/${id}/executions`, { email: recipient('nobody') });
    expect(unknown.status).toBe(422);
    expect(unknown.body.error.errors[0].field).toBe('email');
    expect((await as().post(`/workflows/${id}/executions`, {})).status).toBe(422);
  });

  test('400 on a bad id or cursor; 404 on unknown ids', async () => {
    expect((await as().get('/workflows/nope')).status).toBe(400);
    expect((await as().get('/workflows?cursor=zzz')).status).toBe(400);
    const missing = '00000000-0000-7000-8000-000000000000';
    expect((await as().get(`/workflows/${missing}`)).status).toBe(404);
    expect((await as().post(`/workflows/${missing}/steps`, { type: 'EXIT', config: {} })).status).toBe(404);
    expect((await as().get(`/workflows/${missing}/executions`)).status).toBe(404);
    expect((await as().del(`/workflows/${missing}/executions/${missing}`)).status).toBe(404);
    expect((await as().del(`/workflows/${missing}/executions/nope`)).status).toBe(400);
  });

  test('page/pageSize beside cursor: 400 past 10,000 rows or out of range', async () => {
    const deep = await as().get('/workflows?page=200&pageSize=100');
    expect(deep.status).toBe(400);
    expect(deep.body.error.errors[0].field).toBe('page');
    expect((await as().get('/workflows?pageSize=101')).status).toBe(400);
    expect((await as().get('/workflows?page=0')).status).toBe(400);
    const id = await workflow();
    expect((await as().get(`/workflows/${id}/executions?page=102&pageSize=100`)).status).toBe(400);
  });
});

describe('security', () => {
  test('a public key is refused; another project sees none of it', async () => {
    const id = await workflow();
    const pk = await request(ctx.api.app).get('/workflows').set('Authorization', `Bearer ${ctx.p.publicKey}`);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
    const other = client(ctx.api.app, await createTestProject(ctx.api.database));
    expect((await other.get(`/workflows/${id}`)).status).toBe(404);
    expect((await other.patch(`/workflows/${id}`, { name: 'x' })).status).toBe(404);
    expect((await other.del(`/workflows/${id}`)).status).toBe(404);
    expect((await other.post(`/workflows/${id}/steps`, { type: 'EXIT', config: {} })).status).toBe(404);
    expect((await other.get(`/workflows/${id}/executions`)).status).toBe(404);
    expect((await other.get('/workflows')).body.data.total).toBe(0);
    expect((await other.get('/workflows?page=1&pageSize=5')).body.data).toMatchObject({
      workflows: [],
      total: 0,
      page: 1,
      totalPages: 1,
    });
    const pkCancel = await request(ctx.api.app)
      .delete(`/workflows/${id}/executions/${id}`)
      .set('Authorization', `Bearer ${ctx.p.publicKey}`);
    expect(pkCancel.status).toBe(403);
    // A SEND_EMAIL step cannot use another project's template.
    const theirs = await other.post('/templates', {
      name: 't',
      subject: 's',
      body: 'b',
      type: 'TRANSACTIONAL',
      from: 'x@x.example',
    });
    const res = await as().post(`/workflows/${id}/steps`, {
      type: 'SEND_EMAIL',
      config: { templateId: theirs.body.data.id },
    });
    expect(res.body.error.errors[0].field).toBe('config.templateId');
  });
});
