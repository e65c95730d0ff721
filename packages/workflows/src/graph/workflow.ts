/**
 * A workflow's own rules: created disabled, enabled only with a graph that can run, and kept so while enabled.
 *
 * - A workflow is created disabled (`enabled: true` on create is refused) and needs a trigger (ours, or Plunk's
 *   `eventName` / `triggerType` + `triggerConfig`).
 * - Enabling checks its whole graph (one trigger transition, reachable steps, complete branches, no cycle without
 *   a delay) and every step's references (templates of this project with a verified sender, webhook targets).
 * - Every edit of a graph locks the workflow, moves its `updated_at` (the engine caches graphs by it) and, when
 *   the workflow is enabled, must leave a graph that can run: else nothing changes (422).
 *
 * @module
 */
import { notFound, validationError } from '@mailroom/platform/errors';
import {
  createWorkflow,
  getWorkflow,
  loadWorkflowGraph,
  lockWorkflow,
  touchWorkflow,
  updateWorkflow,
  type WorkflowRow,
} from '../queries/workflows';
import { type Database, type DbOrTx } from '@mailroom/db/client';
import { type TriggerFields } from '../workflows-plunk-graph';
import { stepRefErrors, storedGraphErrors, triggerColumns } from './checks';

/**
 * Runs `change` on a workflow's graph in a transaction: the workflow is locked (concurrent edits of one graph are
 * serialized), touched (graph caches key on `updated_at`), and an enabled workflow must still have a valid graph
 * after the change.
 *
 * @returns what `change` returned.
 * @throws {@link AppError} 404 for an unknown workflow; 422 when the change would leave an enabled graph unable to run.
 */
export async function changeGraph<T>(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  change: (tx: DbOrTx, w: WorkflowRow) => Promise<T>,
): Promise<T> {
  return db.transaction(async (tx) => {
    if (!(await lockWorkflow(tx, projectId, workflowId))) throw notFound('Workflow');
    const w = (await getWorkflow(tx, projectId, workflowId))!;
    const result = await change(tx, w);
    await touchWorkflow(tx, projectId, workflowId);
    if (w.enabled) {
      const g = (await loadWorkflowGraph(tx, projectId, workflowId))!;
      const errors = storedGraphErrors(g);
      if (errors.length > 0)
        throw validationError(
          errors,
          'The workflow is enabled and this change would leave its graph unable to run; disable it first or send the whole graph with PUT /workflows/{id}/graph',
        );
    }
    return result;
  });
}

/** A new workflow as a request gives it (ours or Plunk's trigger fields). */
export interface NewWorkflowInput extends TriggerFields {
  name: string;
  description?: string | null;
  allowReentry?: boolean;
  /** Plunk's field: only false is accepted. */
  enabled?: boolean;
}

/**
 * Creates a workflow, disabled, with no steps.
 *
 * @throws {@link AppError} 422 for `enabled: true`, a missing trigger, or a trigger Plunk's form cannot map.
 */
export async function newWorkflow(db: DbOrTx, projectId: string, input: NewWorkflowInput): Promise<WorkflowRow> {
  if (input.enabled === true)
    throw validationError([
      {
        field: 'enabled',
        message: 'a workflow is created disabled: add its steps, then PATCH enabled: true',
        code: 'custom',
      },
    ]);
  const trigger = triggerColumns(input);
  if (!trigger)
    throw validationError([
      {
        field: 'trigger',
        message: "is required (or Plunk's eventName, or triggerType with triggerConfig)",
        code: 'invalid_type',
      },
    ]);
  return createWorkflow(db, projectId, {
    name: input.name,
    description: input.description,
    allowReentry: input.allowReentry,
    ...trigger,
  });
}

/** A change of a workflow's own fields; fields left out keep their value. */
export interface WorkflowPatch extends TriggerFields {
  name?: string;
  description?: string | null;
  allowReentry?: boolean;
  enabled?: boolean;
}

/**
 * Changes a workflow's fields; `enabled: true` on a disabled workflow checks its whole graph and its steps'
 * references first (`allowPrivate`: WEBHOOK targets on private hosts are allowed).
 *
 * @throws {@link AppError} 404 for an unknown workflow; 422 listing every problem of a graph that cannot be enabled, or a bad trigger.
 */
export async function editWorkflow(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  patch: WorkflowPatch,
  allowPrivate: boolean,
): Promise<void> {
  await changeGraph(db, projectId, workflowId, async (tx, w) => {
    const columns = {
      name: patch.name,
      description: patch.description,
      allowReentry: patch.allowReentry,
      enabled: patch.enabled,
      ...triggerColumns(patch, w),
    };
    if (patch.enabled === true && !w.enabled) {
      const g = (await loadWorkflowGraph(tx, projectId, workflowId))!;
      const errors = [...storedGraphErrors(g), ...(await stepRefErrors(tx, projectId, g.steps, allowPrivate))];
      if (errors.length > 0)
        throw validationError(errors, 'The workflow cannot be enabled: its graph or steps have problems');
    }
    await updateWorkflow(
      tx,
      projectId,
      workflowId,
      Object.fromEntries(Object.entries(columns).filter(([, v]) => v !== undefined)),
    );
  });
}
