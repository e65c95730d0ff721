/**
 * A workflow's executions: `GET /workflows/{id}/executions` (keyset, or Plunk's page numbers),
 * `GET /workflows/{id}/executions/{executionId}` with the step history, a manual start
 * `POST /workflows/{id}/executions`, and `POST /workflows/{id}/executions/{executionId}/cancel` (or Plunk's `DELETE`).
 * Nothing runs here: executions are written here and run in the worker.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { notFound } from '@mailroom/platform/errors';
import { EmailAddress } from '@mailroom/contacts/contacts';
import { enqueueExecutions, relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { EXECUTION_STATUSES } from '@mailroom/db/schema/workflow-states';
import { getWorkflow } from '@mailroom/workflows/queries/workflows';
import { getExecution, listExecutions } from '@mailroom/workflows/queries/workflow-executions';
import { cancelWorkflowExecution, startExecution } from '@mailroom/workflows/graph/executions';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import {
  cursorId,
  IdParams,
  keysetPage,
  PageFields,
  PageQuery,
  plunkPageFields,
  PlunkPageFields,
  PlunkPageQuery,
  resolvePaging,
  StringEnum,
} from './common';
import {
  Execution,
  ExecutionDetail,
  executionLookups,
  presentExecution,
  presentRun,
  presentStepExecution,
  ExecutionParams,
} from './workflow-schemas';

/** Routes of this module. */
export function workflowExecutionRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  return [
    route({
      method: 'get',
      path: '/workflows/:id/executions',
      operationId: 'listWorkflowExecutions',
      tag: 'Workflows',
      summary: "List a workflow's executions, newest first",
      description:
        "Pages by `cursor`, or by Plunk's `page`/`pageSize` (at most 10,000 rows deep); the answer carries Plunk's `executions`, `page`, `pageSize` and `totalPages` beside `items`.",
      auth: 'secret',
      params: IdParams,
      query: Type.Object(
        {
          ...PageQuery,
          ...PlunkPageQuery,
          status: Type.Optional(StringEnum(EXECUTION_STATUSES)),
          contactId: Type.Optional(Type.String({ format: 'uuid' })),
        },
        { additionalProperties: false },
      ),
      response: Type.Object({
        items: Type.Array(Execution),
        ...PageFields,
        totalExact: Type.Boolean({
          description: 'false when `total` is a lower bound (more than 10,000 matching executions)',
        }),
        executions: Type.Array(Execution, { description: "Plunk's name for `items`" }),
        ...PlunkPageFields,
      }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        if (!(await getWorkflow(db, auth.projectId, params.id))) throw notFound('Workflow');
        const paging = resolvePaging(query);
        const page = await listExecutions(reads, auth.projectId, params.id, {
          limit: paging.limit,
          offset: paging.offset,
          beforeId: cursorId(query.cursor),
          status: query.status,
          contactId: query.contactId,
        });
        const look = await executionLookups(auth.projectId, params.id, page.items, reads);
        const body = keysetPage(page, (x) => presentExecution(x, look), page.total);
        return {
          data: {
            ...body,
            totalExact: page.totalExact,
            executions: body.items,
            ...plunkPageFields(page.total, paging.page, paging.limit),
          },
        };
      },
    }),
    route({
      method: 'get',
      path: '/workflows/:id/executions/:executionId',
      operationId: 'getWorkflowExecution',
      tag: 'Workflows',
      summary: 'An execution with its step history',
      auth: 'secret',
      params: ExecutionParams,
      response: ExecutionDetail,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const found = await getExecution(db, auth.projectId, params.id, params.executionId);
        if (!found) throw notFound('Execution');
        const look = await executionLookups(auth.projectId, params.id, [found.execution], db);
        return {
          data: {
            ...presentExecution(found.execution, look),
            steps: found.steps.map(presentRun),
            stepExecutions: found.steps.map((r) => presentStepExecution(r, look)),
          },
        };
      },
    }),
    route({
      method: 'post',
      path: '/workflows/:id/executions',
      operationId: 'startWorkflowExecution',
      tag: 'Workflows',
      summary: 'Start an execution for a contact by hand',
      description:
        'For MANUAL workflows (and EVENT ones, to test them). The workflow must be enabled (409 `INVALID_STATE`). Without ' +
        "re-entry a contact that already entered gets 409 `CONFLICT`. `data` (or Plunk's `context`) becomes `context.trigger.data`. " +
        'The execution runs in the worker; this returns it RUNNING. Started with a test key (sk_test_…), it is a test execution ' +
        '(`test: true`): its emails go to the test sink, never to SES, and only test events wake it.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          contactId: Type.Optional(Type.String({ format: 'uuid' })),
          email: Type.Optional(EmailAddress),
          data: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown())),
          context: Type.Optional(
            Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { description: "Plunk's name for `data`" }),
          ),
        },
        { additionalProperties: false },
      ),
      response: Execution,
      status: 201,
      errors: [400, 401, 403, 404, 409, 413, 422, 429],
      idempotent: true,
      handler: async ({ params, body, auth, db: tx, afterCommit, log }) => {
        const started = await startExecution(tx, auth.projectId, params.id, body, auth.mode === 'test');
        afterCommit(async () => {
          await enqueueExecutions(deps.queues.workflow, [started.execution], log);
          await relayWebhookDeliveries(deps.queues.webhook, deps.config, started.deliveries, log);
        });
        return {
          data: presentExecution(
            started.execution,
            await executionLookups(auth.projectId, params.id, [started.execution], tx),
          ),
        };
      },
    }),
    ...(['post', 'delete'] as const).map((method) =>
      route({
        method,
        path:
          method === 'post'
            ? '/workflows/:id/executions/:executionId/cancel'
            : '/workflows/:id/executions/:executionId',
        operationId: method === 'post' ? 'cancelWorkflowExecution' : 'cancelWorkflowExecutionByDelete',
        tag: 'Workflows',
        summary: method === 'post' ? 'Cancel an execution' : "Cancel an execution (Plunk's form of POST …/cancel)",
        description:
          'RUNNING or WAITING → CANCELLED, for good: no timeout, event or retried job moves it again. A step in flight loses its ' +
          'effect (its email or contact change is rolled back), except a WEBHOOK call already made. A final execution gives 409 `INVALID_STATE`. ' +
          'The execution is kept (its history stays readable).',
        auth: 'secret',
        params: ExecutionParams,
        response: Execution,
        status: 200,
        errors: [400, 401, 403, 404, 409, 429],
        handler: async ({ params, auth, log }) => {
          const r = await cancelWorkflowExecution(db, auth.projectId, params.id, params.executionId);
          await relayWebhookDeliveries(deps.queues.webhook, deps.config, r.deliveries, log);
          return {
            data: presentExecution(r.execution, await executionLookups(auth.projectId, params.id, [r.execution], db)),
          };
        },
      }),
    ),
  ];
}
