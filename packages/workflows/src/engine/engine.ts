/**
 * The workflow engine's entry point: run one execution as far as it can go now (what a `workflow` job does).
 *
 * 1. Lease the execution (another run of it waits until the lease ends; a dead worker's lease expires after
 *    `WORKFLOW_LEASE_MS`).
 * 2. Run its steps ({@link ExecutionRun}, run.ts) until it waits, ends, or reaches the per-run step cap.
 * 3. Release the lease, then hand over what committed: the caller enqueues send jobs and webhook deliveries, and
 *    the next run of the execution (delayed to a DELAY's end, a wait's timeout or a WEBHOOK retry; or now).
 *
 * The engine knows no queue: the worker's processor turns the outcome and the hand-over into BullMQ calls.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import { type ExecutionStatus } from '@mailroom/db/schema/workflow-states';
import { type Logger } from '@mailroom/platform/logger';
import { loadWorkflowGraph } from '../queries/workflows';
import { claimExecution, releaseExecution } from '../queries/workflow-engine';
import { GraphCache } from './graph-cache';
import { ExecutionRun, type EngineDeps, type Handover } from './run';
import { engineGraph } from './steps';

/** What a run reports (a job's result, shown in the dashboard). */
export type WorkflowJobResult =
  { outcome: 'ran'; steps: number; status: ExecutionStatus } | { outcome: 'skipped'; reason: string };

/** A run's outcome: {@link WorkflowJobResult}, or `held` when another run leases the execution until `until`. */
export type WorkflowRunOutcome = WorkflowJobResult | { outcome: 'held'; until: Date };

/** The engine of one worker process: runs executions, with the graphs it loaded cached (see {@link GraphCache}). */
export interface WorkflowEngine {
  /**
   * Leases execution `executionId` of `projectId` and runs it. `handOver` is called once the lease is released,
   * with what committed, also when a step threw (the error is rethrown after it): a run that was held, skipped
   * or found its workflow deleted does not call it.
   *
   * @throws what a step's database work threw (the run's committed moves stand; a retry repeats nothing).
   */
  run(
    executionId: string,
    projectId: string,
    log: Logger,
    handOver: (h: Handover) => Promise<void>,
  ): Promise<WorkflowRunOutcome>;
}

/** Creates the engine. */
export function createWorkflowEngine(deps: EngineDeps): WorkflowEngine {
  const { db, config } = deps;
  const graphs = new GraphCache(async (projectId, workflowId) => {
    const g = await loadWorkflowGraph(db, projectId, workflowId);
    return g && engineGraph(g);
  });
  return {
    async run(executionId, projectId, log, handOver) {
      const lease = randomUUID();
      const claim = await claimExecution(db, executionId, lease, config.workflowLeaseMs);
      if (claim.kind === 'held') return { outcome: 'held', until: claim.until };
      if (claim.kind !== 'claimed')
        return {
          outcome: 'skipped',
          reason: claim.kind === 'final' ? `execution already ${claim.status}` : 'execution no longer exists',
        };
      const graph = await graphs.get(projectId, claim.execution.workflowId, claim.workflowVersion);
      if (!graph) {
        await releaseExecution(db, executionId, lease);
        return { outcome: 'skipped', reason: 'workflow no longer exists' };
      }
      const run = new ExecutionRun(deps, claim.execution, graph, lease, log);
      let capped = false;
      try {
        capped = await run.run(claim.projectDisabled);
      } finally {
        await handOver(await run.finish(capped));
      }
      return { outcome: 'ran', steps: run.steps, status: run.x.status };
    },
  };
}
