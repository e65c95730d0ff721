/**
 * Replacing a workflow's whole graph at once, validated before anything changes: steps named by keys of the
 * caller's choosing (an `id` keeps an existing step and the executions on it), transitions between keys
 * (`from: null` is the trigger). The graph must be complete (see `graphProblems`); steps left out are deleted and
 * executions on them end EXITED.
 *
 * @module
 */
import { AppError, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { type WorkflowBranch, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { loadWorkflowGraph, lockWorkflow, replaceGraph, touchWorkflow } from '../queries/workflows';
import { type Database } from '@mailroom/db/client';
import { graphProblems } from '../workflows';
import { fromPlunkStepConfig } from '../workflows-plunk';
import { checkStep, graphErrors } from './checks';

/** A whole graph as a request gives it. */
export interface GraphInput {
  steps: {
    key: string;
    id?: string;
    type: WorkflowStepType;
    name?: string;
    config?: unknown;
    position?: Record<string, unknown> | null;
  }[];
  transitions: { from: string | null; to: string; branch?: WorkflowBranch }[];
}

/**
 * Replaces the graph of workflow `workflowId`. Every problem is collected first (duplicate keys, each step's
 * configuration, the graph rules), then, under the workflow's lock, the kept steps are checked to belong to it
 * and keep their type. Nothing changes when anything is wrong.
 *
 * @returns the `workflow.exited` webhook deliveries of executions on deleted steps (to enqueue).
 * @throws {@link AppError} 422 listing every problem (fields `steps.<i>…`, `transitions.<i>`, `transitions`); 404 for an unknown workflow.
 */
export async function replaceWorkflowGraph(
  db: Database['db'],
  projectId: string,
  workflowId: string,
  body: GraphInput,
  allowPrivate: boolean,
): Promise<WebhookDeliveryRef[]> {
  const errors: FieldError[] = [];
  const keys = new Set<string>();
  body.steps.forEach((s, i) => {
    if (keys.has(s.key)) errors.push({ field: `steps.${i}.key`, message: `duplicate key ${s.key}`, code: 'custom' });
    keys.add(s.key);
  });
  const configs: Record<string, unknown>[] = [];
  for (const [i, s] of body.steps.entries()) {
    try {
      configs.push(
        await checkStep(
          db,
          projectId,
          s.type,
          fromPlunkStepConfig(s.type, s.config, `steps.${i}.config`),
          `steps.${i}.config`,
          allowPrivate,
        ),
      );
    } catch (err) {
      if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
      else throw err;
    }
  }
  const problems = graphProblems(
    body.steps.map((s) => ({ ref: s.key, type: s.type })),
    body.transitions.map((t) => ({ from: t.from, to: t.to, branch: t.branch ?? 'next' })),
  );
  errors.push(
    ...graphErrors(
      problems,
      (i) => `steps.${i}`,
      (i) => `transitions.${i}`,
      'transitions',
    ),
  );
  if (errors.length > 0) throw validationError(errors, 'The graph cannot run; nothing was changed');
  const { deliveries } = await db.transaction(async (tx) => {
    if (!(await lockWorkflow(tx, projectId, workflowId))) throw notFound('Workflow');
    const g = (await loadWorkflowGraph(tx, projectId, workflowId))!;
    const owned = new Set(g.steps.map((s) => s.id));
    const foreign: FieldError[] = [];
    body.steps.forEach((s, i) => {
      if (s.id && !owned.has(s.id))
        foreign.push({ field: `steps.${i}.id`, message: 'no such step in this workflow', code: 'custom' });
      const kept = s.id ? g.steps.find((x) => x.id === s.id) : undefined;
      if (kept && kept.type !== s.type)
        foreign.push({
          field: `steps.${i}.type`,
          message: `step ${s.id} is a ${kept.type}; a step's type cannot change`,
          code: 'custom',
        });
    });
    if (foreign.length > 0) throw validationError(foreign);
    await touchWorkflow(tx, projectId, workflowId);
    return replaceGraph(
      tx,
      projectId,
      workflowId,
      body.steps.map((s, i) => ({
        key: s.key,
        id: s.id,
        type: s.type,
        name: s.name ?? s.type,
        config: configs[i],
        position: s.position,
      })),
      body.transitions.map((t) => ({ from: t.from, to: t.to, branch: t.branch ?? 'next' })),
    );
  });
  return deliveries;
}
