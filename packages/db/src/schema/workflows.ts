import {
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { contacts } from './contacts';
import { EXECUTION_STATUSES, STEP_RUN_STATUSES, WORKFLOW_BRANCHES, WORKFLOW_STEP_TYPES } from './workflow-states';
import type { ExecutionStatus, StepRunStatus, WorkflowStepType } from './workflow-states';

const inList = (column: string, values: readonly string[]) =>
  sql.raw(`${column} in (${values.map((v) => `'${v}'`).join(', ')})`);

/**
 * A workflow: a trigger (an event name, or MANUAL starts only), steps and transitions. Created disabled; only an
 * enabled workflow starts executions. `allowReentry: false` lets a contact enter at most once.
 */
export const workflows = pgTable(
  'workflows',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    triggerType: text('trigger_type').notNull().$type<'EVENT' | 'MANUAL'>(),
    triggerEvent: text('trigger_event'),
    allowReentry: boolean('allow_reentry').notNull().default(false),
    enabled: boolean('enabled').notNull().default(false),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('workflows_project_id_idx').on(t.projectId, t.id),
    // The events trigger's lookup: which enabled workflows start on this event name.
    index('workflows_trigger_idx')
      .on(t.projectId, t.triggerEvent)
      .where(sql`${t.enabled}`),
    check(
      'workflows_trigger_check',
      sql`(${t.triggerType} = 'EVENT' and ${t.triggerEvent} is not null) or (${t.triggerType} = 'MANUAL' and ${t.triggerEvent} is null)`,
    ),
  ],
);

/** A step of a workflow; `config` is the type's validated configuration, `position` where an editor draws it. */
export const workflowSteps = pgTable(
  'workflow_steps',
  {
    id: idColumn(),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    type: text('type').notNull().$type<WorkflowStepType>(),
    name: text('name').notNull(),
    config: jsonb('config').$type<Record<string, unknown>>().notNull().default({}),
    // Where a visual editor draws the step (Plunk v2's `position`, e.g. `{x, y}`); the engine never reads it.
    position: jsonb('position').$type<Record<string, unknown>>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('workflow_steps_workflow_idx').on(t.workflowId, t.id),
    check('workflow_steps_type_check', inList('type', WORKFLOW_STEP_TYPES)),
  ],
);

/**
 * An edge of the graph: from a step (or from the trigger, `fromStepId` null) along a branch (`next`; `yes`/`no`
 * of a CONDITION; `event`/`timeout` of a WAIT_FOR_EVENT) to a step. One edge per (from, branch).
 */
export const workflowTransitions = pgTable(
  'workflow_transitions',
  {
    id: idColumn(),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    fromStepId: uuid('from_step_id').references(() => workflowSteps.id, { onDelete: 'cascade' }),
    toStepId: uuid('to_step_id')
      .notNull()
      .references(() => workflowSteps.id, { onDelete: 'cascade' }),
    branch: text('branch').notNull().default('next'),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('workflow_transitions_from_idx')
      .on(t.workflowId, t.fromStepId, t.branch)
      .where(sql`${t.fromStepId} is not null`),
    uniqueIndex('workflow_transitions_entry_idx')
      .on(t.workflowId)
      .where(sql`${t.fromStepId} is null`),
    check('workflow_transitions_branch_check', inList('branch', WORKFLOW_BRANCHES)),
  ],
);

/**
 * One contact's run through a workflow. The row is the state machine; every move is a compare-and-set on
 * `version`, so two movers (an event and a timeout, a retried job) can never both advance it.
 *
 * - `entryKey` makes entry idempotent: `contact:<id>` without re-entry (one execution per contact, ever),
 *   `event:<id>` with re-entry (one per trigger event), `manual:<id>` for manual starts with re-entry; a test
 *   execution's key has the prefix `test:` (`test:contact:<id>`), so test entries never block live ones.
 * - `dueAt`: when the next job should run it (now for RUNNING; the end of a delay or wait for WAITING).
 * - `resumeBranch`: set when a WAITING step ended (`next` after a delay, `event` or `timeout`); the job records
 *   it and follows that branch.
 * - `leaseToken`/`leaseUntil`: the worker running it; another job waits for the lease to end.
 */
export const workflowExecutions = pgTable(
  'workflow_executions',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    workflowId: uuid('workflow_id')
      .notNull()
      .references(() => workflows.id, { onDelete: 'cascade' }),
    contactId: uuid('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    status: text('status').notNull().$type<ExecutionStatus>(),
    currentStepId: uuid('current_step_id').references(() => workflowSteps.id, { onDelete: 'set null' }),
    version: integer('version').notNull().default(0),
    dueAt: timestamp('due_at', { withTimezone: true, mode: 'date' }),
    waitEvent: text('wait_event'),
    waitSince: timestamp('wait_since', { withTimezone: true, mode: 'date' }),
    resumeBranch: text('resume_branch'),
    leaseToken: uuid('lease_token'),
    leaseUntil: timestamp('lease_until', { withTimezone: true, mode: 'date' }),
    entryKey: text('entry_key').notNull(),
    triggerEventId: uuid('trigger_event_id'),
    context: jsonb('context').$type<Record<string, unknown>>().notNull().default({}),
    exitReason: text('exit_reason'),
    error: text('error'),
    /**
     * Started by a test event or a test key's manual start: its SEND_EMAIL emails are test emails (sink, never
     * SES); only test events wake it, and a test event wakes no live execution.
     */
    test: boolean('test').notNull().default(false),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
    finishedAt: timestamp('finished_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    uniqueIndex('workflow_executions_entry_idx').on(t.workflowId, t.entryKey),
    index('workflow_executions_workflow_idx').on(t.workflowId, t.id),
    index('workflow_executions_status_idx').on(t.workflowId, t.status, t.id),
    index('workflow_executions_contact_idx').on(t.contactId),
    // WAIT_FOR_EVENT: the executions of a contact waiting for an event name.
    index('workflow_executions_waiting_idx')
      .on(t.projectId, t.contactId, t.waitEvent)
      .where(sql`${t.status} = 'WAITING'`),
    // The reconciler: live executions whose next run is overdue.
    index('workflow_executions_due_idx')
      .on(t.dueAt)
      .where(sql`${t.status} in ('RUNNING', 'WAITING')`),
    // The retention pass (RETENTION_WORKFLOW_EXECUTION_DAYS): a project's executions finished longest ago.
    index('workflow_executions_retention_idx')
      .on(t.projectId, t.finishedAt)
      .where(sql`${t.status} not in ('RUNNING', 'WAITING')`),
    check('workflow_executions_status_check', inList('status', EXECUTION_STATUSES)),
  ],
);

/**
 * The history of an execution: one row per step run, keyed by the execution's version when the step started.
 * Partitioned by month of id (migration 0020): the id is derived from (execution, version) with the time of the
 * execution's id (`stepRunId`, @mailroom/workflows/queries/workflow-engine), so a retried job finds the run it
 * already began through the primary key (and its id, the idempotency key of the step's effect).
 */
export const workflowStepRuns = pgTable(
  'workflow_step_runs',
  {
    id: idColumn(),
    executionId: uuid('execution_id')
      .notNull()
      .references(() => workflowExecutions.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    stepId: uuid('step_id').references(() => workflowSteps.id, { onDelete: 'set null' }),
    stepType: text('step_type').notNull().$type<WorkflowStepType>(),
    version: integer('version').notNull(),
    status: text('status').notNull().$type<StepRunStatus>(),
    branch: text('branch'),
    output: jsonb('output').$type<Record<string, unknown>>(),
    error: text('error'),
    attempts: integer('attempts').notNull().default(0),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
    finishedAt: timestamp('finished_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('workflow_step_runs_version_idx').on(t.executionId, t.version),
    check('workflow_step_runs_status_check', inList('status', STEP_RUN_STATUSES)),
  ],
);

/**
 * Events that may start or wake executions, written by a trigger on `events` in the inserting transaction (only
 * for event names an enabled workflow starts on or an execution waits for) and drained by the worker.
 */
export const workflowInbox = pgTable('workflow_inbox', {
  id: idColumn(),
  eventId: uuid('event_id').notNull(),
  projectId: uuid('project_id')
    .notNull()
    .references(() => projects.id, { onDelete: 'cascade' }),
  createdAt: createdAt(),
});
