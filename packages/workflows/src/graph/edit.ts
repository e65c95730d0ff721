/**
 * A workflow's graph, one piece at a time: add, change and delete steps; add and delete transitions. Each edit
 * runs in {@link changeGraph} (locked, touched, and refused with 422 when it would leave an enabled workflow's
 * graph unable to run). Plunk v2's step and transition forms are accepted beside ours (workflows-plunk.ts):
 * step-level `templateId`, `autoConnect`, the trigger as `fromStepId` = the workflow's id, `condition` and
 * `waitOutcome` for branches.
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { WORKFLOW_BRANCHES, type WorkflowBranch, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import {
  deleteStep,
  deleteTransition,
  getStep,
  insertStep,
  insertTransition,
  loadWorkflowGraph,
  updateStep,
  type WorkflowStepRow,
  type WorkflowTransitionRow,
} from '../queries/workflows';
import { type Database } from '@mailroom/db/client';
import { branchesOf } from '../workflows';
import { fromPlunkStepConfig } from '../workflows-plunk';
import { autoConnectBranches, resolveBranch } from '../workflows-plunk-graph';
import { checkStep } from './checks';
import { changeGraph } from './workflow';

/** A step to add, as a request gives it; `type` TRIGGER (Plunk's) is refused. */
export interface NewStepInput {
  type: WorkflowStepType | 'TRIGGER';
  name?: string;
  config?: unknown;
  position?: Record<string, unknown> | null;
  /** Plunk's form of a SEND_EMAIL's `config.templateId`. */
  templateId?: string | null;
  /** Connect from the last open step; default: true when `position` is given (as in Plunk), else false. */
  autoConnect?: boolean;
}

/**
 * Adds a step, with Plunk's autoConnect: from the last step (in creation order) that leads nowhere, or the trigger
 * when nothing leaves it, by `next`, by `yes` from a CONDITION, by `event` and `timeout` from a WAIT_FOR_EVENT.
 *
 * @throws {@link AppError} 404 for an unknown workflow; 422 for a TRIGGER step, a bad configuration (errors on
 * `config…`), or an unconnected step on an enabled workflow.
 */
export async function addStep(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  input: NewStepInput,
  allowPrivate: boolean,
): Promise<WorkflowStepRow> {
  if (input.type === 'TRIGGER') {
    throw validationError([
      {
        field: 'type',
        message:
          "the trigger is the workflow's own (trigger, or Plunk's eventName/triggerType); connect from it with fromStepId null",
        code: 'custom',
      },
    ]);
  }
  const type = input.type;
  const config = await checkStep(
    db,
    projectId,
    type,
    fromPlunkStepConfig(type, input.config, 'config', input.templateId),
    'config',
    allowPrivate,
  );
  const autoConnect = input.autoConnect ?? input.position !== undefined;
  return changeGraph(db, projectId, workflowId, async (tx) => {
    const g = autoConnect ? (await loadWorkflowGraph(tx, projectId, workflowId))! : undefined;
    const row = await insertStep(tx, projectId, workflowId, {
      type,
      name: input.name ?? type,
      config,
      position: input.position,
    });
    if (g) {
      // Plunk's autoConnect: the last step (in creation order) that leads nowhere, the trigger counting first.
      const open: (WorkflowStepRow | null)[] = g.transitions.some((t) => t.fromStepId === null) ? [] : [null];
      open.push(...g.steps.filter((s) => s.type !== 'EXIT' && !g.transitions.some((t) => t.fromStepId === s.id)));
      const from = open[open.length - 1];
      if (from !== undefined) {
        const branches = from === null ? (['next'] as const) : autoConnectBranches(from.type);
        for (const branch of branches)
          await insertTransition(tx, projectId, workflowId, { fromStepId: from?.id ?? null, toStepId: row.id, branch });
      }
    }
    return row;
  });
}

/** A change of a step; fields left out keep their value. */
export interface StepPatch {
  name?: string;
  config?: Record<string, unknown>;
  position?: Record<string, unknown> | null;
  /** Plunk's form: changes a SEND_EMAIL's `config.templateId` (null is refused). */
  templateId?: string | null;
}

/**
 * Changes a step's name, configuration or position (its type cannot change). Executions waiting at the step keep
 * the wait they started.
 *
 * @throws {@link AppError} 404 for an unknown workflow or step; 422 for a bad configuration or `templateId: null` on a SEND_EMAIL.
 */
export async function editStep(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  stepId: string,
  patch: StepPatch,
  allowPrivate: boolean,
): Promise<WorkflowStepRow> {
  const existing = await getStep(db, projectId, workflowId, stepId);
  if (!existing) throw notFound('Step');
  if (patch.templateId === null && existing.type === 'SEND_EMAIL') {
    throw validationError([
      { field: 'templateId', message: 'a SEND_EMAIL step needs a template', code: 'invalid_type' },
    ]);
  }
  const templateId = patch.templateId ?? undefined;
  const source = patch.config ?? (templateId !== undefined ? { ...existing.config, templateId: undefined } : undefined);
  const config =
    source === undefined
      ? undefined
      : await checkStep(
          db,
          projectId,
          existing.type,
          fromPlunkStepConfig(existing.type, source, 'config', templateId),
          'config',
          allowPrivate,
        );
  const step = await changeGraph(db, projectId, workflowId, (tx) =>
    updateStep(tx, projectId, workflowId, stepId, { name: patch.name, config, position: patch.position }),
  );
  if (!step) throw notFound('Step');
  return step;
}

/**
 * Deletes a step and its transitions; executions standing on it end EXITED (`step removed`).
 *
 * @returns the `workflow.exited` webhook deliveries written (to enqueue).
 * @throws {@link AppError} 404 for an unknown workflow or step; 422 when the workflow is enabled and the graph would break.
 */
export async function removeStep(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  stepId: string,
): Promise<WebhookDeliveryRef[]> {
  const deliveries = await changeGraph(db, projectId, workflowId, (tx) =>
    deleteStep(tx, projectId, workflowId, stepId),
  );
  if (!deliveries) throw notFound('Step');
  return deliveries;
}

/** A transition to add, ours (`branch`) or Plunk's (`condition`, `waitOutcome`; `fromStepId` = the workflow's id for the trigger). */
export interface NewTransitionInput {
  fromStepId: string | null;
  toStepId: string;
  branch?: WorkflowBranch;
  condition?: unknown;
  waitOutcome?: 'EVENT' | 'TIMEOUT' | null;
  /** Plunk's field: not stored, but it marks a request as Plunk's form (see `resolveBranch`). */
  priority?: number;
}

/**
 * Connects two steps (or the trigger to the first step). Without a branch: `next`, or a WAIT_FOR_EVENT's first
 * free of `event` and `timeout`.
 *
 * @throws {@link AppError} 404 for an unknown workflow; 422 for unknown steps or a branch the step does not have;
 * 409 `CONFLICT` when the branch is already taken.
 */
export async function addTransition(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  input: NewTransitionInput,
): Promise<WorkflowTransitionRow> {
  const fromStepId = input.fromStepId === workflowId ? null : input.fromStepId;
  return changeGraph(db, projectId, workflowId, async (tx) => {
    // One after the other: a transaction is one connection, and pg queues (and deprecates) concurrent queries on it.
    const from = fromStepId ? await getStep(tx, projectId, workflowId, fromStepId) : null;
    const to = await getStep(tx, projectId, workflowId, input.toStepId);
    const g = await loadWorkflowGraph(tx, projectId, workflowId);
    const taken = g!.transitions.filter((e) => e.fromStepId === (fromStepId ?? null)).map((e) => e.branch);
    const branch =
      from === undefined
        ? (input.branch ?? 'next')
        : resolveBranch({ ...input, waitOutcome: input.waitOutcome ?? undefined }, from ? from.type : null, taken);
    const branchField = input.branch
      ? 'branch'
      : input.waitOutcome
        ? 'waitOutcome'
        : input.condition
          ? 'condition.branch'
          : 'branch';
    const errors: FieldError[] = [];
    if (from === undefined)
      errors.push({ field: 'fromStepId', message: 'no such step in this workflow', code: 'custom' });
    if (!to) errors.push({ field: 'toStepId', message: 'no such step in this workflow', code: 'custom' });
    const allowed = from ? branchesOf(from.type) : from === null ? (['next'] as const) : WORKFLOW_BRANCHES;
    if (!allowed.includes(branch)) {
      const message =
        allowed.length === 0
          ? 'an EXIT step has no outgoing transitions'
          : `must be one of ${allowed.join(', ')} ${from ? `for a ${from.type} step` : 'from the trigger'}`;
      errors.push({ field: branchField, message, code: 'custom' });
    }
    if (errors.length > 0) throw validationError(errors);
    if (taken.includes(branch)) {
      throw new AppError(
        ErrorCode.CONFLICT,
        `There is already a ${branch} transition from ${fromStepId ?? 'the trigger'}; delete it first`,
      );
    }
    return insertTransition(tx, projectId, workflowId, { fromStepId, toStepId: input.toStepId, branch });
  });
}

/**
 * Deletes a transition.
 *
 * @throws {@link AppError} 404 for an unknown workflow or transition; 422 when the workflow is enabled and the graph would break.
 */
export async function removeTransition(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  transitionId: string,
): Promise<void> {
  const deleted = await changeGraph(db, projectId, workflowId, (tx) =>
    deleteTransition(tx, projectId, workflowId, transitionId),
  );
  if (!deleted) throw notFound('Transition');
}
