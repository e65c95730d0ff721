/**
 * The persisted enumerations of workflows (step types, transition branches, execution and step-run statuses):
 * the schema's check constraints and the engine read the same lists.
 *
 * @module
 */

/** Step types. */
export const WORKFLOW_STEP_TYPES = [
  'SEND_EMAIL',
  'DELAY',
  'WAIT_FOR_EVENT',
  'CONDITION',
  'WEBHOOK',
  'UPDATE_CONTACT',
  'EXIT',
] as const;
export type WorkflowStepType = (typeof WORKFLOW_STEP_TYPES)[number];

/** Branch names of transitions. */
export const WORKFLOW_BRANCHES = ['next', 'yes', 'no', 'event', 'timeout'] as const;
export type WorkflowBranch = (typeof WORKFLOW_BRANCHES)[number];

/** Execution statuses: RUNNING and WAITING are live, the rest final and never change again. */
export const EXECUTION_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'] as const;
export type ExecutionStatus = (typeof EXECUTION_STATUSES)[number];

/** Statuses of one step's run in an execution's history. */
export const STEP_RUN_STATUSES = ['RUNNING', 'WAITING', 'COMPLETED', 'SKIPPED', 'FAILED', 'CANCELLED'] as const;
export type StepRunStatus = (typeof STEP_RUN_STATUSES)[number];
