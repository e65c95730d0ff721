/**
 * Workflows as the API edits them: the workflow, its steps and transitions (one by one or as a whole graph), and
 * its executions (list, history, manual start, cancel). Every query is scoped by project.
 *
 * Removing a step that executions stand on ends those executions EXITED (`step removed`) in the same transaction
 * (`./workflow-stops`), so no execution is left pointing at nothing.
 *
 * @module
 */
import { and, asc, eq, ilike, inArray, or, sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { type WorkflowBranch, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { exitExecutionsAt } from './workflow-stops';
import {
  workflowExecutions,
  workflows,
  workflowStepRuns,
  workflowSteps,
  workflowTransitions,
} from '@mailroom/db/schema';

export type WorkflowRow = typeof workflows.$inferSelect;
export type WorkflowStepRow = typeof workflowSteps.$inferSelect;
export type WorkflowTransitionRow = typeof workflowTransitions.$inferSelect;
export type ExecutionRow = typeof workflowExecutions.$inferSelect;
export type StepRunRow = typeof workflowStepRuns.$inferSelect;

/** A workflow with its whole graph. */
export interface WorkflowGraph {
  workflow: WorkflowRow;
  steps: WorkflowStepRow[];
  transitions: WorkflowTransitionRow[];
}

/** Fields of a new workflow. */
export interface NewWorkflow {
  name: string;
  description?: string | null;
  triggerType: 'EVENT' | 'MANUAL';
  triggerEvent: string | null;
  allowReentry?: boolean;
}

/** Creates a workflow (disabled, no steps). */
export async function createWorkflow(db: DbOrTx, projectId: string, w: NewWorkflow): Promise<WorkflowRow> {
  const [row] = await db
    .insert(workflows)
    .values({
      projectId,
      name: w.name,
      description: w.description ?? null,
      triggerType: w.triggerType,
      triggerEvent: w.triggerEvent,
      allowReentry: w.allowReentry ?? false,
    })
    .returning();
  return row;
}

/** A workflow of the project, or `undefined`. */
export async function getWorkflow(db: DbOrTx, projectId: string, id: string): Promise<WorkflowRow | undefined> {
  const [row] = await db
    .select()
    .from(workflows)
    .where(and(eq(workflows.projectId, projectId), eq(workflows.id, id)));
  return row;
}

/** Locks a workflow of the project for the transaction (serializes edits of one graph). @returns whether it exists. */
export async function lockWorkflow(tx: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await tx.execute(
    sql`select id from workflows where project_id = ${projectId}::uuid and id = ${id}::uuid for update`,
  );
  return rows.rows.length > 0;
}

/**
 * Moves a workflow's `updated_at`: every change of its graph does, in the change's transaction, so the engine's
 * graph cache (keyed by it) never runs an execution on a stale graph.
 */
export async function touchWorkflow(tx: DbOrTx, projectId: string, id: string): Promise<void> {
  await tx.execute(
    sql`update workflows set updated_at = clock_timestamp() where project_id = ${projectId}::uuid and id = ${id}::uuid`,
  );
}

/** A workflow with its steps and transitions (both in creation order), or `undefined`. */
export async function loadWorkflowGraph(db: DbOrTx, projectId: string, id: string): Promise<WorkflowGraph | undefined> {
  const workflow = await getWorkflow(db, projectId, id);
  if (!workflow) return undefined;
  // One after the other: `db` may be a transaction (one connection), where pg would queue concurrent queries and
  // warns that pg 9 will refuse them.
  const steps = await db
    .select()
    .from(workflowSteps)
    .where(and(eq(workflowSteps.projectId, projectId), eq(workflowSteps.workflowId, id)))
    .orderBy(asc(workflowSteps.id));
  const transitions = await db
    .select()
    .from(workflowTransitions)
    .where(and(eq(workflowTransitions.projectId, projectId), eq(workflowTransitions.workflowId, id)))
    .orderBy(asc(workflowTransitions.id));
  return { workflow, steps, transitions };
}

/**
 * One page of the project's workflows, newest first: keyset after `beforeId`, or `offset` rows in (Plunk's page
 * numbers). `search` matches name or description, case-insensitively.
 */
export function listWorkflows(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string; offset?: number; enabled?: boolean; search?: string },
) {
  const pattern = q.search === undefined ? undefined : `%${q.search.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
  return keysetList(
    db,
    workflows,
    and(
      eq(workflows.projectId, projectId),
      q.enabled === undefined ? undefined : eq(workflows.enabled, q.enabled),
      pattern === undefined ? undefined : or(ilike(workflows.name, pattern), ilike(workflows.description, pattern)),
    ),
    q,
  );
}

/** Changes a workflow's fields. @returns the row, or `undefined` when the project has no such workflow. */
export async function updateWorkflow(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: Partial<
    Pick<WorkflowRow, 'name' | 'description' | 'triggerType' | 'triggerEvent' | 'allowReentry' | 'enabled'>
  >,
): Promise<WorkflowRow | undefined> {
  const [row] = await db
    .update(workflows)
    .set({ ...patch, updatedAt: new Date() })
    .where(and(eq(workflows.projectId, projectId), eq(workflows.id, id)))
    .returning();
  return row;
}

/** Deletes a workflow with its steps, transitions and executions (their jobs then find nothing to do). */
export async function deleteWorkflow(db: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(workflows)
    .where(and(eq(workflows.projectId, projectId), eq(workflows.id, id)))
    .returning({ id: workflows.id });
  return rows.length > 0;
}

/** Adds a step; `position` is where an editor draws it (stored, never read by the engine). */
export async function insertStep(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  s: {
    type: WorkflowStepType;
    name: string;
    config: Record<string, unknown>;
    position?: Record<string, unknown> | null;
  },
): Promise<WorkflowStepRow> {
  const [row] = await db
    .insert(workflowSteps)
    .values({ projectId, workflowId, type: s.type, name: s.name, config: s.config, position: s.position ?? null })
    .returning();
  return row;
}

/** A step of a workflow of the project, or `undefined`. */
export async function getStep(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  stepId: string,
): Promise<WorkflowStepRow | undefined> {
  const [row] = await db
    .select()
    .from(workflowSteps)
    .where(
      and(
        eq(workflowSteps.projectId, projectId),
        eq(workflowSteps.workflowId, workflowId),
        eq(workflowSteps.id, stepId),
      ),
    );
  return row;
}

/** Changes a step's name, configuration or position. */
export async function updateStep(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  stepId: string,
  patch: { name?: string; config?: Record<string, unknown>; position?: Record<string, unknown> | null },
): Promise<WorkflowStepRow | undefined> {
  const [row] = await db
    .update(workflowSteps)
    .set({ ...patch, updatedAt: new Date() })
    .where(
      and(
        eq(workflowSteps.projectId, projectId),
        eq(workflowSteps.workflowId, workflowId),
        eq(workflowSteps.id, stepId),
      ),
    )
    .returning();
  return row;
}

/**
 * Deletes a step and its transitions; executions standing on it end EXITED. Run in a transaction.
 * @returns `undefined` when there is no such step, else the webhook deliveries to enqueue.
 */
export async function deleteStep(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  stepId: string,
): Promise<WebhookDeliveryRef[] | undefined> {
  const step = await getStep(tx, projectId, workflowId, stepId);
  if (!step) return undefined;
  const deliveries = await exitExecutionsAt(tx, projectId, workflowId, [stepId]);
  await tx.delete(workflowSteps).where(and(eq(workflowSteps.projectId, projectId), eq(workflowSteps.id, stepId)));
  return deliveries;
}

/** Adds a transition; a second edge for the same (from, branch) violates a unique index (the route says 409). */
export async function insertTransition(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  t: { fromStepId: string | null; toStepId: string; branch: WorkflowBranch },
): Promise<WorkflowTransitionRow> {
  const [row] = await db
    .insert(workflowTransitions)
    .values({ projectId, workflowId, ...t })
    .returning();
  return row;
}

/** Deletes a transition. @returns whether it existed. */
export async function deleteTransition(
  db: DbOrTx,
  projectId: string,
  workflowId: string,
  id: string,
): Promise<boolean> {
  const rows = await db
    .delete(workflowTransitions)
    .where(
      and(
        eq(workflowTransitions.projectId, projectId),
        eq(workflowTransitions.workflowId, workflowId),
        eq(workflowTransitions.id, id),
      ),
    )
    .returning({ id: workflowTransitions.id });
  return rows.length > 0;
}

/** A step of a graph replacement: an existing step (`id`) or a new one, named by `key` in transitions. */
export interface GraphStepInput {
  key: string;
  id?: string;
  type: WorkflowStepType;
  name: string;
  config: Record<string, unknown>;
  /** Where an editor draws it; undefined keeps a kept step's position. */
  position?: Record<string, unknown> | null;
}

/**
 * Replaces a workflow's graph in the caller's transaction: steps with an `id` are kept (updated), others are
 * created, steps left out are deleted (executions on them end EXITED), and all transitions are replaced.
 * Transitions name steps by `key`; `from: null` is the trigger. The caller has validated the graph.
 *
 * @returns the new steps by key, and the webhook deliveries to enqueue after commit.
 */
export async function replaceGraph(
  tx: DbOrTx,
  projectId: string,
  workflowId: string,
  steps: GraphStepInput[],
  transitions: { from: string | null; to: string; branch: WorkflowBranch }[],
): Promise<{ ids: Map<string, string>; deliveries: WebhookDeliveryRef[] }> {
  const existing = await tx
    .select({ id: workflowSteps.id })
    .from(workflowSteps)
    .where(and(eq(workflowSteps.projectId, projectId), eq(workflowSteps.workflowId, workflowId)));
  const kept = new Set(steps.map((s) => s.id).filter((id): id is string => id !== undefined));
  const removed = existing.map((s) => s.id).filter((id) => !kept.has(id));
  const deliveries = await exitExecutionsAt(tx, projectId, workflowId, removed);
  await tx
    .delete(workflowTransitions)
    .where(and(eq(workflowTransitions.projectId, projectId), eq(workflowTransitions.workflowId, workflowId)));
  if (removed.length > 0)
    await tx
      .delete(workflowSteps)
      .where(and(eq(workflowSteps.projectId, projectId), inArray(workflowSteps.id, removed)));
  const ids = new Map<string, string>();
  for (const s of steps) {
    if (s.id) {
      await updateStep(tx, projectId, workflowId, s.id, {
        name: s.name,
        config: s.config,
        ...(s.position === undefined ? {} : { position: s.position }),
      });
      ids.set(s.key, s.id);
    }
  }
  const created = steps
    .filter((s) => !s.id)
    .map((s) => ({
      id: newId(),
      projectId,
      workflowId,
      type: s.type,
      name: s.name,
      config: s.config,
      position: s.position ?? null,
      key: s.key,
    }));
  if (created.length > 0) await tx.insert(workflowSteps).values(created.map(({ key: _key, ...row }) => row));
  for (const c of created) ids.set(c.key, c.id);
  if (transitions.length > 0) {
    await tx.insert(workflowTransitions).values(
      transitions.map((t) => ({
        projectId,
        workflowId,
        fromStepId: t.from === null ? null : ids.get(t.from)!,
        toStepId: ids.get(t.to)!,
        branch: t.branch,
      })),
    );
  }
  return { ids, deliveries };
}
