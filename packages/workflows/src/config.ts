/**
 * The workflows slice of the runtime configuration: how the engine leases executions, polls its inbox and
 * retries WEBHOOK steps. (Workflow concurrency is in the queues slice, whose catalog reads it.)
 *
 * @module
 */
import { int, type Env } from '@mailroom/platform/config-env';

/**
 * Workflow engine settings.
 *
 * @process worker
 * @group tuning
 */
export interface WorkflowConfig {
  /**
   * `WORKFLOW_LEASE_MS`: how long a worker holds an execution it runs (ms, 500–3600000, default 60000; extended for
   * a WEBHOOK step's timeout); an execution whose worker died is resumed by another after this.
   */
  readonly workflowLeaseMs: number;
  /** `WORKFLOW_INBOX_POLL_MS`: how often the worker looks for trigger events besides being notified (ms, default 1000). */
  readonly workflowInboxPollMs: number;
  /** `WORKFLOW_RETRY_BACKOFF_MS`: base of the exponential backoff between WEBHOOK step attempts (ms, default 5000). */
  readonly workflowRetryBackoffMs: number;
}

/**
 * Parses and validates the workflows slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link WorkflowConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadWorkflowConfig(env: Env): WorkflowConfig {
  return Object.freeze({
    workflowLeaseMs: int(env, 'WORKFLOW_LEASE_MS', 60_000, 500, 3_600_000),
    workflowInboxPollMs: int(env, 'WORKFLOW_INBOX_POLL_MS', 1_000, 10, 60_000),
    workflowRetryBackoffMs: int(env, 'WORKFLOW_RETRY_BACKOFF_MS', 5_000, 10, 3_600_000),
  });
}
