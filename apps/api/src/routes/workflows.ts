/**
 * Workflows: `GET/POST /workflows`, `GET/PATCH/DELETE /workflows/{id}` and the project's signing secret of WEBHOOK
 * steps (`GET /workflows/webhook-secret`). The graph's routes are in `workflow-graph.ts`, the executions' in
 * `workflow-executions.ts`, the shapes all three answer with in `workflow-schemas.ts`.
 *
 * Plunk v2's workflow model is accepted beside ours (docs/api/overview.md, Plunk v2 compatibility; the mapping is in
 * `@mailroom/workflows` workflows-plunk; the rules are in `@mailroom/workflows` graph/*): `eventName` / `triggerType` / `triggerConfig`, steps with `position`,
 * `templateId` and `autoConnect`, transitions with `condition` / `waitOutcome` / `priority` (the trigger is
 * `fromStepId: null` or the workflow's own id), Plunk's step configurations, `page`/`pageSize`, and
 * `DELETE …/executions/{id}` to cancel; answers carry Plunk's field names beside ours.
 *
 * Rules:
 * - A workflow is created disabled. Enabling it checks its whole graph (one trigger transition, reachable steps,
 *   complete branches, no cycle without a delay, templates of this project with a verified sender); an enabled
 *   workflow keeps a valid graph: an edit that would break it is refused (422) and changes nothing.
 * - Nothing runs here: executions start in the worker (from the event inbox), or are written here and run there.
 * - Disabling stops new executions (events and manual starts); executions in flight run to their end. Cancel
 *   them one by one to stop them. Deleting a workflow deletes its executions.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { newWebhookSecret } from '@mailroom/webhooks/webhooks';
import { notFound } from '@mailroom/platform/errors';
import { deleteWorkflow, listWorkflows, loadWorkflowGraph } from '@mailroom/workflows/queries/workflows';
import { workflowWebhookSecret } from '@mailroom/workflows/queries/workflow-executions';
import { editWorkflow, newWorkflow } from '@mailroom/workflows/graph/workflow';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import {
  cursorId,
  Deleted,
  IdParams,
  keysetPage,
  Nullable,
  PageFields,
  PageQuery,
  plunkPageFields,
  PlunkPageFields,
  PlunkPageQuery,
  resolvePaging,
} from './common';
import {
  TriggerInput,
  PlunkTriggerInput,
  Workflow,
  WorkflowDetail,
  presentWorkflow,
  presentGraph,
} from './workflow-schemas';

/** Routes of this module. */
export function workflowRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  const allowPrivate = deps.config.webhookAllowPrivateTargets;
  return [
    route({
      method: 'get',
      path: '/workflows/webhook-secret',
      operationId: 'getWorkflowWebhookSecret',
      tag: 'Workflows',
      summary: "The secret signing WEBHOOK steps' calls",
      description:
        'WEBHOOK steps sign each call per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`: ' +
        'HMAC-SHA256 under this secret). `webhook-id` and `Idempotency-Key` are the step run id: the same on every attempt of a step.',
      auth: 'secret',
      response: Type.Object({ secret: Type.String({ description: 'whsec_…' }) }),
      status: 200,
      errors: [401, 403, 429],
      handler: async ({ auth }) => ({
        data: { secret: await workflowWebhookSecret(db, auth.projectId, newWebhookSecret) },
      }),
    }),
    route({
      method: 'get',
      path: '/workflows',
      operationId: 'listWorkflows',
      tag: 'Workflows',
      summary: 'List workflows, newest first',
      description:
        "Pages by `cursor`, or by Plunk's `page`/`pageSize` (at most 10,000 rows deep); the answer carries Plunk's `workflows`, `page`, `pageSize` and `totalPages` beside `items`.",
      auth: 'secret',
      query: Type.Object(
        {
          ...PageQuery,
          ...PlunkPageQuery,
          enabled: Type.Optional(Type.Boolean()),
          search: Type.Optional(
            Type.String({ minLength: 1, maxLength: 200, description: 'part of the name or description, any case' }),
          ),
        },
        { additionalProperties: false },
      ),
      response: Type.Object({
        items: Type.Array(Workflow),
        ...PageFields,
        workflows: Type.Array(Workflow, { description: "Plunk's name for `items`" }),
        ...PlunkPageFields,
      }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const paging = resolvePaging(query);
        const page = await listWorkflows(reads, auth.projectId, {
          limit: paging.limit,
          offset: paging.offset,
          beforeId: cursorId(query.cursor),
          enabled: query.enabled,
          search: query.search,
        });
        const body = keysetPage(page, presentWorkflow, page.total);
        return { data: { ...body, workflows: body.items, ...plunkPageFields(page.total, paging.page, paging.limit) } };
      },
    }),
    route({
      method: 'post',
      path: '/workflows',
      operationId: 'createWorkflow',
      tag: 'Workflows',
      summary: 'Create a workflow (disabled)',
      description:
        "`trigger` is required, or Plunk's `eventName` (an EVENT trigger) or `triggerType` + `triggerConfig: {eventName}`. " +
        "Plunk's `enabled: false` is accepted; `enabled: true` is refused (422): add steps, then enable with PATCH.",
      auth: 'secret',
      body: Type.Object(
        {
          name: Type.String({ minLength: 1, maxLength: 200 }),
          description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
          trigger: Type.Optional(TriggerInput),
          ...PlunkTriggerInput,
          allowReentry: Type.Optional(Type.Boolean({ default: false })),
          enabled: Type.Optional(Type.Boolean({ description: 'false only: a workflow is created disabled' })),
        },
        { additionalProperties: false },
      ),
      response: WorkflowDetail,
      status: 201,
      errors: [400, 401, 403, 413, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, db: tx }) => {
        const w = await newWorkflow(tx, auth.projectId, body);
        return { data: presentGraph({ workflow: w, steps: [], transitions: [] }) };
      },
    }),
    route({
      method: 'get',
      path: '/workflows/:id',
      operationId: 'getWorkflow',
      tag: 'Workflows',
      summary: 'A workflow with its steps and transitions',
      auth: 'secret',
      params: IdParams,
      response: WorkflowDetail,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const g = await loadWorkflowGraph(db, auth.projectId, params.id);
        if (!g) throw notFound('Workflow');
        return { data: presentGraph(g) };
      },
    }),
    route({
      method: 'patch',
      path: '/workflows/:id',
      operationId: 'updateWorkflow',
      tag: 'Workflows',
      summary: 'Update a workflow; enable or disable it',
      description:
        "`enabled: true` checks the whole graph and the SEND_EMAIL steps' templates and senders (422 listing every problem). " +
        '`enabled: false` stops new executions; executions in flight run to their end (cancel them to stop them). ' +
        "Plunk's `triggerType` / `triggerConfig: {eventName}` (or `eventName`) are accepted instead of `trigger`; `triggerType: EVENT` " +
        'alone keeps the event name of an EVENT workflow.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
          description: Type.Optional(Nullable(Type.String({ maxLength: 2000 }))),
          trigger: Type.Optional(TriggerInput),
          ...PlunkTriggerInput,
          allowReentry: Type.Optional(Type.Boolean()),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: WorkflowDetail,
      status: 200,
      errors: [400, 401, 403, 404, 413, 422, 429],
      handler: async ({ params, body, auth }) => {
        await editWorkflow(db, auth.projectId, params.id, body, allowPrivate);
        return { data: presentGraph((await loadWorkflowGraph(db, auth.projectId, params.id))!) };
      },
    }),
    route({
      method: 'delete',
      path: '/workflows/:id',
      operationId: 'deleteWorkflow',
      tag: 'Workflows',
      summary: 'Delete a workflow with its executions',
      description: 'Executions are deleted with it; emails they queued are still sent.',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await deleteWorkflow(db, auth.projectId, params.id))) throw notFound('Workflow');
        return { data: { id: params.id, deleted: true as const } };
      },
    }),
  ];
}
