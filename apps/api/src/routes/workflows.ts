/**
 * Workflows: `GET/POST /workflows`, `GET/PATCH/DELETE /workflows/{id}`; the graph one piece at a time
 * (`POST /workflows/{id}/steps`, `PATCH/DELETE /workflows/{id}/steps/{stepId}`, `POST /workflows/{id}/transitions`,
 * `DELETE /workflows/{id}/transitions/{transitionId}`) or whole (`PUT /workflows/{id}/graph`); executions
 * (`GET /workflows/{id}/executions`, `GET /workflows/{id}/executions/{executionId}`, a manual start
 * `POST /workflows/{id}/executions`, `POST /workflows/{id}/executions/{executionId}/cancel`); and the project's
 * signing secret of WEBHOOK steps (`GET /workflows/webhook-secret`).
 *
 * Plunk v2's workflow model is accepted beside ours (API.md "Plunk v2 compatibility"; the mapping is in
 * `@mailroom/core` workflows-plunk): `eventName` / `triggerType` / `triggerConfig`, steps with `position`,
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
import { Type, type Static } from '@sinclair/typebox';
import {
  AppError,
  autoConnectBranches,
  branchesOf,
  EmailAddress,
  enqueueExecutions,
  ErrorCode,
  EXECUTION_STATUSES,
  fromPlunkStepConfig,
  graphProblems,
  newWebhookSecret,
  notFound,
  parseStepConfig,
  plunkTransitionFields,
  plunkTriggerConfig,
  resolveBranch,
  resolveTrigger,
  STEP_RUN_STATUSES,
  validationError,
  webhookUrlProblem,
  WORKFLOW_BRANCHES,
  WORKFLOW_STEP_TYPES,
  type FieldError,
  type GraphProblem,
  type WorkflowBranch,
  type WorkflowStepType,
  announceWebhookDeliveries,
} from '@mailroom/core';
import {
  cancelExecution,
  contactEmails,
  createWorkflow,
  deleteStep,
  deleteTransition,
  deleteWorkflow,
  findContactByEmail,
  getContact,
  getExecution,
  getStep,
  getTemplate,
  getWorkflow,
  insertStep,
  insertTransition,
  listExecutions,
  listWorkflows,
  lockWorkflow,
  loadWorkflowGraph,
  replaceGraph,
  startManualExecution,
  stepSummaries,
  touchWorkflow,
  updateStep,
  updateWorkflow,
  workflowWebhookSecret,
  type DbOrTx,
  type ExecutionRow,
  type StepRunRow,
  type WorkflowGraph,
  type WorkflowRow,
  type WorkflowStepRow,
  type WorkflowTransitionRow,
} from '@mailroom/db';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { senderError } from '../services/sender';
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
  StringEnum,
  Timestamp,
} from './common';

const EventName = Type.String({ minLength: 1, maxLength: 255, pattern: '^\\S(.*\\S)?$', description: 'a custom event name, or a system event: contact.subscribed, contact.unsubscribed, email.opened, segment.<name>.entry, …' });

const TriggerInput = Type.Object(
  {
    type: StringEnum(['EVENT', 'MANUAL'] as const, 'EVENT: each recorded event of that name starts an execution for its contact; MANUAL: started through the API only'),
    event: Type.Optional(EventName),
  },
  { additionalProperties: false },
);

const Trigger = Type.Object({ type: StringEnum(['EVENT', 'MANUAL'] as const), event: Nullable(Type.String()) });

/** Plunk's trigger fields, accepted instead of `trigger`. */
const PlunkTriggerInput = {
  eventName: Type.Optional(Type.String({ description: "Plunk's form of `trigger: {type: EVENT, event}`" })),
  triggerType: Type.Optional(Type.String({ description: "Plunk's form: EVENT or MANUAL (SCHEDULE is refused, 422)" })),
  triggerConfig: Type.Optional(Type.Unknown({ description: "Plunk's form: `{eventName}` of an EVENT trigger, or null" })),
};

const Workflow = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  trigger: Trigger,
  allowReentry: Type.Boolean({ description: 'false: a contact enters at most once; true: once per trigger event (or manual start)' }),
  enabled: Type.Boolean(),
  triggerType: StringEnum(['EVENT', 'MANUAL'] as const, "Plunk's name for trigger.type"),
  triggerConfig: Nullable(Type.Object({ eventName: Type.String() }, { description: "Plunk's form of trigger.event" })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const StepType = StringEnum(WORKFLOW_STEP_TYPES);
const Branch = StringEnum(WORKFLOW_BRANCHES, 'next; yes/no (CONDITION); event/timeout (WAIT_FOR_EVENT)');

const StepConfigField = Type.Record(Type.String(), Type.Unknown(), {
  description:
    'By type. SEND_EMAIL `{templateId, from?, fromName?, replyTo?, data?}`; DELAY `{amount, unit}` (seconds, minutes, hours, days, weeks; ' +
    'at most a year); WAIT_FOR_EVENT `{event, timeout: {amount, unit}}`; CONDITION `{filter}` (the segment language, plus ' +
    '`context.<path>`, e.g. `context.trigger.data.plan`); WEBHOOK `{url, method?, headers?, body?, timeoutMs?, retries?}`; ' +
    'UPDATE_CONTACT `{data?, subscribed?}`; EXIT `{reason?}`. Plunk\'s forms are accepted and stored in ours: WAIT_FOR_EVENT ' +
    '`{eventName, timeout: seconds}` (no timeout: one year); CONDITION `{field, operator, value}` (`contact.email`, ' +
    '`contact.subscribed`, `data.x`, `event.x` = the trigger\'s data; `notEquals`/`notContains` need the value to exist; ' +
    '`mode: multi` is refused); UPDATE_CONTACT `{updates, subscriptionAction}`; WEBHOOK `body` as a JSON value (its ' +
    '`{{email}}`, `{{data.x}}`, `{{event.x}}` become `{{contact.email}}`, `{{contact.data.x}}`, `{{trigger.x}}`); ' +
    'SEND_EMAIL `recipient: {type: CONTACT}` (CUSTOM is refused).',
});

const Position = Type.Record(Type.String(), Type.Unknown(), { description: 'where an editor draws the step (Plunk\'s `{x, y}`); stored, never read by the engine' });

const Step = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  type: StepType,
  name: Type.String(),
  config: Type.Record(Type.String(), Type.Unknown()),
  position: Nullable(Position),
  templateId: Nullable(Type.String({ description: "Plunk's field: config.templateId of a SEND_EMAIL step, else null" })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const Transition = Type.Object({
  id: Type.String(),
  fromStepId: Nullable(Type.String({ description: 'null: from the trigger' })),
  toStepId: Type.String(),
  branch: Branch,
  condition: Nullable(Type.Object({ branch: Type.String() }, { description: "Plunk's form of a yes/no branch" })),
  waitOutcome: Nullable(StringEnum(['EVENT', 'TIMEOUT'] as const, "Plunk's form of an event/timeout branch")),
  priority: Type.Integer({ description: "Plunk's field (0; 1 for timeout): branches are exclusive, so it orders nothing" }),
});

const GraphStep = Type.Composite([Step, Type.Object({ outgoingTransitions: Type.Array(Transition), incomingTransitions: Type.Array(Transition) })]);

const WorkflowDetail = Type.Composite([Workflow, Type.Object({ steps: Type.Array(GraphStep), transitions: Type.Array(Transition) })]);

const StepSummary = Type.Object({ id: Type.String(), name: Type.String(), type: StepType });

const Execution = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  contactId: Type.String(),
  status: StringEnum(EXECUTION_STATUSES),
  currentStepId: Nullable(Type.String()),
  waitingFor: Nullable(Type.String({ description: 'the event a WAIT_FOR_EVENT step waits for' })),
  dueAt: Nullable(Type.String({ format: 'date-time', description: 'when a DELAY or a wait ends, or a WEBHOOK retry runs' })),
  context: Type.Record(Type.String(), Type.Unknown(), { description: '`trigger` (the starting event), `event` (the last awaited event), `webhook` (the last WEBHOOK answer)' }),
  exitReason: Nullable(Type.String()),
  error: Nullable(Type.String()),
  startedAt: Timestamp,
  updatedAt: Timestamp,
  finishedAt: Nullable(Timestamp),
  completedAt: Nullable(Timestamp),
  currentStep: Nullable(StepSummary),
  contact: Nullable(Type.Object({ id: Type.String(), email: Type.String() })),
});

const StepRun = Type.Object({
  id: Type.String({ description: 'also the idempotency key of the step\'s effect (the WEBHOOK call\'s Idempotency-Key and webhook-id)' }),
  stepId: Nullable(Type.String()),
  type: StepType,
  status: StringEnum(STEP_RUN_STATUSES),
  branch: Nullable(Type.String()),
  output: Nullable(Type.Record(Type.String(), Type.Unknown())),
  error: Nullable(Type.String()),
  attempts: Type.Integer(),
  startedAt: Timestamp,
  finishedAt: Nullable(Timestamp),
});

const StepExecution = Type.Composite([
  StepRun,
  Type.Object({ executionId: Type.String(), completedAt: Nullable(Timestamp), step: Nullable(StepSummary) }),
]);

const ExecutionDetail = Type.Composite([
  Execution,
  Type.Object({ steps: Type.Array(StepRun), stepExecutions: Type.Array(StepExecution, { description: "Plunk's name for `steps`, each with its step's id, name and type" }) }),
]);

function presentWorkflow(w: WorkflowRow): Static<typeof Workflow> {
  const trigger = { type: w.triggerType, event: w.triggerEvent };
  return {
    id: w.id,
    name: w.name,
    description: w.description,
    trigger,
    allowReentry: w.allowReentry,
    enabled: w.enabled,
    triggerType: w.triggerType,
    triggerConfig: plunkTriggerConfig(trigger),
    createdAt: w.createdAt.toISOString(),
    updatedAt: w.updatedAt.toISOString(),
  };
}

function presentStep(s: WorkflowStepRow): Static<typeof Step> {
  return {
    id: s.id,
    workflowId: s.workflowId,
    type: s.type,
    name: s.name,
    config: s.config,
    position: s.position,
    templateId: s.type === 'SEND_EMAIL' ? ((s.config.templateId as string | undefined) ?? null) : null,
    createdAt: s.createdAt.toISOString(),
    updatedAt: s.updatedAt.toISOString(),
  };
}

function presentTransition(t: WorkflowTransitionRow): Static<typeof Transition> {
  const branch = t.branch as WorkflowBranch;
  return { id: t.id, fromStepId: t.fromStepId, toStepId: t.toStepId, branch, ...plunkTransitionFields(branch) };
}

function presentGraph(g: WorkflowGraph): Static<typeof WorkflowDetail> {
  const transitions = g.transitions.map(presentTransition);
  return {
    ...presentWorkflow(g.workflow),
    steps: g.steps.map((s) => ({
      ...presentStep(s),
      outgoingTransitions: transitions.filter((t) => t.fromStepId === s.id),
      incomingTransitions: transitions.filter((t) => t.toStepId === s.id),
    })),
    transitions,
  };
}

/** What execution answers show of steps and contacts (Plunk's `currentStep`, `contact`, `stepExecutions[].step`). */
interface ExecutionLookups {
  steps: Map<string, Static<typeof StepSummary>>;
  emails: Map<string, string>;
}

async function executionLookups(projectId: string, workflowId: string, rows: ExecutionRow[], db: DbOrTx): Promise<ExecutionLookups> {
  const [steps, emails] = await Promise.all([stepSummaries(db, projectId, workflowId), contactEmails(db, projectId, rows.map((x) => x.contactId))]);
  return { steps, emails };
}

function presentExecution(x: ExecutionRow, look: ExecutionLookups): Static<typeof Execution> {
  const email = look.emails.get(x.contactId);
  return {
    id: x.id,
    workflowId: x.workflowId,
    contactId: x.contactId,
    status: x.status,
    currentStepId: x.currentStepId,
    waitingFor: x.status === 'WAITING' ? x.waitEvent : null,
    dueAt: x.status === 'RUNNING' || x.status === 'WAITING' ? (x.dueAt?.toISOString() ?? null) : null,
    context: x.context,
    exitReason: x.exitReason,
    error: x.error,
    startedAt: x.createdAt.toISOString(),
    updatedAt: x.updatedAt.toISOString(),
    finishedAt: x.finishedAt?.toISOString() ?? null,
    completedAt: x.finishedAt?.toISOString() ?? null,
    currentStep: (x.currentStepId && look.steps.get(x.currentStepId)) || null,
    contact: email === undefined ? null : { id: x.contactId, email },
  };
}

function presentRun(r: StepRunRow): Static<typeof StepRun> {
  return {
    id: r.id,
    stepId: r.stepId,
    type: r.stepType,
    status: r.status,
    branch: r.branch,
    output: r.output,
    error: r.error,
    attempts: r.attempts,
    startedAt: r.startedAt.toISOString(),
    finishedAt: r.finishedAt?.toISOString() ?? null,
  };
}

function presentStepExecution(r: StepRunRow, look: ExecutionLookups): Static<typeof StepExecution> {
  const run = presentRun(r);
  return { ...run, executionId: r.executionId, completedAt: run.finishedAt, step: (r.stepId && look.steps.get(r.stepId)) || null };
}

/** The stored trigger columns of a request's trigger (ours or Plunk's). @throws 422 naming the field. */
function triggerColumns(body: Parameters<typeof resolveTrigger>[0], current?: WorkflowRow): { triggerType: 'EVENT' | 'MANUAL'; triggerEvent: string | null } | undefined {
  const t = resolveTrigger(body, current && { type: current.triggerType, event: current.triggerEvent });
  return t && { triggerType: t.type, triggerEvent: t.event };
}

/**
 * Checks a step's configuration: its schema, and what it refers to in the project (a SEND_EMAIL template of this
 * project with a sender on a verified domain; a WEBHOOK URL on a public host unless the operator allows private
 * targets). @returns the normalized configuration. @throws 422.
 */
async function checkStep(
  db: DbOrTx,
  projectId: string,
  type: WorkflowStepType,
  config: unknown,
  field: string,
  allowPrivate: boolean,
): Promise<Record<string, unknown>> {
  const value = parseStepConfig(type, config, field) as Record<string, unknown>;
  if (type === 'WEBHOOK') {
    const problem = webhookUrlProblem(value.url as string, allowPrivate);
    if (problem) throw validationError([{ field: `${field}.url`, message: problem, code: 'invalid_string' }]);
  }
  if (type === 'SEND_EMAIL') {
    const template = await getTemplate(db, projectId, value.templateId as string);
    if (!template) throw validationError([{ field: `${field}.templateId`, message: 'no template with this id in this project', code: 'custom' }]);
    const from = (value.from as string | undefined) ?? template.from;
    if (!from) throw validationError([{ field: `${field}.from`, message: 'is required: the template has no from address', code: 'invalid_type' }]);
    const bad = await senderError(db, projectId, from, value.from ? `${field}.from` : `${field}.templateId`);
    if (bad) throw validationError([bad]);
  }
  return value;
}

/** Graph problems as field errors: `steps.<ref>` / `transitions.<ref>` / `graph`. */
function graphErrors(problems: GraphProblem[], stepRef: (i: number) => string, transitionRef: (i: number) => string, whole: string): FieldError[] {
  return problems.map((p) => ({
    field: p.at === null ? whole : 'step' in p.at ? stepRef(p.at.step) : transitionRef(p.at.transition),
    message: p.message,
    code: 'custom' as const,
  }));
}

/** The stored graph's problems (enable, or edits of an enabled workflow). */
function storedGraphErrors(g: Pick<WorkflowGraph, 'steps' | 'transitions'>): FieldError[] {
  const problems = graphProblems(
    g.steps.map((s) => ({ ref: s.id, type: s.type })),
    g.transitions.map((t) => ({ from: t.fromStepId, to: t.toStepId, branch: t.branch as WorkflowBranch })),
  );
  return graphErrors(problems, (i) => `steps.${g.steps[i].id}`, (i) => `transitions.${g.transitions[i].id}`, 'graph');
}

/** Re-checks every SEND_EMAIL step's references (a template may have been deleted or changed since). */
async function stepRefErrors(db: DbOrTx, projectId: string, steps: WorkflowStepRow[], allowPrivate: boolean): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  for (const s of steps) {
    try {
      await checkStep(db, projectId, s.type, s.config, `steps.${s.id}.config`, allowPrivate);
    } catch (err) {
      if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
      else throw err;
    }
  }
  return errors;
}

const StepParams = Type.Object({ id: Type.String({ format: 'uuid' }), stepId: Type.String({ format: 'uuid' }) });
const TransitionParams = Type.Object({ id: Type.String({ format: 'uuid' }), transitionId: Type.String({ format: 'uuid' }) });
const ExecutionParams = Type.Object({ id: Type.String({ format: 'uuid' }), executionId: Type.String({ format: 'uuid' }) });

const StepKey = Type.String({ minLength: 1, maxLength: 100, description: 'your name for the step in this request, used by transitions' });

/** Routes of this module. */
export function workflowRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const allowPrivate = deps.config.webhookAllowPrivateTargets;

  /** Runs `change` on the graph in a transaction; an enabled workflow must still have a valid graph after it. */
  const graphChange = async <T>(projectId: string, workflowId: string, change: (tx: DbOrTx, w: WorkflowRow) => Promise<T>): Promise<T> =>
    deps.database.db.transaction(async (tx) => {
      // Locks the workflow: concurrent edits of one graph are serialized, so the check sees the final graph.
      if (!(await lockWorkflow(tx, projectId, workflowId))) throw notFound('Workflow');
      const w = (await getWorkflow(tx, projectId, workflowId))!;
      const result = await change(tx, w);
      await touchWorkflow(tx, projectId, workflowId);
      if (w.enabled) {
        const g = (await loadWorkflowGraph(tx, projectId, workflowId))!;
        const errors = storedGraphErrors(g);
        if (errors.length > 0) throw validationError(errors, 'The workflow is enabled and this change would leave its graph unable to run; disable it first or send the whole graph with PUT /workflows/{id}/graph');
      }
      return result;
    });

  return [
    route({
      method: 'get',
      path: '/workflows/webhook-secret',
      operationId: 'getWorkflowWebhookSecret',
      tag: 'Workflows',
      summary: 'The secret signing WEBHOOK steps\' calls',
      description:
        'WEBHOOK steps sign each call per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`: ' +
        'HMAC-SHA256 under this secret). `webhook-id` and `Idempotency-Key` are the step run id: the same on every attempt of a step.',
      auth: 'secret',
      response: Type.Object({ secret: Type.String({ description: 'whsec_…' }) }),
      status: 200,
      errors: [401, 403, 429],
      handler: async ({ auth }) => ({ data: { secret: await workflowWebhookSecret(db, auth.projectId, newWebhookSecret) } }),
    }),
    route({
      method: 'get',
      path: '/workflows',
      operationId: 'listWorkflows',
      tag: 'Workflows',
      summary: 'List workflows, newest first',
      description: "Pages by `cursor`, or by Plunk's `page`/`pageSize` (at most 10,000 rows deep); the answer carries Plunk's `workflows`, `page`, `pageSize` and `totalPages` beside `items`.",
      auth: 'secret',
      query: Type.Object(
        {
          ...PageQuery,
          ...PlunkPageQuery,
          enabled: Type.Optional(Type.Boolean()),
          search: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'part of the name or description, any case' })),
        },
        { additionalProperties: false },
      ),
      response: Type.Object({ items: Type.Array(Workflow), ...PageFields, workflows: Type.Array(Workflow, { description: "Plunk's name for `items`" }), ...PlunkPageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const paging = resolvePaging(query);
        const page = await listWorkflows(db, auth.projectId, { limit: paging.limit, offset: paging.offset, beforeId: cursorId(query.cursor), enabled: query.enabled, search: query.search });
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
        if (body.enabled === true) throw validationError([{ field: 'enabled', message: 'a workflow is created disabled: add its steps, then PATCH enabled: true', code: 'custom' }]);
        const trigger = triggerColumns(body);
        if (!trigger) throw validationError([{ field: 'trigger', message: 'is required (or Plunk\'s eventName, or triggerType with triggerConfig)', code: 'invalid_type' }]);
        const w = await createWorkflow(tx, auth.projectId, { name: body.name, description: body.description, allowReentry: body.allowReentry, ...trigger });
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
        '`enabled: true` checks the whole graph and the SEND_EMAIL steps\' templates and senders (422 listing every problem). ' +
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
        await graphChange(auth.projectId, params.id, async (tx, w) => {
          const patch = { name: body.name, description: body.description, allowReentry: body.allowReentry, enabled: body.enabled, ...triggerColumns(body, w) };
          if (body.enabled === true && !w.enabled) {
            const g = (await loadWorkflowGraph(tx, auth.projectId, params.id))!;
            const errors = [...storedGraphErrors(g), ...(await stepRefErrors(tx, auth.projectId, g.steps, allowPrivate))];
            if (errors.length > 0) throw validationError(errors, 'The workflow cannot be enabled: its graph or steps have problems');
          }
          await updateWorkflow(tx, auth.projectId, params.id, Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined)));
        });
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
        await announceWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, log);
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
        await announceWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, log);
        return { data: presentGraph((await loadWorkflowGraph(db, auth.projectId, params.id))!) };
      },
    }),
    route({
      method: 'get',
      path: '/workflows/:id/executions',
      operationId: 'listWorkflowExecutions',
      tag: 'Workflows',
      summary: 'List a workflow\'s executions, newest first',
      description: "Pages by `cursor`, or by Plunk's `page`/`pageSize` (at most 10,000 rows deep); the answer carries Plunk's `executions`, `page`, `pageSize` and `totalPages` beside `items`.",
      auth: 'secret',
      params: IdParams,
      query: Type.Object(
        { ...PageQuery, ...PlunkPageQuery, status: Type.Optional(StringEnum(EXECUTION_STATUSES)), contactId: Type.Optional(Type.String({ format: 'uuid' })) },
        { additionalProperties: false },
      ),
      response: Type.Object({
        items: Type.Array(Execution),
        ...PageFields,
        totalExact: Type.Boolean({ description: 'false when `total` is a lower bound (more than 10,000 matching executions)' }),
        executions: Type.Array(Execution, { description: "Plunk's name for `items`" }),
        ...PlunkPageFields,
      }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        if (!(await getWorkflow(db, auth.projectId, params.id))) throw notFound('Workflow');
        const paging = resolvePaging(query);
        const page = await listExecutions(db, auth.projectId, params.id, {
          limit: paging.limit,
          offset: paging.offset,
          beforeId: cursorId(query.cursor),
          status: query.status,
          contactId: query.contactId,
        });
        const look = await executionLookups(auth.projectId, params.id, page.items, db);
        const body = keysetPage(page, (x) => presentExecution(x, look), page.total);
        return { data: { ...body, totalExact: page.totalExact, executions: body.items, ...plunkPageFields(page.total, paging.page, paging.limit) } };
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
        return { data: { ...presentExecution(found.execution, look), steps: found.steps.map(presentRun), stepExecutions: found.steps.map((r) => presentStepExecution(r, look)) } };
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
        're-entry a contact that already entered gets 409 `CONFLICT`. `data` (or Plunk\'s `context`) becomes `context.trigger.data`. ' +
        'The execution runs in the worker; this returns it RUNNING.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          contactId: Type.Optional(Type.String({ format: 'uuid' })),
          email: Type.Optional(EmailAddress),
          data: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown())),
          context: Type.Optional(Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { description: "Plunk's name for `data`" })),
        },
        { additionalProperties: false },
      ),
      response: Execution,
      status: 201,
      errors: [400, 401, 403, 404, 409, 413, 422, 429],
      idempotent: true,
      handler: async ({ params, body, auth, db: tx, afterCommit, log }) => {
        if ((body.contactId === undefined) === (body.email === undefined)) {
          throw validationError([{ field: 'contactId', message: 'give either `contactId` or `email`', code: 'invalid_type' }]);
        }
        if (body.data !== undefined && body.context !== undefined) {
          throw validationError([{ field: 'context', message: 'give either `data` or Plunk\'s `context`, not both', code: 'custom' }]);
        }
        const w = await getWorkflow(tx, auth.projectId, params.id);
        if (!w) throw notFound('Workflow');
        if (!w.enabled) throw new AppError(ErrorCode.INVALID_STATE, 'The workflow is disabled; enable it (PATCH enabled: true) to start executions');
        const contact = body.contactId ? await getContact(tx, auth.projectId, body.contactId) : await findContactByEmail(tx, auth.projectId, body.email!);
        if (!contact) throw validationError([{ field: body.contactId ? 'contactId' : 'email', message: 'no such contact in this project', code: 'custom' }]);
        const started = await startManualExecution(tx, w, contact.id, body.data ?? body.context ?? {});
        if (!started.ok) throw new AppError(ErrorCode.CONFLICT, 'The contact already entered this workflow and it does not allow re-entry');
        afterCommit(async () => {
          await enqueueExecutions(deps.workflowQueue, [started.execution], log);
          await announceWebhookDeliveries(deps.webhookQueue, deps.config, started.deliveries, log);
        });
        return { data: presentExecution(started.execution, await executionLookups(auth.projectId, params.id, [started.execution], tx)) };
      },
    }),
    ...(['post', 'delete'] as const).map((method) =>
      route({
        method,
        path: method === 'post' ? '/workflows/:id/executions/:executionId/cancel' : '/workflows/:id/executions/:executionId',
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
          const r = await deps.database.db.transaction((tx) => cancelExecution(tx, auth.projectId, params.id, params.executionId));
          if (!r) throw notFound('Execution');
          if (!r.cancelled) throw new AppError(ErrorCode.INVALID_STATE, `The execution is already ${r.execution.status}`);
          await announceWebhookDeliveries(deps.webhookQueue, deps.config, r.deliveries, log);
          return { data: presentExecution(r.execution, await executionLookups(auth.projectId, params.id, [r.execution], db)) };
        },
      }),
    ),
  ];
}
