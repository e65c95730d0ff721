/**
 * The shapes of the workflow routes (`workflows.ts`, `workflow-graph.ts`, `workflow-executions.ts`): TypeBox
 * schemas of workflows, steps, transitions and executions (ours with Plunk v2's field names beside them), the
 * presenters that build them from rows. The rules every graph edit follows are in `@mailroom/workflows` graph/*.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import {
  EXECUTION_STATUSES,
  STEP_RUN_STATUSES,
  WORKFLOW_BRANCHES,
  WORKFLOW_STEP_TYPES,
  type WorkflowBranch,
} from '@mailroom/db/schema/workflow-states';
import { plunkTransitionFields, plunkTriggerConfig } from '@mailroom/workflows/workflows-plunk-graph';
import {
  type ExecutionRow,
  type StepRunRow,
  type WorkflowGraph,
  type WorkflowRow,
  type WorkflowStepRow,
  type WorkflowTransitionRow,
} from '@mailroom/workflows/queries/workflows';
import { contactEmails, stepSummaries } from '@mailroom/workflows/queries/workflow-executions';
import { type DbOrTx } from '@mailroom/db/client';
import { Nullable, StringEnum, Timestamp } from './common';

export const EventName = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^\\S(.*\\S)?$',
  description:
    'a custom event name, or a system event: contact.subscribed, contact.unsubscribed, email.opened, segment.<name>.entry, …',
});

export const TriggerInput = Type.Object(
  {
    type: StringEnum(
      ['EVENT', 'MANUAL'] as const,
      'EVENT: each recorded event of that name starts an execution for its contact; MANUAL: started through the API only',
    ),
    event: Type.Optional(EventName),
  },
  { additionalProperties: false },
);

export const Trigger = Type.Object({ type: StringEnum(['EVENT', 'MANUAL'] as const), event: Nullable(Type.String()) });

/** Plunk's trigger fields, accepted instead of `trigger`. */
export const PlunkTriggerInput = {
  eventName: Type.Optional(Type.String({ description: "Plunk's form of `trigger: {type: EVENT, event}`" })),
  triggerType: Type.Optional(Type.String({ description: "Plunk's form: EVENT or MANUAL (SCHEDULE is refused, 422)" })),
  triggerConfig: Type.Optional(
    Type.Unknown({ description: "Plunk's form: `{eventName}` of an EVENT trigger, or null" }),
  ),
};

export const Workflow = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  trigger: Trigger,
  allowReentry: Type.Boolean({
    description: 'false: a contact enters at most once; true: once per trigger event (or manual start)',
  }),
  enabled: Type.Boolean(),
  triggerType: StringEnum(['EVENT', 'MANUAL'] as const, "Plunk's name for trigger.type"),
  triggerConfig: Nullable(Type.Object({ eventName: Type.String() }, { description: "Plunk's form of trigger.event" })),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const StepType = StringEnum(WORKFLOW_STEP_TYPES);
export const Branch = StringEnum(WORKFLOW_BRANCHES, 'next; yes/no (CONDITION); event/timeout (WAIT_FOR_EVENT)');

export const StepConfigField = Type.Record(Type.String(), Type.Unknown(), {
  description:
    'By type. SEND_EMAIL `{templateId, from?, fromName?, replyTo?, data?}`; DELAY `{amount, unit}` (seconds, minutes, hours, days, weeks; ' +
    'at most a year); WAIT_FOR_EVENT `{event, timeout: {amount, unit}}`; CONDITION `{filter}` (the segment language, plus ' +
    '`context.<path>`, e.g. `context.trigger.data.plan`); WEBHOOK `{url, method?, headers?, body?, timeoutMs?, retries?}`; ' +
    "UPDATE_CONTACT `{data?, subscribed?}`; EXIT `{reason?}`. Plunk's forms are accepted and stored in ours: WAIT_FOR_EVENT " +
    '`{eventName, timeout: seconds}` (no timeout: one year); CONDITION `{field, operator, value}` (`contact.email`, ' +
    "`contact.subscribed`, `data.x`, `event.x` = the trigger's data; `notEquals`/`notContains` need the value to exist; " +
    '`mode: multi` is refused); UPDATE_CONTACT `{updates, subscriptionAction}`; WEBHOOK `body` as a JSON value (its ' +
    '`{{email}}`, `{{data.x}}`, `{{event.x}}` become `{{contact.email}}`, `{{contact.data.x}}`, `{{trigger.x}}`); ' +
    'SEND_EMAIL `recipient: {type: CONTACT}` (CUSTOM is refused).',
});

export const Position = Type.Record(Type.String(), Type.Unknown(), {
  description: "where an editor draws the step (Plunk's `{x, y}`); stored, never read by the engine",
});

export const Step = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  type: StepType,
  name: Type.String(),
  config: Type.Record(Type.String(), Type.Unknown()),
  position: Nullable(Position),
  templateId: Nullable(
    Type.String({ description: "Plunk's field: config.templateId of a SEND_EMAIL step, else null" }),
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const Transition = Type.Object({
  id: Type.String(),
  fromStepId: Nullable(Type.String({ description: 'null: from the trigger' })),
  toStepId: Type.String(),
  branch: Branch,
  condition: Nullable(Type.Object({ branch: Type.String() }, { description: "Plunk's form of a yes/no branch" })),
  waitOutcome: Nullable(StringEnum(['EVENT', 'TIMEOUT'] as const, "Plunk's form of an event/timeout branch")),
  priority: Type.Integer({
    description: "Plunk's field (0; 1 for timeout): branches are exclusive, so it orders nothing",
  }),
});

export const GraphStep = Type.Composite([
  Step,
  Type.Object({ outgoingTransitions: Type.Array(Transition), incomingTransitions: Type.Array(Transition) }),
]);

export const WorkflowDetail = Type.Composite([
  Workflow,
  Type.Object({ steps: Type.Array(GraphStep), transitions: Type.Array(Transition) }),
]);

export const StepSummary = Type.Object({ id: Type.String(), name: Type.String(), type: StepType });

export const Execution = Type.Object({
  id: Type.String(),
  workflowId: Type.String(),
  contactId: Type.String(),
  status: StringEnum(EXECUTION_STATUSES),
  currentStepId: Nullable(Type.String()),
  waitingFor: Nullable(Type.String({ description: 'the event a WAIT_FOR_EVENT step waits for' })),
  dueAt: Nullable(
    Type.String({ format: 'date-time', description: 'when a DELAY or a wait ends, or a WEBHOOK retry runs' }),
  ),
  context: Type.Record(Type.String(), Type.Unknown(), {
    description:
      '`trigger` (the starting event), `event` (the last awaited event), `webhook` (the last WEBHOOK answer)',
  }),
  exitReason: Nullable(Type.String()),
  error: Nullable(Type.String()),
  test: Type.Boolean({
    description:
      'a test execution: started by a test event (tracked with a test key) or a test key; its emails go to the test sink, and only test events wake it',
  }),
  startedAt: Timestamp,
  updatedAt: Timestamp,
  finishedAt: Nullable(Timestamp),
  completedAt: Nullable(Timestamp),
  currentStep: Nullable(StepSummary),
  contact: Nullable(Type.Object({ id: Type.String(), email: Type.String() })),
});

export const StepRun = Type.Object({
  id: Type.String({
    description: "also the idempotency key of the step's effect (the WEBHOOK call's Idempotency-Key and webhook-id)",
  }),
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

export const StepExecution = Type.Composite([
  StepRun,
  Type.Object({ executionId: Type.String(), completedAt: Nullable(Timestamp), step: Nullable(StepSummary) }),
]);

export const ExecutionDetail = Type.Composite([
  Execution,
  Type.Object({
    steps: Type.Array(StepRun),
    stepExecutions: Type.Array(StepExecution, {
      description: "Plunk's name for `steps`, each with its step's id, name and type",
    }),
  }),
]);

export function presentWorkflow(w: WorkflowRow): Static<typeof Workflow> {
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

export function presentStep(s: WorkflowStepRow): Static<typeof Step> {
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

export function presentTransition(t: WorkflowTransitionRow): Static<typeof Transition> {
  const branch = t.branch as WorkflowBranch;
  return { id: t.id, fromStepId: t.fromStepId, toStepId: t.toStepId, branch, ...plunkTransitionFields(branch) };
}

export function presentGraph(g: WorkflowGraph): Static<typeof WorkflowDetail> {
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
export interface ExecutionLookups {
  steps: Map<string, Static<typeof StepSummary>>;
  emails: Map<string, string>;
}

export async function executionLookups(
  projectId: string,
  workflowId: string,
  rows: ExecutionRow[],
  db: DbOrTx,
): Promise<ExecutionLookups> {
  const [steps, emails] = await Promise.all([
    stepSummaries(db, projectId, workflowId),
    contactEmails(
      db,
      projectId,
      rows.map((x) => x.contactId),
    ),
  ]);
  return { steps, emails };
}

export function presentExecution(x: ExecutionRow, look: ExecutionLookups): Static<typeof Execution> {
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
    test: x.test,
    startedAt: x.createdAt.toISOString(),
    updatedAt: x.updatedAt.toISOString(),
    finishedAt: x.finishedAt?.toISOString() ?? null,
    completedAt: x.finishedAt?.toISOString() ?? null,
    currentStep: (x.currentStepId && look.steps.get(x.currentStepId)) || null,
    contact: email === undefined ? null : { id: x.contactId, email },
  };
}

export function presentRun(r: StepRunRow): Static<typeof StepRun> {
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

export function presentStepExecution(r: StepRunRow, look: ExecutionLookups): Static<typeof StepExecution> {
  const run = presentRun(r);
  return {
    ...run,
    executionId: r.executionId,
    completedAt: run.finishedAt,
    step: (r.stepId && look.steps.get(r.stepId)) || null,
  };
}

export const StepParams = Type.Object({ id: Type.String({ format: 'uuid' }), stepId: Type.String({ format: 'uuid' }) });
export const TransitionParams = Type.Object({
  id: Type.String({ format: 'uuid' }),
  transitionId: Type.String({ format: 'uuid' }),
});
export const ExecutionParams = Type.Object({
  id: Type.String({ format: 'uuid' }),
  executionId: Type.String({ format: 'uuid' }),
});

export const StepKey = Type.String({
  minLength: 1,
  maxLength: 100,
  description: 'your name for the step in this request, used by transitions',
});
