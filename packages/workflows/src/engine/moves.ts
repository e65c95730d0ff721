/**
 * The moves of a leased workflow execution, under the steps' semantics (`./run`): each a compare-and-set on the
 * execution's `version` (`moveExecution`) with its effects (the step run it ends and the one it begins, the
 * `workflow.<status>` webhook of a final move), a step's own write committed in the move's transaction, and the
 * continuation after a move lost its compare-and-set to another mover (an event, a cancel).
 *
 * @module
 */
import type { WebhookConfig } from '@mailroom/webhooks/config';
import type { WorkflowConfig } from '../config';
import { type WorkflowBranch } from '@mailroom/db/schema/workflow-states';
import { type Logger } from '@mailroom/platform/logger';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { leasedExecution, moveExecution, type ExecutionMove, type MoveEffects } from '../queries/workflow-engine';
import { type ExecutionRow, type StepRunRow } from '../queries/workflows';
import { type Database, type DbOrTx } from '@mailroom/db/client';
import { type EngineGraph, type EngineStep } from './steps';

/** What the engine needs: the database, the settings of leases, retries and WEBHOOK targets, a logger. */
export interface EngineDeps {
  db: Database['db'];
  config: Pick<WorkflowConfig, 'workflowLeaseMs' | 'workflowRetryBackoffMs'> &
    Pick<WebhookConfig, 'webhookAllowPrivateTargets'>;
}

class Rollback extends Error {}

/** A leased execution and the moves a run makes on it; what committed is kept for the run's handover. */
export abstract class ExecutionMoves {
  protected readonly db: Database['db'];
  /** Webhook deliveries the committed moves wrote (the outbox's `workflow.*` events). */
  protected deliveries: WebhookDeliveryRef[] = [];
  /** The run begun by the last move (the step the execution now stands on). */
  protected begun: StepRunRow | undefined;

  constructor(
    protected readonly deps: EngineDeps,
    public x: ExecutionRow,
    protected readonly graph: EngineGraph,
    protected readonly lease: string,
    protected readonly log: Logger,
  ) {
    this.db = deps.db;
  }

  /** The graph's step `id`, or undefined (none, or removed). */
  protected step(id: string | null): EngineStep | undefined {
    return id ? this.graph.steps.find((s) => s.id === id) : undefined;
  }

  /** The step `branch` of `stepId` leads to, or undefined. */
  protected nextOf(stepId: string, branch: WorkflowBranch): EngineStep | undefined {
    return this.step(
      this.graph.transitions.find((t) => t.fromStepId === stepId && t.branch === branch)?.toStepId ?? null,
    );
  }

  /**
   * One move with its effects; a final move also announces `workflow.<status>`. Keeps the deliveries and the run
   * it began. @returns the moved row, or undefined when another mover won (callers then continue from
   * {@link ExecutionRun.lost}).
   */
  protected async move(
    db: DbOrTx,
    x: ExecutionRow,
    move: ExecutionMove,
    effects: MoveEffects = {},
  ): Promise<ExecutionRow | undefined> {
    const final = ['COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'].includes(move.status);
    const extra = {
      status: move.status,
      ...(move.exitReason ? { reason: move.exitReason } : {}),
      ...(move.error ? { error: move.error } : {}),
    };
    const data = {
      workflowId: x.workflowId,
      executionId: x.id,
      contactId: x.contactId,
      ...extra,
      ...(x.test ? { test: true } : {}),
    };
    const hook = final ? { type: `workflow.${move.status.toLowerCase()}`, data } : undefined;
    const r = await moveExecution(db, x, this.lease, move, { ...effects, ...(hook ? { hook } : {}) });
    if (!r.execution) return undefined;
    this.deliveries.push(...r.deliveries);
    this.begun = r.run;
    if (final) this.log.info(extra, 'workflow execution ended');
    return r.execution;
  }

  /** A move lost its compare-and-set: continue with the row as it now is, if it is still ours and live. */
  protected async lost(): Promise<ExecutionRow | undefined> {
    const row = await leasedExecution(this.db, this.x.id, this.lease);
    if (!row || (row.status !== 'RUNNING' && row.status !== 'WAITING') || row.version === this.x.version)
      return undefined;
    return row;
  }

  /** The move that leaves `step` by `branch`: to the next step (its run begun), or COMPLETED when the branch leads nowhere. */
  protected leave(
    step: EngineStep,
    branch: WorkflowBranch,
    context?: Record<string, unknown>,
  ): { move: ExecutionMove; beginRun?: MoveEffects['beginRun'] } {
    const to = this.nextOf(step.id, branch);
    return to
      ? {
          move: { status: 'RUNNING', currentStepId: to.id, resumeBranch: null, context },
          beginRun: { stepId: to.id, stepType: to.type },
        }
      : { move: { status: 'COMPLETED', resumeBranch: null, context } };
  }

  /**
   * Ends a step run and moves on by `branch`. `effect` (the step's own write) commits in the same transaction,
   * after the move's compare-and-set succeeded; without one the move is a single statement.
   */
  protected async done(
    run: StepRunRow,
    step: EngineStep,
    branch: WorkflowBranch,
    end: { status: 'COMPLETED' | 'SKIPPED'; output?: Record<string, unknown> },
    opts: { effect?: (tx: DbOrTx) => Promise<unknown>; context?: Record<string, unknown>; committed?: () => void } = {},
  ): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const { move, beginRun } = this.leave(step, branch, opts.context);
    const effects: MoveEffects = {
      endRun: { target: { id: run.id }, status: end.status, branch, output: end.output, error: null },
      beginRun,
    };
    const { effect } = opts;
    if (!effect) {
      const moved = await this.move(this.db, x, move, effects);
      if (moved) opts.committed?.();
      return moved ?? this.lost();
    }
    const mark = this.deliveries.length;
    try {
      const moved = await this.db.transaction(async (tx) => {
        const m = await this.move(tx, x, move, effects);
        if (!m) throw new Rollback();
        await effect(tx);
        return m;
      });
      opts.committed?.();
      return moved;
    } catch (err) {
      // Rolled back: nothing the move wrote exists.
      this.deliveries.length = mark;
      this.begun = undefined;
      if (err instanceof Rollback) return this.lost();
      throw err;
    }
  }

  /** Ends the execution EXITED or FAILED, closing the step run. */
  protected async end(
    run: StepRunRow | undefined,
    status: 'EXITED' | 'FAILED',
    reason: string,
  ): Promise<ExecutionRow | undefined> {
    const move: ExecutionMove = status === 'EXITED' ? { status, exitReason: reason } : { status, error: reason };
    const endRun: MoveEffects['endRun'] = run
      ? status === 'FAILED'
        ? { target: { id: run.id }, status: 'FAILED', error: reason }
        : { target: { id: run.id }, status: 'COMPLETED', output: { reason } }
      : undefined;
    return (await this.move(this.db, this.x, move, endRun ? { endRun } : {})) ?? this.lost();
  }
}
