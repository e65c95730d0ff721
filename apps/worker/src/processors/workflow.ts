/**
 * The `workflow` job: run one execution as far as it can go now, step by step, exactly once per step.
 *
 * 1. Lease the execution (another job for it waits until the lease ends; a dead worker's lease expires after
 *    `WORKFLOW_LEASE_MS`).
 * 2. Loop: a WAITING execution that is due wakes (a DELAY ended; a WAIT_FOR_EVENT timed out, unless a matching
 *    event was recorded in time); a RUNNING one runs its current step. Each step ends with one compare-and-set
 *    move (`version`), and the step's effect commits in that move's transaction: the email row of SEND_EMAIL,
 *    the contact change of UPDATE_CONTACT. A retried job finds the version moved and repeats nothing; a cancel
 *    or a racing event makes the move fail and the effect roll back.
 *    An execution of a disabled project is CANCELLED instead (its mail would be cancelled too).
 * 3. Stop at a DELAY or WAIT_FOR_EVENT (a delayed job wakes it), a WEBHOOK retry (a delayed job retries it), or a
 *    final status; release the lease; then enqueue send jobs and webhook deliveries of what committed.
 *
 * WEBHOOK calls cannot be rolled back: they carry the step run's id as `Idempotency-Key` and `webhook-id`
 * (Standard Webhooks signature with the project's workflow secret), the same on every attempt, so a call
 * repeated after a crash between the answer and the move can be recognised by the receiver.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import {
  announceWebhookDeliveries,
  dataValidator,
  durationMs,
  enqueueExecutions,
  newId,
  newWebhookSecret,
  parseSegmentFilter,
  renderJsonTemplate,
  sendHttp,
  sendJobOptions,
  SendPriority,
  signWebhook,
  WorkflowJobPayload,
  type Config,
  type ExecutionStatus,
  type Logger,
  type SendJobPayload,
  type StepConfig,
  type WebhookDeliveryRef,
  type WebhookJobPayload,
  type WorkflowBranch,
} from '@mailroom/core';
import {
  beginStepRun,
  claimExecution,
  closeOpenRuns,
  conditionMatches,
  contactForSend,
  deferExecution,
  eventContext,
  eventForWait,
  extendLease,
  finishStepRun,
  finishWaitingRun,
  getContact,
  getTemplate,
  insertQueuedEmails,
  leasedExecution,
  loadWorkflowGraph,
  moveExecution,
  recordWebhookEvents,
  releaseExecution,
  updateContact,
  workflowWebhookSecret,
  type Database,
  type DbOrTx,
  type ExecutionMove,
  type ExecutionRow,
  type StepRunRow,
  type WorkflowGraph,
  type WorkflowStepRow,
} from '@mailroom/db';

const validatePayload = dataValidator(WorkflowJobPayload);

/** Steps one job runs at most before handing the execution to a fresh job (fairness between executions). */
const MAX_STEPS_PER_JOB = 50;

/** Dependencies of the processor. */
export interface WorkflowProcessorDeps {
  config: Config;
  database: Database;
  sendQueue: Queue<SendJobPayload>;
  webhookQueue: Queue<WebhookJobPayload>;
  workflowQueue: Queue<WorkflowJobPayload>;
  logger: Logger;
}

/** What a finished job reports (shown in the dashboard). */
export type WorkflowJobResult = { outcome: 'ran'; steps: number; status: ExecutionStatus } | { outcome: 'skipped'; reason: string };

class Rollback extends Error {}

/** One job's run of one leased execution. */
class ExecutionRun {
  private readonly db: Database['db'];
  private deliveries: WebhookDeliveryRef[] = [];
  private readonly sends: string[] = [];
  /** A delayed job to add when the run stops: version, due time, id suffix. */
  private wake: { version: number; at: Date; suffix?: string } | undefined;
  steps = 0;

  constructor(
    private readonly deps: WorkflowProcessorDeps,
    public x: ExecutionRow,
    private readonly graph: WorkflowGraph,
    private readonly lease: string,
    private readonly log: Logger,
  ) {
    this.db = deps.database.db;
  }

  /** Runs until the execution waits, ends, or the per-job step cap. @returns whether the cap stopped it. */
  async run(projectDisabled: boolean): Promise<boolean> {
    if (projectDisabled) {
      // As its queued mail is cancelled, a disabled project's executions are: nothing of theirs runs any more.
      await this.tx(async (tx, hooks) => {
        const moved = await this.move(tx, hooks, this.x, { status: 'CANCELLED', error: 'project disabled' });
        if (moved) await closeOpenRuns(tx, [moved.id], 'CANCELLED', 'project disabled');
        return moved;
      });
      return false;
    }
    for (let i = 0; i < MAX_STEPS_PER_JOB; i++) {
      const next = await this.advance();
      if (!next) return false;
      this.x = next;
    }
    return true;
  }

  /** Releases the lease, then hands over what committed: send jobs, webhook deliveries, the next job. */
  async finish(capped: boolean): Promise<void> {
    const after = await releaseExecution(this.db, this.x.id, this.lease);
    const { deps, log } = this;
    if (this.sends.length > 0) {
      try {
        await deps.sendQueue.addBulk(
          this.sends.map((emailId) => ({ name: 'send', data: { emailId, projectId: this.x.projectId }, opts: sendJobOptions(deps.config, emailId, SendPriority.workflow) })),
        );
      } catch (err) {
        log.warn({ err, emails: this.sends.length }, 'send enqueue failed; the reconciler will enqueue these emails');
      }
    }
    await announceWebhookDeliveries(deps.webhookQueue, deps.config, this.deliveries, log);
    if (this.wake) {
      await enqueueExecutions(deps.workflowQueue, [{ ...this.x, version: this.wake.version }], log, this.wake.at.getTime() - Date.now(), this.wake.suffix);
    }
    // Moved by someone else while leased (an event woke it), or stopped by the cap: run it again now.
    const live = after && (after.status === 'RUNNING' || after.status === 'WAITING');
    const due = after && (!after.dueAt || after.dueAt.getTime() <= Date.now());
    if (live && due && (capped || after.version !== this.x.version)) {
      await enqueueExecutions(deps.workflowQueue, [after], log, 0, this.lease.slice(0, 8));
    }
  }

  private step(id: string | null): WorkflowStepRow | undefined {
    return id ? this.graph.steps.find((s) => s.id === id) : undefined;
  }

  private nextOf(stepId: string, branch: WorkflowBranch): string | undefined {
    return this.graph.transitions.find((t) => t.fromStepId === stepId && t.branch === branch)?.toStepId;
  }

  /** Runs `fn` in a transaction that commits only when it returns a row; its webhook deliveries are kept then. */
  private async tx(fn: (tx: DbOrTx, hooks: WebhookDeliveryRef[]) => Promise<ExecutionRow | undefined>): Promise<ExecutionRow | undefined> {
    const hooks: WebhookDeliveryRef[] = [];
    try {
      const row = await this.db.transaction(async (tx) => {
        const r = await fn(tx, hooks);
        if (!r) throw new Rollback();
        return r;
      });
      this.deliveries.push(...hooks);
      return row;
    } catch (err) {
      if (err instanceof Rollback) return this.lost();
      throw err;
    }
  }

  /** A move lost its compare-and-set: continue with the row as it now is, if it is still ours and live. */
  private async lost(): Promise<ExecutionRow | undefined> {
    const row = await leasedExecution(this.db, this.x.id, this.lease);
    if (!row || (row.status !== 'RUNNING' && row.status !== 'WAITING') || row.version === this.x.version) return undefined;
    return row;
  }

  private hookData(x: ExecutionRow, extra: Record<string, unknown>) {
    return { workflowId: x.workflowId, executionId: x.id, contactId: x.contactId, ...extra };
  }

  /** The move into `status` with its webhook event, when final. */
  private async move(tx: DbOrTx, hooks: WebhookDeliveryRef[], x: ExecutionRow, move: ExecutionMove): Promise<ExecutionRow | undefined> {
    const moved = await moveExecution(tx, x, this.lease, move);
    if (moved && ['COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'].includes(move.status)) {
      const type = `workflow.${move.status.toLowerCase()}`;
      const extra = { status: move.status, ...(move.exitReason ? { reason: move.exitReason } : {}), ...(move.error ? { error: move.error } : {}) };
      hooks.push(...(await recordWebhookEvents(tx, x.projectId, [{ type, data: this.hookData(x, extra) }])));
    }
    return moved;
  }

  /** Leaves `step` by `branch`: to the next step, or COMPLETED when the branch leads nowhere. */
  private follow(tx: DbOrTx, hooks: WebhookDeliveryRef[], x: ExecutionRow, step: WorkflowStepRow, branch: WorkflowBranch, context?: Record<string, unknown>) {
    const to = this.nextOf(step.id, branch);
    return this.move(tx, hooks, x, to ? { status: 'RUNNING', currentStepId: to, resumeBranch: null, context } : { status: 'COMPLETED', resumeBranch: null, context });
  }

  /**
   * Ends a step run and moves on by `branch`, with `effect` committed in the same transaction after the move's
   * compare-and-set succeeded.
   */
  private done(
    run: StepRunRow,
    step: WorkflowStepRow,
    branch: WorkflowBranch,
    end: { status: 'COMPLETED' | 'SKIPPED'; output?: Record<string, unknown> },
    effect?: (tx: DbOrTx) => Promise<void>,
    context?: Record<string, unknown>,
  ) {
    const x = this.x;
    return this.tx(async (tx, hooks) => {
      const moved = await this.follow(tx, hooks, x, step, branch, context);
      if (!moved) return undefined;
      if (effect) await effect(tx);
      await finishStepRun(tx, run.id, { status: end.status, branch, output: end.output, error: null });
      return moved;
    });
  }

  /** Ends the execution EXITED or FAILED, closing the step run (a lost compare-and-set continues with the winner). */
  private end(run: StepRunRow | undefined, status: 'EXITED' | 'FAILED', reason: string): Promise<ExecutionRow | undefined> {
    const x = this.x;
    return this.tx(async (tx, hooks) => {
      const moved = await this.move(tx, hooks, x, status === 'EXITED' ? { status, exitReason: reason } : { status, error: reason });
      if (!moved) return undefined;
      if (run) await finishStepRun(tx, run.id, status === 'FAILED' ? { status: 'FAILED', error: reason } : { status: 'COMPLETED', output: { reason } });
      this.log.info({ status, reason }, 'workflow execution ended');
      return moved;
    });
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
      return (await moveExecution(this.db, x, this.lease, { status: 'RUNNING', resumeBranch: branch, context })) ?? this.lost();
    }
    if (!x.currentStepId) return this.tx((tx, hooks) => this.move(tx, hooks, x, { status: 'COMPLETED' }));
    if (!step) return this.end(undefined, 'EXITED', 'step removed');
    if (x.resumeBranch) {
      const branch = x.resumeBranch as WorkflowBranch;
      return this.tx(async (tx, hooks) => {
        const moved = await this.follow(tx, hooks, x, step, branch);
        if (moved) await finishWaitingRun(tx, x.id, branch, branch === 'event' ? { event: x.context.event } : undefined);
        return moved;
      });
    }
    const run = await beginStepRun(this.db, x, step);
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
        const filter = parseSegmentFilter((step.config as StepConfig<'CONDITION'>).filter, 'filter', { allowContext: true });
        const result = await conditionMatches(this.db, x, filter);
        return this.done(run, step, result ? 'yes' : 'no', { status: 'COMPLETED', output: { result } });
      }
      case 'UPDATE_CONTACT': {
        const cfg = step.config as StepConfig<'UPDATE_CONTACT'>;
        return this.done(run, step, 'next', { status: 'COMPLETED', output: { ...cfg } }, async (tx) => {
          await updateContact(tx, x.projectId, x.contactId, { data: cfg.data, subscribed: cfg.subscribed });
        });
      }
      case 'WEBHOOK':
        return this.webhook(run, step, step.config as StepConfig<'WEBHOOK'>);
      case 'EXIT':
        return this.end(run, 'EXITED', (step.config as StepConfig<'EXIT'>).reason ?? 'exit step');
    }
  }

  /** DELAY (`event` null) or WAIT_FOR_EVENT: WAITING until `ms` from now, the step run open until it ends. */
  private async wait(run: StepRunRow, ms: number, event: string | null): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const until = new Date(Date.now() + ms);
    const waiting = await this.tx(async (tx) => {
      const moved = await moveExecution(tx, x, this.lease, { status: 'WAITING', dueAt: until, waitEvent: event, resumeBranch: null });
      if (moved) await finishStepRun(tx, run.id, { status: 'WAITING', output: { until: until.toISOString(), ...(event ? { event } : {}) } });
      return moved;
    });
    if (!waiting || waiting.status !== 'WAITING') return waiting;
    if (event) {
      // An event committed while the wait was committing reached no inbox: look for it now.
      const early = await eventForWait(this.db, waiting);
      if (early) {
        this.x = waiting;
        return (await moveExecution(this.db, waiting, this.lease, { status: 'RUNNING', resumeBranch: 'event', context: { event: eventContext(early) } })) ?? this.lost();
      }
    }
    this.x = waiting;
    this.wake = { version: waiting.version, at: until };
    return undefined;
  }

  private async sendEmail(run: StepRunRow, step: WorkflowStepRow, cfg: StepConfig<'SEND_EMAIL'>): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const [template, contact] = await Promise.all([getTemplate(this.db, x.projectId, cfg.templateId), contactForSend(this.db, x)]);
    if (!contact) return this.end(run, 'FAILED', 'the contact no longer exists');
    if (!template) return this.end(run, 'FAILED', `template ${cfg.templateId} no longer exists`);
    const marketing = template.type === 'MARKETING';
    if (marketing && !contact.subscribed) return this.done(run, step, 'next', { status: 'SKIPPED', output: { reason: 'contact is unsubscribed (marketing template)' } });
    if (contact.suppressed) return this.done(run, step, 'next', { status: 'SKIPPED', output: { reason: 'address is on the suppression list' } });
    const from = cfg.from ?? template.from;
    if (!from) return this.end(run, 'FAILED', 'neither the step nor the template has a from address');
    const emailId = newId();
    const variables = { ...(cfg.data ?? {}), trigger: (x.context.trigger as { data?: unknown } | undefined)?.data ?? {}, event: (x.context.event as { data?: unknown } | undefined)?.data ?? {} };
    const moved = await this.done(run, step, 'next', { status: 'COMPLETED', output: { emailId } }, (tx) =>
      insertQueuedEmails(tx, [
        {
          id: emailId,
          projectId: x.projectId,
          contactId: x.contactId,
          templateId: template.id,
          workflowExecutionId: x.id,
          workflowStepRunId: run.id,
          marketing,
          source: 'workflow',
          toEmail: contact.email,
          fromEmail: from,
          fromName: cfg.fromName ?? template.fromName,
          replyTo: cfg.replyTo ?? template.replyTo,
          subject: template.subject,
          body: template.body,
          bodyFormat: 'html',
          variables,
        },
      ]),
    );
    if (moved) this.sends.push(emailId);
    return moved;
  }

  private async webhook(run: StepRunRow, step: WorkflowStepRow, cfg: StepConfig<'WEBHOOK'>): Promise<ExecutionRow | undefined> {
    const x = this.x;
    const { config } = this.deps;
    const timeoutMs = cfg.timeoutMs ?? 10_000;
    const retries = cfg.retries ?? 3;
    const attempt = run.attempts + 1;
    await extendLease(this.db, x.id, this.lease, timeoutMs + config.workflowLeaseMs);
    await finishStepRun(this.db, run.id, { status: 'RUNNING', attempts: attempt });
    const [secret, contact] = await Promise.all([workflowWebhookSecret(this.db, x.projectId, newWebhookSecret), getContact(this.db, x.projectId, x.contactId)]);
    const contactView = contact ? { id: contact.id, email: contact.email, subscribed: contact.subscribed, data: contact.data } : { id: x.contactId };
    const method = cfg.method ?? 'POST';
    const withBody = method !== 'GET' && method !== 'DELETE';
    const ids = { workflowId: x.workflowId, executionId: x.id, stepId: step.id, stepRunId: run.id };
    const body = !withBody
      ? ''
      : cfg.body !== undefined
        ? renderJsonTemplate(cfg.body, { ...ids, contact: contactView, trigger: (x.context.trigger as { data?: unknown })?.data ?? {}, event: (x.context.event as { data?: unknown })?.data ?? {}, context: x.context })
        : JSON.stringify({ type: 'workflow.webhook', ...ids, contact: contactView, context: x.context });
    const headers = { ...(cfg.headers ?? {}), 'idempotency-key': run.id, ...signWebhook(secret, run.id, new Date(), body) };
    const res = await sendHttp(cfg.url, { method, headers, body, timeoutMs, allowPrivate: config.webhookAllowPrivateTargets });
    const output = { statusCode: res.statusCode ?? null, response: res.body ?? null, durationMs: res.durationMs, attempts: attempt };
    if (res.statusCode !== undefined && res.statusCode >= 200 && res.statusCode < 300) {
      let parsed: unknown = res.body ?? null;
      try {
        parsed = JSON.parse(res.body ?? '');
      } catch {
        // Not JSON: kept as text.
      }
      return this.done(run, step, 'next', { status: 'COMPLETED', output }, undefined, { webhook: { statusCode: res.statusCode, body: parsed } });
    }
    const error = res.error ?? `HTTP ${res.statusCode}`;
    const refused = res.error?.startsWith('refused') ?? false;
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

/** Creates the BullMQ processor function of the `workflow` queue. */
export function createWorkflowProcessor(deps: WorkflowProcessorDeps) {
  const { config } = deps;
  const { db } = deps.database;
  return async (job: Job, token?: string): Promise<WorkflowJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid workflow payload: ${JSON.stringify(checked.errors)}`);
    const { executionId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, executionId, projectId });
    const lease = randomUUID();
    const claim = await claimExecution(db, executionId, lease, config.workflowLeaseMs);
    if (claim.kind === 'held') {
      // Another job runs it now (or its worker died): look again soon, at the latest when the lease ends.
      await job.moveToDelayed(Math.min(claim.until.getTime(), Date.now() + 1_000) + 20, token);
      throw new DelayedError();
    }
    if (claim.kind !== 'claimed') return { outcome: 'skipped', reason: claim.kind === 'final' ? `execution already ${claim.status}` : 'execution no longer exists' };
    const graph = await loadWorkflowGraph(db, projectId, claim.execution.workflowId);
    if (!graph) {
      await releaseExecution(db, executionId, lease);
      return { outcome: 'skipped', reason: 'workflow no longer exists' };
    }
    const run = new ExecutionRun(deps, claim.execution, graph, lease, log);
    let capped = false;
    try {
      capped = await run.run(claim.projectDisabled);
    } finally {
      await run.finish(capped);
    }
    return { outcome: 'ran', steps: run.steps, status: run.x.status };
  };
}
