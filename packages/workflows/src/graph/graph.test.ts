/**
 * The graph rules against real Postgres, without HTTP: creating and enabling workflows, piecewise edits (Plunk's
 * autoConnect, branches, conflicts), an enabled workflow keeping a graph that can run, whole-graph replacement.
 * No execution is started here, so the shared test database is enough.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { AppError } from '@mailroom/platform/errors';
import { createDatabase, type Database } from '@mailroom/db/client';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { createTemplate, deleteTemplate } from '@mailroom/mail/queries/templates';
import { getWorkflow, loadWorkflowGraph } from '../queries/workflows';
import { addStep, addTransition, removeStep, removeTransition } from './edit';
import { replaceWorkflowGraph } from './replace';
import { editWorkflow, newWorkflow } from './workflow';

let database: Database;

beforeAll(() => {
  database = createDatabase({
    url: process.env.TEST_DATABASE_URL!,
    poolSize: 3,
    applicationName: 'test-workflow-graph',
  });
});
afterAll(async () => {
  await database.close();
});

async function project() {
  const p = await createProject(database.db, `graph ${randomBytes(3).toString('hex')}`);
  const domain = `d${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(database.db, p.id, domain, true);
  const template = await createTemplate(database.db, p.id, {
    name: 't',
    subject: 'Hi',
    body: '<p>Hi</p>',
    type: 'TRANSACTIONAL',
    from: `wf@${domain}`,
  });
  return { id: p.id, template };
}

/** The error `work` throws: its status and the fields of its field errors. */
async function refusal(work: Promise<unknown>): Promise<{ status: number; fields: string[]; messages: string[] }> {
  try {
    await work;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    const errors = err.options.errors ?? [];
    return { status: err.statusCode, fields: errors.map((e) => e.field), messages: errors.map((e) => e.message) };
  }
  throw new Error('expected a refusal');
}

describe('workflow rules', () => {
  test("a workflow is created disabled, with a trigger (ours or Plunk's)", async () => {
    const p = await project();
    expect(
      await refusal(newWorkflow(database.db, p.id, { name: 'x', trigger: { type: 'MANUAL' }, enabled: true })),
    ).toMatchObject({ status: 422, fields: ['enabled'] });
    expect(await refusal(newWorkflow(database.db, p.id, { name: 'x' }))).toMatchObject({
      status: 422,
      fields: ['trigger'],
    });
    expect(await refusal(newWorkflow(database.db, p.id, { name: 'x', triggerType: 'SCHEDULE' }))).toMatchObject({
      status: 422,
      fields: ['triggerType'],
    });
    const w = await newWorkflow(database.db, p.id, { name: 'x', eventName: 'signup' });
    expect(w).toMatchObject({ enabled: false, triggerType: 'EVENT', triggerEvent: 'signup' });
  });

  test("enabling checks the whole graph and every step's references, and changes nothing when refused", async () => {
    const p = await project();
    const w = await newWorkflow(database.db, p.id, { name: 'x', trigger: { type: 'MANUAL' } });
    expect(await refusal(editWorkflow(database.db, p.id, w.id, { enabled: true }, false))).toMatchObject({
      status: 422,
      fields: ['graph'],
      messages: ['the trigger needs a transition to the first step'],
    });
    const send = await addStep(
      database.db,
      p.id,
      w.id,
      { type: 'SEND_EMAIL', config: { templateId: p.template.id }, autoConnect: true },
      false,
    );
    await deleteTemplate(database.db, p.id, p.template.id);
    expect(
      await refusal(editWorkflow(database.db, p.id, w.id, { enabled: true, name: 'renamed' }, false)),
    ).toMatchObject({
      status: 422,
      fields: [`steps.${send.id}.config.templateId`],
    });
    expect(await getWorkflow(database.db, p.id, w.id)).toMatchObject({ enabled: false, name: 'x' });
  });

  test('autoConnect connects from the last open step; branches are checked; a taken branch conflicts', async () => {
    const p = await project();
    const w = await newWorkflow(database.db, p.id, { name: 'x', trigger: { type: 'MANUAL' } });
    const wait = await addStep(
      database.db,
      p.id,
      w.id,
      { type: 'WAIT_FOR_EVENT', config: { eventName: 'paid', timeout: 60 }, position: { x: 0, y: 0 } },
      false,
    );
    const exit = await addStep(database.db, p.id, w.id, { type: 'EXIT', config: {}, position: { x: 0, y: 1 } }, false);
    const g = (await loadWorkflowGraph(database.db, p.id, w.id))!;
    expect(g.transitions.map((t) => [t.fromStepId, t.toStepId, t.branch])).toEqual([
      [null, wait.id, 'next'],
      [wait.id, exit.id, 'event'],
      [wait.id, exit.id, 'timeout'],
    ]);
    expect(
      await refusal(addTransition(database.db, p.id, w.id, { fromStepId: exit.id, toStepId: wait.id })),
    ).toMatchObject({
      status: 422,
      messages: ['an EXIT step has no outgoing transitions'],
    });
    expect(
      await refusal(addTransition(database.db, p.id, w.id, { fromStepId: w.id, toStepId: exit.id })),
    ).toMatchObject({ status: 409 });
    expect(await refusal(addStep(database.db, p.id, w.id, { type: 'TRIGGER' }, false))).toMatchObject({
      status: 422,
      fields: ['type'],
    });
  });

  test('an enabled workflow keeps a graph that can run: a breaking edit is refused and changes nothing', async () => {
    const p = await project();
    const w = await newWorkflow(database.db, p.id, { name: 'x', trigger: { type: 'MANUAL' } });
    const send = await addStep(
      database.db,
      p.id,
      w.id,
      { type: 'SEND_EMAIL', templateId: p.template.id, position: null, autoConnect: true },
      false,
    );
    await editWorkflow(database.db, p.id, w.id, { enabled: true }, false);
    const before = (await loadWorkflowGraph(database.db, p.id, w.id))!;
    const entry = before.transitions[0];
    expect(await refusal(removeTransition(database.db, p.id, w.id, entry.id))).toMatchObject({
      status: 422,
      fields: ['graph'],
    });
    expect(
      await refusal(addStep(database.db, p.id, w.id, { type: 'DELAY', config: { amount: 1, unit: 'days' } }, false)),
    ).toMatchObject({
      status: 422,
      messages: ['is not reachable from the trigger'],
    });
    expect(await refusal(removeStep(database.db, p.id, w.id, send.id))).toMatchObject({ status: 422 });
    const after = (await loadWorkflowGraph(database.db, p.id, w.id))!;
    expect(after.steps.map((s) => s.id)).toEqual([send.id]);
    expect(after.transitions.map((t) => t.id)).toEqual([entry.id]);
    expect(await refusal(removeTransition(database.db, p.id, randomUUID(), entry.id))).toMatchObject({ status: 404 });
  });

  test('a whole graph is validated before anything changes', async () => {
    const p = await project();
    const w = await newWorkflow(database.db, p.id, { name: 'x', trigger: { type: 'MANUAL' } });
    const bad = await refusal(
      replaceWorkflowGraph(
        database.db,
        p.id,
        w.id,
        {
          steps: [
            { key: 'a', type: 'CONDITION', config: { filter: [{ field: 'email', operator: 'contains', value: '@' }] } },
            { key: 'a', type: 'DELAY', config: { amount: 2, unit: 'years' } },
            { key: 'b', type: 'EXIT' },
          ],
          transitions: [
            { from: null, to: 'a' },
            { from: 'a', to: 'b', branch: 'yes' },
          ],
        },
        false,
      ),
    );
    expect(bad.status).toBe(422);
    expect(bad.fields).toEqual(expect.arrayContaining(['steps.1.key', 'steps.1.config.unit', 'steps.0']));
    expect((await loadWorkflowGraph(database.db, p.id, w.id))!.steps).toEqual([]);

    const foreign = await refusal(
      replaceWorkflowGraph(
        database.db,
        p.id,
        w.id,
        { steps: [{ key: 'a', id: randomUUID(), type: 'EXIT' }], transitions: [{ from: null, to: 'a' }] },
        false,
      ),
    );
    expect(foreign).toMatchObject({ status: 422, fields: ['steps.0.id'] });

    await replaceWorkflowGraph(
      database.db,
      p.id,
      w.id,
      { steps: [{ key: 'a', type: 'EXIT', config: { reason: 'done' } }], transitions: [{ from: null, to: 'a' }] },
      false,
    );
    const g = (await loadWorkflowGraph(database.db, p.id, w.id))!;
    expect(g.steps.map((s) => [s.type, s.name, s.config])).toEqual([['EXIT', 'EXIT', { reason: 'done' }]]);
  });
});
