/**
 * One run of one leased execution: as far as it can go now, step by step, exactly once per step.
 *
 * A WAITING execution that is due wakes (a DELAY ended; a WAIT_FOR_EVENT timed out, unless a matching event was
 * recorded in time); a RUNNING one runs its current step. Each step ends with one compare-and-set move
 * (`version`), and the step's effect commits in that move's transaction: the email row of SEND_EMAIL, the contact
 * change of UPDATE_CONTACT. A retried job finds the version moved and repeats nothing; a cancel or a racing event
 * makes the move fail and the effect roll back. An execution of a disabled project is CANCELLED instead (its mail
 * would be cancelled too). The run stops at a DELAY or WAIT_FOR_EVENT, a WEBHOOK retry, a final status, or after
 * {@link MAX_STEPS_PER_JOB} steps; what committed is then handed over ({@link Handover}) for the caller to enqueue.
 *
 * WEBHOOK calls cannot be rolled back: they carry the step run's id as `Idempotency-Key` and `webhook-id`
 * (Standard Webhooks signature with the project's workflow secret), the same on every attempt, so a call
 * repeated after a crash between the answer and the move can be recognised by the receiver.
 *
 * Test mode: a test execution (`test`, from a test event or a test key's manual start) writes test emails (the
 * sink, never SES) and test events (UPDATE_CONTACT); its WEBHOOK calls still go out, with `test: true`.
 *
 * @module
 */
import { durationMs, type StepConfig } from '../workflows';
import { keyedIdAt } from '@mailroom/platform/ids';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import type { WebhookConfig } from '@mailroom/webhooks/config';
import type { WorkflowConfig } from '../config';
import { type WorkflowBranch } from '@mailroom/db/schema/workflow-states';
import { type Logger } from '@mailroom/platform/logger';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import {
  beginStepRun,
  conditionMatches,
  contactForSend,
  deferExecution,
  eventContext,
  eventForWait,
  extendLease,
  finishStepRun,
  leasedExecution,
  moveExecution,
  releaseExecution,
  type ExecutionMove,
  type ExecutionRef,
  type MoveEffects,
} from '../queries/workflow-engine';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { pinnedTemplate } from '@mailroom/mail/queries/template-versions';
import { SUPPRESSION_REASONS } from '@mailroom/db/queries/suppression-rule';
import { insertQueuedEmails } from '@mailroom/db/queries/emails';
import {
  type ExecutionRow,
  type StepRunRow,
  type WorkflowGraph,
  type WorkflowStepRow,
} from '@mailroom/db/queries/workflows';
import { updateContact } from '@mailroom/db/queries/contacts';
import { type Database, type DbOrTx } from '@mailroom/db/client';
import { callStepWebhook, workflowEmailRow } from './effects';

/** Steps one run takes at most before handing the execution to a fresh job (fairness between executions). */
export const MAX_STEPS_PER_JOB = 50;

/** What the engine needs: the database, the settings of leases, retries and WEBHOOK targets, a logger. */
export interface EngineDeps {
  db: Database['db'];
  config: Pick<WorkflowConfig, 'workflowLeaseMs' | 'workflowRetryBackoffMs'> &
    Pick<WebhookConfig, 'webhookAllowPrivateTargets'>;
}

/**
 * What committed during a run, for the caller to hand on once the lease is released (nothing here is enqueued by
 * the engine: it knows no queue).
 */
export interface Handover {
  /** The execution as the run left it. */
  execution: ExecutionRow;
  /** Ids of the emails SEND_EMAIL steps queued (rows committed, status queued): to send. */
  sends: string[];
  /** The From address of each of `sends`, in the same order (the delivery connection its fair share counts in). */
  sendFroms: string[];
  /** Webhook deliveries written to the outbox (`workflow.*` events): to deliver. */
  deliveries: WebhookDeliveryRef[];
  /** Run the execution again at `at` (a DELAY ended, a wait timed out, a WEBHOOK retry); `suffix` tells jobs of one version apart. */
  wake?: { execution: ExecutionRef; at: Date; suffix?: string };
  /** Run the execution again now (an event moved it while leased, or the step cap stopped the run). */
  rerun?: { execution: ExecutionRef; suffix: string };
}

class Rollback extends Error {}

/** One job's run of one leased execution. */
export class ExecutionRun {
  private readonly db: Database['db'];
  private deliveries: WebhookDeliveryRef[] = [];
  private readonly sends: string[] = [];
  private readonly sendFroms: string[] = [];
  /** A delayed job to add when the run stops: version, due time, id suffix. */
  private wake: { version: number; at: Date; suffix?: string } | undefined;
  /** The run begun by the last move (the step the execution now stands on). */
  private begun: StepRunRow | undefined;
  steps = 0;

  constructor(
    private readonly deps: EngineDeps,
    public x: ExecutionRow,
    private readonly graph: WorkflowGraph,
    private readonly lease: string,
    private readonly log: Logger,
  ) {
    this.db = deps.db;
  }

  /** Runs until the execution waits, ends, or the per-job step cap. @returns whether the cap stopped it. */
  async run(projectDisabled: boolean): Promise<boolean> {
    if (projectDisabled) {
      // As its queued mail is cancelled, a disabled project's executions are: nothing of theirs runs any more.
      await this.move(
        this.db,
        this.x,
        { status: 'CANCELLED', error: 'project disabled' },
        { endRun: { target: 'open', status: 'CANCELLED', error: 'project disabled' } },
      );
      return false;
    }
    for (let i = 0; i < MAX_STEPS_PER_JOB; i++) {
      const next = await this.advance();
      if (!next) return false;
      this.x = next;
    }
    return true;
  }

  /**
   * Releases the lease (a final move already did). @returns what committed, and whether (and when) the execution
   * must run again.
   */
  async finish(capped: boolean): Promise<Handover> {
    const live = (s: string) => s === 'RUNNING' || s === 'WAITING';
    const after = live(this.x.status) ? await releaseExecution(this.db, this.x.id, this.lease) : undefined;
    const handover: Handover = {
      execution: this.x,
      sends: this.sends,
      sendFroms: this.sendFroms,
      deliveries: this.deliveries,
    };
    if (this.wake)
      handover.wake = {
        execution: { ...this.x, version: this.wake.version },
        at: this.wake.at,
        ...(this.wake.suffix ? { suffix: this.wake.suffix } : {}),
      };
    // Moved by someone else while leased (an event woke it), or stopped by the cap: run it again now.
    const due = after && (!after.dueAt || after.dueAt.getTime() <= Date.now());
    if (after && live(after.status) && due && (capped || after.version !== this.x.version))
      handover.rerun = { execution: after, suffix: this.lease.slice(0, 8) };
    return handover;
  }

  private step(id: string | null): WorkflowStepRow | undefined {
    return id ? this.graph.steps.find((s) => s.id === id) : undefined;
  }

  private nextOf(stepId: string, branch: WorkflowBranch): WorkflowStepRow | undefined {
    return this.step(
      this.graph.transitions.find((t) => t.fromStepId === stepId && t.branch === branch)?.toStepId ?? null,
    );
  }

  /**
   * One move with its effects; a final move also announces `workflow.<status>`. Keeps the deliveries and the run
   * it began. @returns the moved row, or undefined when another mover won (callers then continue from
   * {@link ExecutionRun.lost}).
   */
  private async move(
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
  private async lost(): Promise<ExecutionRow | undefined> {
    const row = await leasedExecution(this.db, this.x.id, this.lease);
    if (!row || (row.status !== 'RUNNING' && row.status !== 'WAITING') || row.version === this.x.version)
      return undefined;
    return row;
  }

  /** The move that leaves `step` by `branch`: to the next step (its run begun), or COMPLETED when the branch leads nowhere. */
  private leave(
    step: WorkflowStepRow,
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
  private async done(
    run: StepRunRow,
    step: WorkflowStepRow,
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
  private async end(
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

  /** One move. @returns the execution to continue with, or undefined to stop. */
  private async advance(): Promise<ExecutionRow | undefined> {
    const x = this.x;
    if (x.status !== 'RUNNING' && x.status !== 'WAITING') return undefined;
    if (x.dueAt && x.dueAt.getTime() > Date.now()) {
      // Not due yet (a job that ran early, or a webhook retry's backoff): come back then.
      this.wake = { version: x.version, at: x.dueAt, suffix: `e${this.lease.slice(0, 8)}` };
      return undefined;
    }
    this.steps++;
    const step = this.step(x.currentStepId);
    if (x.status === 'WAITING') {
      let branch: WorkflowBranch = 'next';
      let context: Record<string, unknown> | undefined;
      if (step?.type === 'WAIT_FOR_EVENT') {
        // An event recorded in time but not yet seen by the inbox still wins over the timeout.
        const event = await eventForWait(this.db, x, x.dueAt ?? undefined);
        branch = event ? 'event' : 'timeout';
        if (event) context = { event: eventContext(event) };
      }
      return (await this.move(this.db, x, { status: 'RUNNING', resumeBranch: branch, context })) ?? this.lost();
    }
    if (!x.currentStepId) return (await this.move(this.db, x, { status: 'COMPLETED' })) ?? this.lost();
    if (!step) return this.end(undefined, 'EXITED', 'step removed');
    if (x.resumeBranch) {
      // A DELAY or WAIT_FOR_EVENT ended: close its run along the branch and go on.
      const branch = x.resumeBranch as WorkflowBranch;
      const { move, beginRun } = this.leave(step, branch);
      const output = branch === 'event' ? { event: x.context.event } : undefined;
      return (
        (await this.move(this.db, x, move, {
          endRun: { target: 'open', status: 'COMPLETED', branch, ...(output ? { output } : {}) },
          beginRun,
        })) ?? this.lost()
      );
    }
    const run =
      this.begun && this.begun.executionId === x.id && this.begun.version === x.version
        ? this.begun
        : await beginStepRun(this.db, x, step);
    switch (step.type) {
      case 'SEND_EMAIL':
        return this.sendEmail(run, step, step.config as StepConfig<'SEND_EMAIL'>);
      case 'DELAY':
        return this.wait(run, durationMs(step.config as StepConfig<'DELAY'>), null);
      case 'WAIT_FOR_EVENT': {
        const cfg = step.config as StepConfig<'WAIT_FOR_EVENT'>;
        return this.wait(run, durationMs(cfg.timeout), cfg.event);
      }
      case 'CONDITION': {
        const filter = parseSegmentFilter((step.config as StepConfig<'CONDITION'>).filter, 'filter', {
          allowContext: true,
        });
        const result = await conditionMatches(this.db, x, filter);
        return this.done(run, step, result ? 'yes' : 'no', { status: 'COMPLETED', output: { result } });
      }
      case 'UPDATE_CONTACT': {
        const cfg = step.config as StepConfig<'UPDATE_CONTACT'>;
        return this.done(
          run,
          step,
          'next',
          { status: 'COMPLETED', output: { ...cfg } },
          {
            effect: (tx) =>
              updateContact(
                tx,
                x.projectId,
                x.contactId,
                { data: cfg.data, subscribed: cfg.subscribed },
                { test: x.test },
              ),
          },
        );
      }
      case 'WEBHOOK':
        return this.webhook(run, step, step.config as StepConfig<'WEBHOOK'>);
      case 'EXIT':
        return this.end(run, 'EXITED', (step.config as StepConfig<'EXIT'>).reason ?? 'exit step');
    }
  }

  /** DELAY (`event` null) or WAIT_FOR_EVENT: WAITING until `ms` from now, the step run open until it ends. */
  private async wait(run: StepRunRow, ms: number, event: string | null): Promise<ExecutionRow | undefined> {
    const until = new Date(Date.now() + ms);
    const waiting = await this.move(
      this.db,
      this.x,
      { status: 'WAITING', dueAt: until, waitEvent: event, resumeBranch: null },
      {
        endRun: {
          target: { id: run.id },
          status: 'WAITING',
          output: { until: until.toISOString(), ...(event ? { event } : {}) },
        },
      },
    );
    if (!waiting) return this.lost();
    this.x = waiting;
    if (event) {
      // An event committed while the wait was committing reached no inbox: look for it now.
      const early = await eventForWait(this.db, waiting);
      if (early)
        return (
          (await this.move(this.db, waiting, {
            status: 'RUNNING',
            resumeBranch: 'event',
            context: { event: eventContext(early) },
          })) ?? this.lost()
        );
    }
    this.wake = { version: waiting.version, at: until };
    return undefined;
  }

  private async sendEmail(
    run: StepRunRow,
    step: WorkflowStepRow,
    cfg: StepConfig<'SEND_EMAIL'>,
  ): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const [live, contact] = await Promise.all([
      getTemplate(this.db, x.projectId, cfg.templateId),
      contactForSend(this.db, x, cfg.templateId, cfg.topicId),
    ]);
    if (!contact) return this.end(run, 'FAILED', 'the contact no longer exists');
    if (!live) return this.end(run, 'FAILED', `template ${cfg.templateId} no longer exists`);
    // A pinned step sends its version; otherwise the live (latest published) one, which the template row holds.
    const template =
      cfg.templateVersion === undefined ? live : await pinnedTemplate(this.db, live, cfg.templateVersion);
    if (!template)
      return this.end(run, 'FAILED', `template ${cfg.templateId} has no published version ${cfg.templateVersion}`);
    // The suppression rule (the list; a MARKETING template to a contact not subscribed, globally or to the step's
    // topic): the step is skipped.
    if (contact.suppression) {
      return this.done(run, step, 'next', {
        status: 'SKIPPED',
        output: { reason: SUPPRESSION_REASONS[contact.suppression], cause: contact.suppression },
      });
    }
    const from = cfg.from ?? template.from;
    if (!from) return this.end(run, 'FAILED', 'neither the step nor the template has a from address');
    // Derived from the step run: a second write of this step's email (a retried run) conflicts on the primary key.
    // Its time is when the run began (the run's id carries the execution's start), so the email sits in its month.
    const emailId = keyedIdAt(run.startedAt.getTime(), `workflow-email:${run.id}`);
    return this.done(
      run,
      step,
      'next',
      { status: 'COMPLETED', output: { emailId } },
      {
        effect: (tx) =>
          insertQueuedEmails(tx, [workflowEmailRow({ id: emailId, execution: x, run, template, contact, cfg, from })]),
        committed: () => {
          this.sends.push(emailId);
          this.sendFroms.push(from);
        },
      },
    );
  }

  private async webhook(
    run: StepRunRow,
    step: WorkflowStepRow,
    cfg: StepConfig<'WEBHOOK'>,
  ): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const { config } = this.deps;
    const timeoutMs = cfg.timeoutMs ?? 10_000;
    const retries = cfg.retries ?? 3;
    const attempt = run.attempts + 1;
    await extendLease(this.db, x.id, this.lease, timeoutMs + config.workflowLeaseMs);
    await finishStepRun(this.db, run.id, { status: 'RUNNING', attempts: attempt });
    const call = await callStepWebhook(this.db, config, { execution: x, run, step, cfg, attempt, timeoutMs });
    if (call.ok)
      return this.done(
        run,
        step,
        'next',
        { status: 'COMPLETED', output: call.output },
        { context: { webhook: call.webhook } },
      );
    const { error, refused, output } = call;
    if (attempt <= retries && !refused) {
      const at = new Date(Date.now() + config.workflowRetryBackoffMs * 2 ** (attempt - 1));
      await finishStepRun(this.db, run.id, { status: 'RUNNING', error, output });
      await deferExecution(this.db, x.id, this.lease, at);
      this.wake = { version: x.version, at, suffix: `a${attempt}` };
      this.log.warn({ attempt, error, retryAt: at.toISOString() }, 'workflow webhook failed; will retry');
      return undefined;
    }
    return this.end(run, 'FAILED', `webhook failed after ${attempt} attempt(s): ${error}`);
  }
}
