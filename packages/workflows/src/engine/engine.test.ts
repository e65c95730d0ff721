/**
 * The engine's state moves against real Postgres, without HTTP or BullMQ: runs hand over what committed instead of
 * enqueueing it. On a database of its own, as the inbox drain takes every project's rows.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { and, eq, sql } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { normalizeEmail } from '@mailroom/platform/address';
import { createDatabase, type Database } from '@mailroom/db/client';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { createTemplate } from '@mailroom/mail/queries/templates';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { trackEvent } from '@mailroom/contacts/queries/track-batch';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { loadWorkflowGraph } from '../queries/workflows';
import { emails } from '@mailroom/db/schema/emails';
import { webhookDeliveries } from '@mailroom/db/schema/webhooks';
import { workflowExecutions, workflowStepRuns } from '@mailroom/db/schema/workflows';
import { dropDatabase, freshDatabase } from '../../../../test/support/services';
import { claimExecution } from '../queries/workflow-engine';
import { cancelWorkflowExecution, startExecution } from '../graph/executions';
import { replaceWorkflowGraph, type GraphInput } from '../graph/replace';
import { editWorkflow, newWorkflow } from '../graph/workflow';
import { createWorkflowEngine, type WorkflowEngine } from './engine';
import { drainInboxOnce, type InboxBatch } from './inbox';
import { ExecutionRun, type Handover } from './run';
import { engineGraph } from './steps';

const ADMIN = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const dbName = `mailroom_test_wfengine_${Date.now()}_${randomBytes(3).toString('hex')}`;
const config = { workflowLeaseMs: 5_000, workflowRetryBackoffMs: 50, webhookAllowPrivateTargets: true };
const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');

let database: Database;
let engine: WorkflowEngine;

beforeAll(async () => {
  const url = await freshDatabase(ADMIN, dbName);
  database = createDatabase({ url, poolSize: 4, applicationName: 'test-workflow-engine' });
  engine = createWorkflowEngine({ db: database.db, config });
});
afterAll(async () => {
  await database?.close();
  await dropDatabase(ADMIN, dbName);
});

/** A project with a verified domain, a contact, a template and an endpoint subscribed to `workflow.*`. */
async function project() {
  const db = database.db;
  const p = await createProject(db, `wf ${randomBytes(3).toString('hex')}`);
  const domain = `d${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(db, p.id, domain, true);
  const [contact] = await upsertContacts(db, p.id, [
    {
      email: normalizeEmail(`c.${randomBytes(4).toString('hex')}@inbox.test`),
      subscribed: true,
      defaultSubscribed: true,
    },
  ]);
  const template = await createTemplate(db, p.id, {
    name: 't',
    subject: 'Hi',
    body: '<p>Hi</p>',
    type: 'TRANSACTIONAL',
    from: `wf@${domain}`,
  });
  await createWebhookEndpoint(db, p.id, {
    url: 'https://hooks.example.com/x',
    eventTypes: ['workflow.*'],
    secret: `whsec_${randomBytes(16).toString('base64')}`,
  });
  return { id: p.id, contact, template };
}

type P = Awaited<ReturnType<typeof project>>;

/** An enabled MANUAL workflow with `graph`, and an execution of it for the project's contact. */
async function started(p: P, graph: GraphInput) {
  const w = await newWorkflow(database.db, p.id, { name: 'wf', trigger: { type: 'MANUAL' } });
  await replaceWorkflowGraph(database.db, p.id, w.id, graph, true);
  await editWorkflow(database.db, p.id, w.id, { enabled: true }, true);
  const { execution } = await database.db.transaction((tx) =>
    startExecution(tx, p.id, w.id, { contactId: p.contact.id, data: { plan: 'pro' } }, false),
  );
  return { workflowId: w.id, executionId: execution.id };
}

/** Runs the execution once; @returns the outcome and what was handed over. */
async function runOnce(p: P, executionId: string) {
  const handed: Handover[] = [];
  const outcome = await engine.run(executionId, p.id, log, async (h) => {
    handed.push(h);
  });
  return { outcome, handover: handed[0] };
}

async function row(executionId: string) {
  const [x] = await database.db.select().from(workflowExecutions).where(eq(workflowExecutions.id, executionId));
  return x;
}

async function runs(executionId: string) {
  return database.db
    .select()
    .from(workflowStepRuns)
    .where(eq(workflowStepRuns.executionId, executionId))
    .orderBy(workflowStepRuns.version);
}

/** Moves the execution's due time into the past, as if its wait had lasted. */
async function elapse(executionId: string) {
  await database.db.execute(
    sql`update workflow_executions set due_at = now() - interval '1 second' where id = ${executionId}::uuid`,
  );
}

const delayThenSend = (p: P): GraphInput => ({
  steps: [
    { key: 'wait', type: 'DELAY', config: { amount: 1, unit: 'hours' } },
    { key: 'send', type: 'SEND_EMAIL', config: { templateId: p.template.id } },
  ],
  transitions: [
    { from: null, to: 'wait' },
    { from: 'wait', to: 'send' },
  ],
});

const waitForEvent: GraphInput = {
  steps: [
    { key: 'wait', type: 'WAIT_FOR_EVENT', config: { event: 'paid', timeout: { amount: 2, unit: 'days' } } },
    { key: 'yes', type: 'UPDATE_CONTACT', config: { data: { paid: true } } },
    { key: 'no', type: 'EXIT', config: { reason: 'never paid' } },
  ],
  transitions: [
    { from: null, to: 'wait' },
    { from: 'wait', to: 'yes', branch: 'event' },
    { from: 'wait', to: 'no', branch: 'timeout' },
  ],
};

describe('the engine', () => {
  test('runs to a DELAY and waits with due_at; a run before it is due changes nothing; after it, the execution runs on', async () => {
    const p = await project();
    const { executionId } = await started(p, delayThenSend(p));
    const before = Date.now();
    const first = await runOnce(p, executionId);
    expect(first.outcome).toEqual({ outcome: 'ran', steps: 1, status: 'WAITING' });
    const waiting = await row(executionId);
    expect(waiting.status).toBe('WAITING');
    expect(waiting.dueAt!.getTime()).toBeGreaterThanOrEqual(before + 3_600_000 - 1_000);
    expect(waiting.leaseToken).toBeNull();
    expect(first.handover.wake).toMatchObject({
      execution: { id: executionId, version: waiting.version },
      at: waiting.dueAt,
    });
    expect(first.handover.sends).toEqual([]);

    const early = await runOnce(p, executionId);
    expect(early.outcome).toEqual({ outcome: 'ran', steps: 0, status: 'WAITING' });
    expect((await row(executionId)).version).toBe(waiting.version);

    await elapse(executionId);
    const second = await runOnce(p, executionId);
    expect(second.outcome).toMatchObject({ outcome: 'ran', status: 'COMPLETED' });
    expect(second.handover.sends).toHaveLength(1);
    const [email] = await database.db.select().from(emails).where(eq(emails.id, second.handover.sends[0]));
    expect(email).toMatchObject({
      workflowExecutionId: executionId,
      toEmail: p.contact.email,
      source: 'workflow',
      test: false,
    });
    expect((await runs(executionId)).map((r) => [r.stepType, r.status])).toEqual([
      ['DELAY', 'COMPLETED'],
      ['SEND_EMAIL', 'COMPLETED'],
    ]);
    // A retried job after the end repeats nothing.
    expect((await runOnce(p, executionId)).outcome).toEqual({
      outcome: 'skipped',
      reason: 'execution already COMPLETED',
    });
  });

  test('WAIT_FOR_EVENT is woken by the event (through the inbox) and leaves by the event branch', async () => {
    const p = await project();
    const { executionId } = await started(p, waitForEvent);
    await runOnce(p, executionId);
    const waiting = await row(executionId);
    expect(waiting).toMatchObject({ status: 'WAITING', waitEvent: 'paid' });

    await trackEvent(database.db, p.id, {
      email: p.contact.email,
      name: 'paid',
      contactData: {},
      eventData: { amount: 10 },
    });
    const batches: InboxBatch[] = [];
    const totals = await drainInboxOnce(database.db, async (b) => {
      batches.push(b);
    });
    expect(totals.woken).toBe(1);
    expect(batches[0].woken).toEqual([{ id: executionId, projectId: p.id, version: waiting.version + 1 }]);
    expect(await row(executionId)).toMatchObject({ status: 'RUNNING', resumeBranch: 'event' });

    const { outcome } = await runOnce(p, executionId);
    expect(outcome).toMatchObject({ outcome: 'ran', status: 'COMPLETED' });
    const x = await row(executionId);
    expect(x.context.event).toMatchObject({ name: 'paid', data: { amount: 10 } });
    const r = await runs(executionId);
    expect(r.map((s) => [s.stepType, s.status, s.branch])).toEqual([
      ['WAIT_FOR_EVENT', 'COMPLETED', 'event'],
      ['UPDATE_CONTACT', 'COMPLETED', 'next'],
    ]);
  });

  test('WAIT_FOR_EVENT without the event times out by the timeout branch', async () => {
    const p = await project();
    const { executionId } = await started(p, waitForEvent);
    await runOnce(p, executionId);
    await elapse(executionId);
    const { outcome, handover } = await runOnce(p, executionId);
    expect(outcome).toMatchObject({ outcome: 'ran', status: 'EXITED' });
    expect(await row(executionId)).toMatchObject({ status: 'EXITED', exitReason: 'never paid', dueAt: null });
    expect((await runs(executionId)).map((s) => [s.stepType, s.branch])).toEqual([
      ['WAIT_FOR_EVENT', 'timeout'],
      ['EXIT', null],
    ]);
    expect(handover.deliveries).toHaveLength(1);
  });

  test('a cancel bumps the version: a step in flight loses its move and its email rolls back', async () => {
    const p = await project();
    const { workflowId, executionId } = await started(p, {
      steps: [{ key: 'send', type: 'SEND_EMAIL', config: { templateId: p.template.id } }],
      transitions: [{ from: null, to: 'send' }],
    });
    const lease = randomUUID();
    const claim = await claimExecution(database.db, executionId, lease, config.workflowLeaseMs);
    if (claim.kind !== 'claimed') throw new Error(`not claimed: ${claim.kind}`);
    const cancelled = await cancelWorkflowExecution(database.db, p.id, workflowId, executionId);
    expect(cancelled.execution.version).toBeGreaterThan(claim.execution.version);

    // The run still holds the row it claimed before the cancel.
    const graph = engineGraph((await loadWorkflowGraph(database.db, p.id, workflowId))!);
    const run = new ExecutionRun({ db: database.db, config }, claim.execution, graph, lease, log);
    await run.run(false);
    const handover = await run.finish(false);
    expect(handover.sends).toEqual([]);
    expect(await database.db.select().from(emails).where(eq(emails.workflowExecutionId, executionId))).toEqual([]);
    expect(await row(executionId)).toMatchObject({ status: 'CANCELLED', version: cancelled.execution.version });
    await expect(cancelWorkflowExecution(database.db, p.id, workflowId, executionId)).rejects.toMatchObject({
      statusCode: 409,
    });
  });

  test('a final status writes the workflow.* webhook delivery in the same move', async () => {
    const p = await project();
    const { workflowId, executionId } = await started(p, {
      steps: [{ key: 'update', type: 'UPDATE_CONTACT', config: { data: { tier: 'gold' } } }],
      transitions: [{ from: null, to: 'update' }],
    });
    const { outcome, handover } = await runOnce(p, executionId);
    expect(outcome).toEqual({ outcome: 'ran', steps: 1, status: 'COMPLETED' });
    expect(handover.deliveries).toHaveLength(1);
    const [delivery] = await database.db
      .select()
      .from(webhookDeliveries)
      .where(and(eq(webhookDeliveries.projectId, p.id), eq(webhookDeliveries.eventType, 'workflow.completed')));
    expect(delivery.id).toBe(handover.deliveries[0].id);
    expect(delivery.payload).toMatchObject({
      type: 'workflow.completed',
      data: { workflowId, executionId, contactId: p.contact.id, status: 'COMPLETED' },
    });
  });

  test('a deleted workflow or execution is skipped', async () => {
    const p = await project();
    expect((await runOnce(p, randomUUID())).outcome).toEqual({
      outcome: 'skipped',
      reason: 'execution no longer exists',
    });
  });
});
