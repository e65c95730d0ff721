/**
 * A workflow's graph, one piece at a time (`POST /workflows/{id}/steps`, `PATCH/DELETE /workflows/{id}/steps/{stepId}`,
 * `POST /workflows/{id}/transitions`, `DELETE /workflows/{id}/transitions/{transitionId}`) or whole
 * (`PUT /workflows/{id}/graph`). Plunk v2's step and transition forms are accepted beside ours (see `workflows.ts`).
 * An enabled workflow keeps a valid graph: an edit that would break it is refused (422) and changes nothing.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { WORKFLOW_STEP_TYPES } from '@mailroom/db/schema/workflow-states';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { loadWorkflowGraph } from '@mailroom/workflows/queries/workflows';
import { addStep, addTransition, editStep, removeStep, removeTransition } from '@mailroom/workflows/graph/edit';
import { replaceWorkflowGraph } from '@mailroom/workflows/graph/replace';
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
  StepParams,
  TransitionParams,
  StepKey,
} from './workflow-schemas';

/** Routes of this module. */
export function workflowGraphRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const allowPrivate = deps.config.webhookAllowPrivateTargets;
  return [
    route({
      method: 'post',
      path: '/workflows/:id/steps',
      operationId: 'addWorkflowStep',
      tag: 'Workflows',
      summary: 'Add a step',
      description:
        "Connect it with `POST /workflows/{id}/transitions`, or with `autoConnect: true` (Plunk's default when `position` is " +
        'given): from the last step that leads nowhere (or the trigger when nothing leaves it) — by `yes` from a CONDITION, by ' +
        '`event` and `timeout` from a WAIT_FOR_EVENT. On an enabled workflow an unconnected step is refused (422): disable it ' +
        "first, or use `PUT /workflows/{id}/graph`. Plunk's step-level `templateId` is a SEND_EMAIL's `config.templateId`; its " +
        "TRIGGER type is refused (the trigger is the workflow's own).",
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          type: StringEnum([...WORKFLOW_STEP_TYPES, 'TRIGGER'] as const),
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          config: StepConfigField,
          position: Type.Optional(Nullable(Position)),
          templateId: Type.Optional(
            Nullable(Type.String({ format: 'uuid', description: "Plunk's form of config.templateId (SEND_EMAIL)" })),
          ),
          autoConnect: Type.Optional(
            Type.Boolean({
              description:
                'connect from the last open step (default: true when `position` is given, as in Plunk; else false)',
            }),
          ),
        },
        { additionalProperties: false },
      ),
      response: Step,
      status: 201,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        const step = await addStep(db, auth.projectId, params.id, body, allowPrivate);
        return { data: presentStep(step) };
      },
    }),
    route({
      method: 'patch',
      path: '/workflows/:id/steps/:stepId',
      operationId: 'updateWorkflowStep',
      tag: 'Workflows',
      summary: "Change a step's name, configuration or position",
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
          templateId: Type.Optional(
            Nullable(Type.String({ format: 'uuid', description: "Plunk's form of config.templateId (SEND_EMAIL)" })),
          ),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: Step,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        const step = await editStep(db, auth.projectId, params.id, params.stepId, body, allowPrivate);
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
        const deliveries = await removeStep(db, auth.projectId, params.id, params.stepId);
        await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
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
          fromStepId: Nullable(
            Type.String({
              format: 'uuid',
              description: "null (or, Plunk's form, the workflow's id): from the trigger",
            }),
          ),
          toStepId: Type.String({ format: 'uuid' }),
          branch: Type.Optional(Branch),
          condition: Type.Optional(
            Type.Unknown({
              description: "Plunk's form: `{branch: yes|no|event|timeout}` or `{fallback: true}` (timeout), or null",
            }),
          ),
          waitOutcome: Type.Optional(
            Nullable(StringEnum(['EVENT', 'TIMEOUT'] as const, "Plunk's form of the event/timeout branch")),
          ),
          priority: Type.Optional(
            Type.Integer({ minimum: 0, maximum: 1_000_000, description: "Plunk's field; accepted, not stored" }),
          ),
        },
        { additionalProperties: false },
      ),
      response: Transition,
      status: 201,
      errors: [400, 401, 403, 404, 409, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        const t = await addTransition(db, auth.projectId, params.id, body);
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
        await removeTransition(db, auth.projectId, params.id, params.transitionId);
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
            Type.Object(
              { from: Nullable(StepKey), to: StepKey, branch: Type.Optional(Branch) },
              { additionalProperties: false },
            ),
            { maxItems: 1000 },
          ),
        },
        { additionalProperties: false },
      ),
      response: WorkflowDetail,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        const deliveries = await replaceWorkflowGraph(db, auth.projectId, params.id, body, allowPrivate);
        await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
        return { data: presentGraph((await loadWorkflowGraph(db, auth.projectId, params.id))!) };
      },
    }),
  ];
}
