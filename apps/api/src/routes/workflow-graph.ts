/**
 * A workflow's graph, one piece at a time (`POST /workflows/{id}/steps`, `PATCH/DELETE /workflows/{id}/steps/{stepId}`,
 * `POST /workflows/{id}/transitions`, `DELETE /workflows/{id}/transitions/{transitionId}`) or whole
 * (`PUT /workflows/{id}/graph`). Plunk v2's step and transition forms are accepted beside ours (see `workflows.ts`).
 * An enabled workflow keeps a valid graph: an edit that would break it is refused (422) and changes nothing.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { autoConnectBranches, fromPlunkStepConfig, resolveBranch } from '@mailroom/workflows/workflows-plunk';
import { branchesOf, graphProblems } from '@mailroom/workflows/workflows';
import { WORKFLOW_BRANCHES, WORKFLOW_STEP_TYPES } from '@mailroom/db/schema/workflow-states';
import { announceWebhookDeliveries } from '@mailroom/queues/enqueue';
import {
  deleteStep,
  deleteTransition,
  getStep,
  insertStep,
  insertTransition,
  lockWorkflow,
  loadWorkflowGraph,
  replaceGraph,
  touchWorkflow,
  updateStep,
  type WorkflowStepRow,
} from '@mailroom/db/queries/workflows';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { Deleted, IdParams, Nullable, StringEnum } from './common';
import {
  StepType,
  Branch,
  StepConfigField,
  Position,
  Step,
  Transition,
  WorkflowDetail,
  presentStep,
  presentTransition,
  presentGraph,
  checkStep,
  graphErrors,
  StepParams,
  TransitionParams,
  StepKey,
  graphChanger,
} from './workflow-shapes';

/** Routes of this module. */
export function workflowGraphRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const allowPrivate = deps.config.webhookAllowPrivateTargets;
  const graphChange = graphChanger(deps);
  return [
    route({
      method: 'post',
      path: '/workflows/:id/steps',
      operationId: 'addWorkflowStep',
      tag: 'Workflows',
      summary: 'Add a step',
      description:
        'Connect it with `POST /workflows/{id}/transitions`, or with `autoConnect: true` (Plunk\'s default when `position` is ' +
        'given): from the last step that leads nowhere (or the trigger when nothing leaves it) — by `yes` from a CONDITION, by ' +
        '`event` and `timeout` from a WAIT_FOR_EVENT. On an enabled workflow an unconnected step is refused (422): disable it ' +
        'first, or use `PUT /workflows/{id}/graph`. Plunk\'s step-level `templateId` is a SEND_EMAIL\'s `config.templateId`; its ' +
        'TRIGGER type is refused (the trigger is the workflow\'s own).',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          type: StringEnum([...WORKFLOW_STEP_TYPES, 'TRIGGER'] as const),
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          config: StepConfigField,
          position: Type.Optional(Nullable(Position)),
          templateId: Type.Optional(Nullable(Type.String({ format: 'uuid', description: "Plunk's form of config.templateId (SEND_EMAIL)" }))),
          autoConnect: Type.Optional(Type.Boolean({ description: 'connect from the last open step (default: true when `position` is given, as in Plunk; else false)' })),
        },
        { additionalProperties: false },
      ),
      response: Step,
      status: 201,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        if (body.type === 'TRIGGER') {
          throw validationError([{ field: 'type', message: 'the trigger is the workflow\'s own (trigger, or Plunk\'s eventName/triggerType); connect from it with fromStepId null', code: 'custom' }]);
        }
        const type = body.type;
        const config = await checkStep(db, auth.projectId, type, fromPlunkStepConfig(type, body.config, 'config', body.templateId), 'config', allowPrivate);
        const autoConnect = body.autoConnect ?? body.position !== undefined;
        const step = await graphChange(auth.projectId, params.id, async (tx) => {
          const g = autoConnect ? (await loadWorkflowGraph(tx, auth.projectId, params.id))! : undefined;
          const row = await insertStep(tx, auth.projectId, params.id, { type, name: body.name ?? type, config, position: body.position });
          if (g) {
            // Plunk's autoConnect: the last step (in creation order) that leads nowhere, the trigger counting first.
            const open: (WorkflowStepRow | null)[] = g.transitions.some((t) => t.fromStepId === null) ? [] : [null];
            open.push(...g.steps.filter((s) => s.type !== 'EXIT' && !g.transitions.some((t) => t.fromStepId === s.id)));
            const from = open[open.length - 1];
            if (from !== undefined) {
              const branches = from === null ? (['next'] as const) : autoConnectBranches(from.type);
              for (const branch of branches) await insertTransition(tx, auth.projectId, params.id, { fromStepId: from?.id ?? null, toStepId: row.id, branch });
            }
          }
          return row;
        });
        return { data: presentStep(step) };
      },
    }),
    route({
      method: 'patch',
      path: '/workflows/:id/steps/:stepId',
      operationId: 'updateWorkflowStep',
      tag: 'Workflows',
      summary: 'Change a step\'s name, configuration or position',
      description:
        'The type cannot change (delete the step and add another). Executions waiting at the step keep the wait they started. ' +
        "Plunk's `templateId` changes a SEND_EMAIL's `config.templateId` (null is refused: a SEND_EMAIL needs a template).",
      auth: 'secret',
      params: StepParams,
      body: Type.Object(
        {
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          config: Type.Optional(StepConfigField),
          position: Type.Optional(Nullable(Position)),
          templateId: Type.Optional(Nullable(Type.String({ format: 'uuid', description: "Plunk's form of config.templateId (SEND_EMAIL)" }))),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: Step,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        const existing = await getStep(db, auth.projectId, params.id, params.stepId);
        if (!existing) throw notFound('Step');
        if (body.templateId === null && existing.type === 'SEND_EMAIL') {
          throw validationError([{ field: 'templateId', message: 'a SEND_EMAIL step needs a template', code: 'invalid_type' }]);
        }
        const templateId = body.templateId ?? undefined;
        const source = body.config ?? (templateId !== undefined ? { ...existing.config, templateId: undefined } : undefined);
        const config = source === undefined ? undefined : await checkStep(db, auth.projectId, existing.type, fromPlunkStepConfig(existing.type, source, 'config', templateId), 'config', allowPrivate);
        const step = await graphChange(auth.projectId, params.id, (tx) => updateStep(tx, auth.projectId, params.id, params.stepId, { name: body.name, config, position: body.position }));
        if (!step) throw notFound('Step');
        return { data: presentStep(step) };
      },
    }),
    route({
      method: 'delete',
      path: '/workflows/:id/steps/:stepId',
      operationId: 'deleteWorkflowStep',
      tag: 'Workflows',
      summary: 'Delete a step and its transitions',
      description: 'Executions standing on the step end EXITED (`step removed`).',
      auth: 'secret',
      params: StepParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, auth, log }) => {
        const deliveries = await graphChange(auth.projectId, params.id, (tx) => deleteStep(tx, auth.projectId, params.id, params.stepId));
        if (!deliveries) throw notFound('Step');
        await announceWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
        return { data: { id: params.stepId, deleted: true as const } };
      },
    }),
    route({
      method: 'post',
      path: '/workflows/:id/transitions',
      operationId: 'addWorkflowTransition',
      tag: 'Workflows',
      summary: 'Connect two steps (or the trigger to the first step)',
      description:
        "Plunk's form is accepted: `fromStepId` may be the workflow's own id (Plunk's TRIGGER step), `condition: {branch: yes|no}` " +
        'names a CONDITION branch, `waitOutcome: EVENT|TIMEOUT` (or `condition: {branch: event|timeout}`, `condition: {fallback: true}`) ' +
        'a WAIT_FOR_EVENT branch (without one, the first free of event and timeout); `priority` is accepted and not stored: ' +
        'branches are exclusive, so there is nothing to order.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          fromStepId: Nullable(Type.String({ format: 'uuid', description: "null (or, Plunk's form, the workflow's id): from the trigger" })),
          toStepId: Type.String({ format: 'uuid' }),
          branch: Type.Optional(Branch),
          condition: Type.Optional(Type.Unknown({ description: "Plunk's form: `{branch: yes|no|event|timeout}` or `{fallback: true}` (timeout), or null" })),
          waitOutcome: Type.Optional(Nullable(StringEnum(['EVENT', 'TIMEOUT'] as const, "Plunk's form of the event/timeout branch"))),
          priority: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, description: "Plunk's field; accepted, not stored" })),
        },
        { additionalProperties: false },
      ),
      response: Transition,
      status: 201,
      errors: [400, 401, 403, 404, 409, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        const fromStepId = body.fromStepId === params.id ? null : body.fromStepId;
        const t = await graphChange(auth.projectId, params.id, async (tx) => {
          const [from, to, g] = await Promise.all([
            fromStepId ? getStep(tx, auth.projectId, params.id, fromStepId) : Promise.resolve(null),
            getStep(tx, auth.projectId, params.id, body.toStepId),
            loadWorkflowGraph(tx, auth.projectId, params.id),
          ]);
          const taken = g!.transitions.filter((e) => e.fromStepId === (fromStepId ?? null)).map((e) => e.branch);
          const branch = from === undefined ? (body.branch ?? 'next') : resolveBranch({ ...body, waitOutcome: body.waitOutcome ?? undefined }, from ? from.type : null, taken);
          const branchField = body.branch ? 'branch' : body.waitOutcome ? 'waitOutcome' : body.condition ? 'condition.branch' : 'branch';
          const errors: FieldError[] = [];
          if (from === undefined) errors.push({ field: 'fromStepId', message: 'no such step in this workflow', code: 'custom' });
          if (!to) errors.push({ field: 'toStepId', message: 'no such step in this workflow', code: 'custom' });
          const allowed = from ? branchesOf(from.type) : from === null ? (['next'] as const) : WORKFLOW_BRANCHES;
          if (!allowed.includes(branch)) {
            const message = allowed.length === 0 ? 'an EXIT step has no outgoing transitions' : `must be one of ${allowed.join(', ')} ${from ? `for a ${from.type} step` : 'from the trigger'}`;
            errors.push({ field: branchField, message, code: 'custom' });
          }
          if (errors.length > 0) throw validationError(errors);
          if (taken.includes(branch)) {
            throw new AppError(ErrorCode.CONFLICT, `There is already a ${branch} transition from ${fromStepId ?? 'the trigger'}; delete it first`);
          }
          return insertTransition(tx, auth.projectId, params.id, { fromStepId, toStepId: body.toStepId, branch });
        });
        return { data: presentTransition(t) };
      },
    }),
    route({
      method: 'delete',
      path: '/workflows/:id/transitions/:transitionId',
      operationId: 'deleteWorkflowTransition',
      tag: 'Workflows',
      summary: 'Delete a transition',
      auth: 'secret',
      params: TransitionParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, auth }) => {
        const deleted = await graphChange(auth.projectId, params.id, (tx) => deleteTransition(tx, auth.projectId, params.id, params.transitionId));
        if (!deleted) throw notFound('Transition');
        return { data: { id: params.transitionId, deleted: true as const } };
      },
    }),
    route({
      method: 'put',
      path: '/workflows/:id/graph',
      operationId: 'replaceWorkflowGraph',
      tag: 'Workflows',
      summary: 'Replace the whole graph, validated',
      description:
        'Steps carry a `key` of your choosing; give `id` to keep an existing step (executions on it stay there), leave it ' +
        'out to create one. Steps left out are deleted (executions on them end EXITED). Transitions name steps by key; ' +
        '`from: null` is the trigger. The graph must be complete: one trigger transition, every step reachable, CONDITION ' +
        'with yes and no, WAIT_FOR_EVENT with event and timeout, no cycle without a DELAY or WAIT_FOR_EVENT, templates of ' +
        'this project. Nothing changes when anything is wrong (422 listing every problem).',
      auth: 'secret',
      params: IdParams,
      bodyLimit: '1mb',
      body: Type.Object(
        {
          steps: Type.Array(
            Type.Object(
              {
                key: StepKey,
                id: Type.Optional(Type.String({ format: 'uuid' })),
                type: StepType,
                name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
                config: StepConfigField,
                position: Type.Optional(Nullable(Position)),
              },
              { additionalProperties: false },
            ),
            { maxItems: 200 },
          ),
          transitions: Type.Array(
            Type.Object({ from: Nullable(StepKey), to: StepKey, branch: Type.Optional(Branch) }, { additionalProperties: false }),
            { maxItems: 1000 },
          ),
        },
        { additionalProperties: false },
      ),
      response: WorkflowDetail,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        const errors: FieldError[] = [];
        const keys = new Set<string>();
        body.steps.forEach((s, i) => {
          if (keys.has(s.key)) errors.push({ field: `steps.${i}.key`, message: `duplicate key ${s.key}`, code: 'custom' });
          keys.add(s.key);
        });
        const configs: Record<string, unknown>[] = [];
        for (const [i, s] of body.steps.entries()) {
          try {
            configs.push(await checkStep(db, auth.projectId, s.type, fromPlunkStepConfig(s.type, s.config, `steps.${i}.config`), `steps.${i}.config`, allowPrivate));
          } catch (err) {
            if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
            else throw err;
          }
        }
        const problems = graphProblems(
          body.steps.map((s) => ({ ref: s.key, type: s.type })),
          body.transitions.map((t) => ({ from: t.from, to: t.to, branch: t.branch ?? 'next' })),
        );
        errors.push(...graphErrors(problems, (i) => `steps.${i}`, (i) => `transitions.${i}`, 'transitions'));
        if (errors.length > 0) throw validationError(errors, 'The graph cannot run; nothing was changed');
        const { deliveries } = await deps.database.db.transaction(async (tx) => {
          if (!(await lockWorkflow(tx, auth.projectId, params.id))) throw notFound('Workflow');
          const g = (await loadWorkflowGraph(tx, auth.projectId, params.id))!;
          const owned = new Set(g.steps.map((s) => s.id));
          const foreign: FieldError[] = [];
          body.steps.forEach((s, i) => {
            if (s.id && !owned.has(s.id)) foreign.push({ field: `steps.${i}.id`, message: 'no such step in this workflow', code: 'custom' });
            const kept = s.id ? g.steps.find((x) => x.id === s.id) : undefined;
            if (kept && kept.type !== s.type) foreign.push({ field: `steps.${i}.type`, message: `step ${s.id} is a ${kept.type}; a step's type cannot change`, code: 'custom' });
          });
          if (foreign.length > 0) throw validationError(foreign);
          await touchWorkflow(tx, auth.projectId, params.id);
          return replaceGraph(
            tx,
            auth.projectId,
            params.id,
            body.steps.map((s, i) => ({ key: s.key, id: s.id, type: s.type, name: s.name ?? s.type, config: configs[i], position: s.position })),
            body.transitions.map((t) => ({ from: t.from, to: t.to, branch: t.branch ?? 'next' })),
          );
        });
        await announceWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
        return { data: presentGraph((await loadWorkflowGraph(db, auth.projectId, params.id))!) };
      },
    }),
  ];
}
