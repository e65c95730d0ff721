/**
 * The workflow engine's state moves, run by the worker.
 *
 * - A job leases an execution ({@link claimExecution}: a token and a deadline) before running it; another job for
 *   the same execution waits for the lease to end, so two workers never run one execution's step at once.
 * - Every move is a compare-and-set on `version` ({@link moveExecution}), also required by the event path
 *   ({@link drainWorkflowInbox}) and by cancel: of two movers racing from one state, exactly one wins.
 * - A step's effect commits in the transaction of the move that leaves the step (the email row, the contact
 *   update), so a retried job cannot repeat it; a WEBHOOK call, which cannot be rolled back, carries the step
 *   run's id as its idempotency key.
 *
 * @module
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import { newId, type ExecutionStatus, type SegmentFilter, type StepRunStatus, type WebhookDeliveryRef } from '@mailroom/core';
import type { DbOrTx } from '../client';
import { compileFilter } from './segment-filter';
import { recordWebhookEvents } from './webhooks';
import { entryStepSql, type ExecutionRow, type StepRunRow, type WorkflowStepRow } from './workflows';
import { projects, workflowExecutions, workflowStepRuns } from '../schema';

/** Why {@link claimExecution} did not lease. */
export type ClaimOutcome =
  | { kind: 'claimed'; execution: ExecutionRow; projectDisabled: boolean }
  | { kind: 'held'; until: Date }
  | { kind: 'final'; status: ExecutionStatus }
  | { kind: 'missing' };

/**
 * Leases a live (RUNNING or WAITING) execution for `leaseMs` unless another worker holds an unexpired lease.
 */
export async function claimExecution(db: DbOrTx, id: string, token: string, leaseMs: number): Promise<ClaimOutcome> {
  const [row] = await db
    .update(workflowExecutions)
    .set({ leaseToken: token, leaseUntil: sql`now() + make_interval(secs => ${leaseMs / 1000})` })
    .where(
      and(
        eq(workflowExecutions.id, id),
        inArray(workflowExecutions.status, ['RUNNING', 'WAITING']),
        sql`(${workflowExecutions.leaseUntil} is null or ${workflowExecutions.leaseUntil} < now())`,
      ),
    )
    .returning();
  if (row) {
    const [project] = await db.select({ disabled: projects.disabled }).from(projects).where(eq(projects.id, row.projectId));
    return { kind: 'claimed', execution: row, projectDisabled: project?.disabled ?? true };
  }
  const [seen] = await db
    .select({ status: workflowExecutions.status, leaseUntil: workflowExecutions.leaseUntil })
    .from(workflowExecutions)
    .where(eq(workflowExecutions.id, id));
  if (!seen) return { kind: 'missing' };
  if (seen.status === 'RUNNING' || seen.status === 'WAITING') return { kind: 'held', until: seen.leaseUntil ?? new Date() };
  return { kind: 'final', status: seen.status };
}

/** Pushes the lease deadline to `ms` from now (before a step that may take long: a WEBHOOK call). */
export async function extendLease(db: DbOrTx, id: string, token: string, ms: number): Promise<void> {
  await db
    .update(workflowExecutions)
    .set({ leaseUntil: sql`now() + make_interval(secs => ${ms / 1000})` })
    .where(and(eq(workflowExecutions.id, id), eq(workflowExecutions.leaseToken, token)));
}

/** Ends the lease. @returns the row as it now is (another mover may have changed it meanwhile). */
export async function releaseExecution(db: DbOrTx, id: string, token: string): Promise<ExecutionRow | undefined> {
  const [row] = await db
    .update(workflowExecutions)
    .set({ leaseToken: null, leaseUntil: null })
    .where(and(eq(workflowExecutions.id, id), eq(workflowExecutions.leaseToken, token)))
    .returning();
  return row;
}

/** The execution, if this lease still holds it. */
export async function leasedExecution(db: DbOrTx, id: string, token: string): Promise<ExecutionRow | undefined> {
  const [row] = await db
    .select()
    .from(workflowExecutions)
    .where(and(eq(workflowExecutions.id, id), eq(workflowExecutions.leaseToken, token)));
  return row;
}

/** A move of an execution's state. Fields left out keep their value; `context` is merged in. */
export interface ExecutionMove {
  status: ExecutionStatus;
  currentStepId?: string | null;
  /** When the next job should run it; default now. */
  dueAt?: Date;
  /** WAIT_FOR_EVENT: the event name; its `waitSince` is the database's clock at the move. */
  waitEvent?: string | null;
  resumeBranch?: string | null;
  context?: Record<string, unknown>;
  exitReason?: string;
  error?: string;
}

const FINAL: readonly ExecutionStatus[] = ['COMPLETED', 'EXITED', 'FAILED', 'CANCELLED'];

/**
 * Compare-and-set: moves the execution from `from.version` (which it must still have, live, under this lease)
 * and bumps the version. @returns the moved row, or `undefined` when another mover won.
 */
export async function moveExecution(tx: DbOrTx, from: { id: string; version: number }, token: string, move: ExecutionMove): Promise<ExecutionRow | undefined> {
  const final = FINAL.includes(move.status);
  const [row] = await tx
    .update(workflowExecutions)
    .set({
      status: move.status,
      version: sql`${workflowExecutions.version} + 1`,
      ...(move.currentStepId !== undefined ? { currentStepId: move.currentStepId } : {}),
      dueAt: final ? null : (move.dueAt ?? sql`now()`),
      ...(move.waitEvent !== undefined ? { waitEvent: move.waitEvent, waitSince: move.waitEvent ? sql`clock_timestamp()` : null } : {}),
      ...(move.resumeBranch !== undefined ? { resumeBranch: move.resumeBranch } : {}),
      ...(move.context ? { context: sql`${workflowExecutions.context} || ${JSON.stringify(move.context)}::jsonb` } : {}),
      ...(move.exitReason !== undefined ? { exitReason: move.exitReason } : {}),
      ...(move.error !== undefined ? { error: move.error } : {}),
      ...(final ? { finishedAt: new Date(), waitEvent: null } : {}),
      updatedAt: new Date(),
    })
    .where(
      and(
        eq(workflowExecutions.id, from.id),
        eq(workflowExecutions.version, from.version),
        eq(workflowExecutions.leaseToken, token),
        inArray(workflowExecutions.status, ['RUNNING', 'WAITING']),
      ),
    )
    .returning();
  return row;
}

/** Sets when a RUNNING execution's step is retried (WEBHOOK backoff), without a move. */
export async function deferExecution(db: DbOrTx, id: string, token: string, dueAt: Date): Promise<void> {
  await db
    .update(workflowExecutions)
    .set({ dueAt, updatedAt: new Date() })
    .where(and(eq(workflowExecutions.id, id), eq(workflowExecutions.leaseToken, token)));
}

/**
 * The step run of the execution's current version: created on first call, found again by a retried job (its id
 * is the idempotency key of the step's effect).
 */
export async function beginStepRun(db: DbOrTx, x: ExecutionRow, step: WorkflowStepRow): Promise<StepRunRow> {
  await db
    .insert(workflowStepRuns)
    .values({ id: newId(), executionId: x.id, projectId: x.projectId, stepId: step.id, stepType: step.type, version: x.version, status: 'RUNNING' })
    .onConflictDoNothing();
  const [run] = await db
    .select()
    .from(workflowStepRuns)
    .where(and(eq(workflowStepRuns.executionId, x.id), eq(workflowStepRuns.version, x.version)));
  return run!;
}

/** Records the end (or the wait) of a step run. */
export async function finishStepRun(
  tx: DbOrTx,
  runId: string,
  end: { status: StepRunStatus; branch?: string | null; output?: Record<string, unknown>; error?: string | null; attempts?: number },
): Promise<void> {
  const waiting = end.status === 'WAITING' || end.status === 'RUNNING';
  await tx
    .update(workflowStepRuns)
    .set({
      status: end.status,
      ...(end.branch !== undefined ? { branch: end.branch } : {}),
      ...(end.output !== undefined ? { output: end.output } : {}),
      ...(end.error !== undefined ? { error: end.error } : {}),
      ...(end.attempts !== undefined ? { attempts: end.attempts } : {}),
      ...(waiting ? {} : { finishedAt: new Date() }),
    })
    .where(eq(workflowStepRuns.id, runId));
}

/** Completes the WAITING run of an execution (a delay or wait that ended) along `branch`. */
export async function finishWaitingRun(tx: DbOrTx, executionId: string, branch: string, output?: Record<string, unknown>): Promise<void> {
  await tx
    .update(workflowStepRuns)
    .set({ status: 'COMPLETED', branch, finishedAt: new Date(), ...(output ? { output } : {}) })
    .where(and(eq(workflowStepRuns.executionId, executionId), eq(workflowStepRuns.status, 'WAITING')));
}

/** A recorded event, as the engine hands it to an execution's context. */
export interface WaitedEvent {
  id: string;
  name: string;
  data: Record<string, unknown>;
  createdAt: Date;
}

/**
 * The first event the WAITING execution waits for that was recorded at or after its wait began (and, with
 * `until`, no later than that). Closes the race of an event committed while the wait itself was committing.
 */
export async function eventForWait(db: DbOrTx, x: ExecutionRow, until?: Date): Promise<WaitedEvent | undefined> {
  if (!x.waitEvent || !x.waitSince) return undefined;
  const rows = await db.execute<{ id: string; name: string; data: Record<string, unknown>; created_at: string | Date }>(sql`
    select id, name, data, created_at from events
    where project_id = ${x.projectId}::uuid and contact_id = ${x.contactId}::uuid and name = ${x.waitEvent}
      and created_at >= ${x.waitSince.toISOString()}::timestamptz
      ${until ? sql`and created_at <= ${until.toISOString()}::timestamptz` : sql``}
    order by created_at, id limit 1
  `);
  const r = rows.rows[0];
  return r && { id: r.id, name: r.name, data: r.data, createdAt: new Date(r.created_at) };
}

/** The context entry of a received event. */
export function eventContext(e: WaitedEvent): Record<string, unknown> {
  return { name: e.name, eventId: e.id, data: e.data, at: e.createdAt.toISOString() };
}

/**
 * Evaluates a CONDITION: does the contact match `filter` now, with `context.<path>` read from the execution's
 * context? Same compiler, hence same semantics, as segments.
 */
export async function conditionMatches(db: DbOrTx, x: ExecutionRow, filter: SegmentFilter): Promise<boolean> {
  const predicate = compileFilter(filter, { projectId: x.projectId, now: Date.now(), alias: 'c', context: x.context });
  const rows = await db.execute<{ ok: boolean }>(sql`
    select exists (select 1 from contacts c where c.project_id = ${x.projectId}::uuid and c.id = ${x.contactId}::uuid and ${predicate}) as ok
  `);
  return rows.rows[0]!.ok;
}

/** What SEND_EMAIL needs of the contact now. */
export type ContactForSend = {
  email: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  suppressed: boolean;
};

/** The execution's contact with its suppression state, or `undefined` when it was deleted. */
export async function contactForSend(db: DbOrTx, x: ExecutionRow): Promise<ContactForSend | undefined> {
  const rows = await db.execute<ContactForSend>(sql`
    select c.email, c.subscribed, c.data,
      exists (select 1 from suppressions s where s.project_id = c.project_id and s.email_key = c.email_key) as suppressed
    from contacts c where c.project_id = ${x.projectId}::uuid and c.id = ${x.contactId}::uuid
  `);
  return rows.rows[0];
}

/** An execution a job should run. */
export interface ExecutionRef {
  id: string;
  projectId: string;
  version: number;
}

/**
 * Takes up to `limit` inbox rows (SKIP LOCKED: drainers in several workers share the inbox) and, in the caller's
 * transaction:
 * - starts an execution of every enabled workflow triggered by each event (`ON CONFLICT (workflow_id, entry_key)
 *   DO NOTHING`: without re-entry a contact enters once, however many identical events arrive at once; with
 *   re-entry once per event), with `workflow.started`;
 * - wakes every execution WAITING for the event since before it was recorded, and whose timeout had not passed
 *   when it was (compare-and-set: `WAITING` and the version move together, so a timeout job running at the same
 *   moment loses; an event recorded after the timeout leaves it to the timeout job).
 *
 * @returns the executions to run, and the webhook deliveries to enqueue once committed.
 */
export async function drainWorkflowInbox(
  tx: DbOrTx,
  limit: number,
): Promise<{ taken: number; started: ExecutionRef[]; woken: ExecutionRef[]; deliveries: WebhookDeliveryRef[] }> {
  const taken = await tx.execute<{ event_id: string }>(sql`
    delete from workflow_inbox where id in (select id from workflow_inbox order by id limit ${limit} for update skip locked)
    returning event_id
  `);
  if (taken.rows.length === 0) return { taken: 0, started: [], woken: [], deliveries: [] };
  const ids = sql`${sql.param(taken.rows.map((r) => r.event_id))}::uuid[]`;
  const started = await tx.execute<{ id: string; project_id: string; workflow_id: string; contact_id: string; trigger: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, current_step_id, due_at, entry_key, trigger_event_id, context)
    select mailroom_uuid_v7(clock_timestamp()), e.project_id, w.id, e.contact_id, 'RUNNING', ${entryStepSql(sql`w.id`)}, now(),
      case when w.allow_reentry then 'event:' || e.id::text else 'contact:' || e.contact_id::text end, e.id,
      jsonb_build_object('trigger', jsonb_build_object('name', e.name, 'eventId', e.id, 'data', e.data, 'at', e.created_at))
    from events e
    join workflows w on w.project_id = e.project_id and w.enabled and w.trigger_type = 'EVENT' and w.trigger_event = e.name
    join projects p on p.id = e.project_id and not p.disabled
    where e.id = any(${ids})
    order by e.id
    on conflict (workflow_id, entry_key) do nothing
    returning id, project_id, workflow_id, contact_id, context #>> '{trigger,name}' as trigger
  `);
  const woken = await tx.execute<{ id: string; project_id: string; version: number }>(sql`
    update workflow_executions x set status = 'RUNNING', resume_branch = 'event', version = x.version + 1, due_at = now(),
      updated_at = now(), wait_event = null,
      context = x.context || jsonb_build_object('event', jsonb_build_object('name', e.name, 'eventId', e.id, 'data', e.data, 'at', e.created_at))
    from events e
    where e.id = any(${ids}) and x.status = 'WAITING' and x.project_id = e.project_id and x.contact_id = e.contact_id
      and x.wait_event = e.name and x.wait_since <= e.created_at and e.created_at <= x.due_at
    returning x.id, x.project_id, x.version
  `);
  const byProject = new Map<string, { type: string; data: Record<string, unknown> }[]>();
  for (const r of started.rows) {
    const list = byProject.get(r.project_id) ?? [];
    list.push({ type: 'workflow.started', data: { workflowId: r.workflow_id, executionId: r.id, contactId: r.contact_id, status: 'RUNNING', trigger: r.trigger } });
    byProject.set(r.project_id, list);
  }
  const deliveries: WebhookDeliveryRef[] = [];
  for (const [projectId, events] of byProject) deliveries.push(...(await recordWebhookEvents(tx, projectId, events)));
  return {
    taken: taken.rows.length,
    started: started.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: 0 })),
    woken: woken.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: r.version })),
    deliveries,
  };
}

/**
 * Live executions due more than `olderThanMs` ago and not leased (their job was lost, or never added), oldest due
 * first, for the reconciler.
 */
export async function overdueExecutions(db: DbOrTx, olderThanMs: number, limit: number): Promise<(ExecutionRef & { dueAt: Date })[]> {
  const rows = await db.execute<{ id: string; project_id: string; version: number; due_at: string | Date }>(sql`
    select id, project_id, version, due_at from workflow_executions
    where status in ('RUNNING', 'WAITING') and due_at < now() - make_interval(secs => ${olderThanMs / 1000})
      and (lease_until is null or lease_until < now())
    order by due_at limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: r.version, dueAt: new Date(r.due_at) }));
}
