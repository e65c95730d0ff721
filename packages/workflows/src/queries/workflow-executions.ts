/**
 * Executions of workflows as the API reads and moves them: keyset lists with a capped count, one execution with its
 * step history, a manual start and a cancel. Every query is scoped by project.
 *
 * @module
 */
import { and, asc, eq, inArray, sql, type SQL } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { type ExecutionStatus, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { contacts, workflowExecutions, workflowStepRuns, workflowSteps } from '@mailroom/db/schema';
import { type ExecutionRow, type StepRunRow, type WorkflowRow } from './workflows';
import { stopExecutions } from './workflow-stops';

/** Executions are counted exactly up to this many; beyond it `total` is this lower bound (`totalExact: false`). */
export const EXECUTION_COUNT_CAP = 10_000;

/**
 * One keyset page of a workflow's executions, newest first, optionally of one status or contact. A busy workflow
 * has millions of executions, so `total` is an exact count capped at {@link EXECUTION_COUNT_CAP}.
 */
export function listExecutions(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  q: { limit: number; beforeId?: string; offset?: number; status?: ExecutionStatus; contactId?: string },
) {
  const filters: (SQL | undefined)[] = [
    eq(workflowExecutions.projectId, projectId),
    eq(workflowExecutions.workflowId, workflowId),
  ];
  if (q.status) filters.push(eq(workflowExecutions.status, q.status));
  if (q.contactId) filters.push(eq(workflowExecutions.contactId, q.contactId));
  return keysetList(db, workflowExecutions, and(...filters), { ...q, countCap: EXECUTION_COUNT_CAP });
}

/** An execution of a workflow of the project with its step history (oldest first), or `undefined`. */
export async function getExecution(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  id: string,
): Promise<{ execution: ExecutionRow; steps: StepRunRow[] } | undefined> {
  const [execution] = await db
    .select()
    .from(workflowExecutions)
    .where(
      and(
        eq(workflowExecutions.projectId, projectId),
        eq(workflowExecutions.workflowId, workflowId),
        eq(workflowExecutions.id, id),
      ),
    );
  if (!execution) return undefined;
  const steps = await db
    .select()
    .from(workflowStepRuns)
    .where(and(eq(workflowStepRuns.projectId, projectId), eq(workflowStepRuns.executionId, id)))
    .orderBy(asc(workflowStepRuns.version));
  return { execution, steps };
}

/** The id, name and type of each step of a workflow (what execution answers show of their steps). */
export async function stepSummaries(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
): Promise<Map<string, { id: string; name: string; type: WorkflowStepType }>> {
  const rows = await db
    .select({ id: workflowSteps.id, name: workflowSteps.name, type: workflowSteps.type })
    .from(workflowSteps)
    .where(and(eq(workflowSteps.projectId, projectId), eq(workflowSteps.workflowId, workflowId)));
  return new Map(rows.map((r) => [r.id, r]));
}

/** The email address of each of `contactIds` in the project. */
export async function contactEmails(db: DbOrTx, projectId: string, contactIds: string[]): Promise<Map<string, string>> {
  if (contactIds.length === 0) return new Map();
  const rows = await db
    .select({ id: contacts.id, email: contacts.email })
    .from(contacts)
    .where(and(eq(contacts.projectId, projectId), inArray(contacts.id, [...new Set(contactIds)])));
  return new Map(rows.map((r) => [r.id, r.email]));
}

/** The first step of a workflow (the trigger's transition), or null. */
export function entryStepSql(workflowId: SQL): SQL {
  return sql`(select t.to_step_id from workflow_transitions t where t.workflow_id = ${workflowId} and t.from_step_id is null)`;
}

/**
 * Starts an execution by hand (`POST /workflows/{id}/executions`), with `workflow.started`. Without re-entry a
 * contact that already entered gets `conflict`.
 *
 * @param data - becomes `context.trigger.data`.
 * @param test - a test key's start: a test execution (entry key `test:…`, its emails go to the test sink).
 */
export async function startManualExecution(
  tx: DbOrTx,
  workflow: WorkflowRow,
  contactId: string,
  data: Record<string, unknown>,
  test = false,
): Promise<{ ok: true; execution: ExecutionRow; deliveries: WebhookDeliveryRef[] } | { ok: false }> {
  const id = newId();
  const entryKey = (test ? 'test:' : '') + (workflow.allowReentry ? `manual:${id}` : `contact:${contactId}`);
  const context = { trigger: { name: 'manual', data, at: new Date().toISOString() } };
  const rows = await tx.execute<{ id: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, due_at, entry_key, context, test)
    values (${id}::uuid, ${workflow.projectId}::uuid, ${workflow.id}::uuid, ${contactId}::uuid, 'RUNNING',
      ${entryStepSql(sql`${workflow.id}::uuid`)}, now(), ${entryKey}, ${JSON.stringify(context)}::jsonb, ${test}::boolean)
    on conflict (workflow_id, entry_key) do nothing
    returning id
  `);
  if (rows.rows.length === 0) return { ok: false };
  const [execution] = await tx.select().from(workflowExecutions).where(eq(workflowExecutions.id, id));
  const deliveries = await recordWebhookEvents(tx, workflow.projectId, [
    {
      type: 'workflow.started',
      data: {
        workflowId: workflow.id,
        executionId: id,
        contactId,
        status: 'RUNNING',
        trigger: 'manual',
        ...(test ? { test } : {}),
      },
    },
  ]);
  return { ok: true, execution: execution, deliveries };
}

/**
 * Cancels a live execution: CANCELLED, version bumped so no pending job, timeout or event can move it again.
 * A step in flight in a worker loses its compare-and-set and its effect is rolled back (email, contact update);
 * an HTTP call already made stays made.
 *
 * @returns the row (`cancelled` false when it was already final), or `undefined` when there is no such execution.
 */
export async function cancelExecution(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  id: string,
): Promise<{ execution: ExecutionRow; cancelled: boolean; deliveries: WebhookDeliveryRef[] } | undefined> {
  const { rows, deliveries } = await stopExecutions(
    tx,
    projectId,
    workflowId,
    eq(workflowExecutions.id, id),
    'CANCELLED',
    'execution cancelled',
  );
  const row = rows[0];
  if (!row) {
    const found = await getExecution(tx, projectId, workflowId, id);
    return found && { execution: found.execution, cancelled: false, deliveries: [] };
  }
  return { execution: row, cancelled: true, deliveries };
}

/**
 * The project's secret signing workflow WEBHOOK calls (Standard Webhooks), made on first use by `make`.
 */
export async function workflowWebhookSecret(db: DbOrTx, projectId: string, make: () => string): Promise<string> {
  const read = async () =>
    (
      await db.execute<{ secret: string | null }>(
        sql`select workflow_webhook_secret as secret from projects where id = ${projectId}::uuid`,
      )
    ).rows[0]?.secret;
  const existing = await read();
  if (existing) return existing;
  // Two first uses at once: the row lock makes one write win, the other reads it.
  await db.execute(
    sql`update projects set workflow_webhook_secret = ${make()} where id = ${projectId}::uuid and workflow_webhook_secret is null`,
  );
  return (await read())!;
}
