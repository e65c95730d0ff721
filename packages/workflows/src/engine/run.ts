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
 * Steps come typed from the graph's load (`./steps`); the moves and their effects are `./moves`'s.
 *
 * Test mode: a test execution (`test`, from a test event or a test key's manual start) writes test emails (the
 * sink, never SES) and test events (UPDATE_CONTACT); its WEBHOOK calls still go out, with `test: true`.
 *
 * @module
 */
import { durationMs } from '../workflows';
import { keyedIdAt } from '@mailroom/platform/ids';
import { type WorkflowBranch } from '@mailroom/db/schema/workflow-states';
import {
  beginStepRun,
  deferExecution,
  extendLease,
  finishStepRun,
  releaseExecution,
  type ExecutionRef,
} from '../queries/workflow-engine';
import { conditionMatches, contactForSend, eventContext, eventForWait } from '../queries/step-reads';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { pinnedTemplate } from '@mailroom/mail/queries/template-versions';
import { SUPPRESSION_REASONS } from '@mailroom/db/queries/suppression-rule';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { type ExecutionRow, type StepRunRow } from '../queries/workflows';
import { updateContact } from '@mailroom/contacts/queries/contacts';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { callStepWebhook, workflowEmailRow } from './effects';
import { ExecutionMoves, type EngineDeps } from './moves';
import { conditionFilter, type StepOf } from './steps';

export type { EngineDeps };

/** Steps one run takes at most before handing the execution to a fresh job (fairness between executions). */
export const MAX_STEPS_PER_JOB = 50;

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

/** One job's run of one leased execution: the steps' semantics, over the moves of {@link ExecutionMoves}. */
export class ExecutionRun extends ExecutionMoves {
  private readonly sends: string[] = [];
  private readonly sendFroms: string[] = [];
  /** A delayed job to add when the run stops: version, due time, id suffix. */
  private wake: { version: number; at: Date; suffix?: string } | undefined;
  steps = 0;

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
        return this.sendEmail(run, step);
      case 'DELAY':
        return this.wait(run, durationMs(step.config), null);
      case 'WAIT_FOR_EVENT':
        return this.wait(run, durationMs(step.config.timeout), step.config.event);
      case 'CONDITION': {
        const result = await conditionMatches(this.db, x, conditionFilter(step));
        return this.done(run, step, result ? 'yes' : 'no', { status: 'COMPLETED', output: { result } });
      }
      case 'UPDATE_CONTACT': {
        const cfg = step.config;
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
        return this.webhook(run, step);
      case 'EXIT':
        return this.end(run, 'EXITED', step.config.reason ?? 'exit step');
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

  private async sendEmail(run: StepRunRow, step: StepOf<'SEND_EMAIL'>): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const cfg = step.config;
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

  private async webhook(run: StepRunRow, step: StepOf<'WEBHOOK'>): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const cfg = step.config;
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
