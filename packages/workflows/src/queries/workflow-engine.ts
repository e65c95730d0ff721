/**
 * The workflow engine's state moves, made by the engine (../engine/run.ts); what its steps read of the contact and
 * its events is `./step-reads`.
 *
 * - A job leases an execution ({@link claimExecution}: a token and a deadline) before running it; another job for
 *   the same execution waits for the lease to end, so two workers never run one execution's step at once.
 * - Every move is a compare-and-set on `version` ({@link moveExecution}), also required by the event path
 *   (`drainWorkflowInbox`, workflow-inbox.ts) and by cancel: of two movers racing from one state, exactly one wins.
 * - A step's effect commits in the transaction of the move that leaves the step (the email row, the contact
 *   update), so a retried job cannot repeat it; a WEBHOOK call, which cannot be rolled back, carries the step
 *   run's id as its idempotency key.
 *
 * @module
 */
import { and, eq, getTableColumns, inArray, sql } from 'drizzle-orm';
import { idTimestampMs, keyedIdAt } from '@mailroom/platform/ids';
import { type ExecutionStatus, type StepRunStatus } from '@mailroom/db/schema/workflow-states';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { endpointWants } from '@mailroom/db/queries/webhooks';
import { executeNamed } from '@mailroom/db/queries/named';
import type { ExecutionRow, StepRunRow, WorkflowStepRow } from './workflows';
import { workflowExecutions, workflowStepRuns } from '@mailroom/db/schema';

/**
 * The id of the step run an execution begins at `version`: a UUIDv7 with the execution id's millisecond and the
 * other 74 bits from SHA-256 of `step-run:<execution>:<version>` (`keyedIdAt`). Every run of an execution thus sits
 * in the month partition the execution started in (migration 0020), and a retried job's insert of the same run
 * conflicts on the primary key and finds the run it began. Same as {@link STEP_RUN_ID_SQL}.
 */
export function stepRunId(executionId: string, version: number): string {
  return keyedIdAt(idTimestampMs(executionId), `step-run:${executionId}:${version}`);
}

/** {@link stepRunId} in SQL, of the row `m` (the moved execution: `m.id`, `m.version`). */
const STEP_RUN_ID_SQL = sql`mailroom_uuid_v7_keyed(mailroom_uuid_v7_time(m.id), 'step-run:' || m.id::text || ':' || m.version::text)`;

/** Why {@link claimExecution} did not lease. */
export type ClaimOutcome =
  | { kind: 'claimed'; execution: ExecutionRow; projectDisabled: boolean; workflowVersion: string }
  | { kind: 'held'; until: Date }
  | { kind: 'final'; status: ExecutionStatus }
  | { kind: 'missing' };

/**
 * Leases a live (RUNNING or WAITING) execution for `leaseMs` unless another worker holds an unexpired lease, in
 * one statement that also reads whether its project is disabled and its workflow's `updated_at` in µs (which every
 * graph edit moves: the engine caches graphs by it).
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
    .returning({
      ...getTableColumns(workflowExecutions),
      projectDisabled: sql<boolean>`(select p.disabled from projects p where p.id = ${workflowExecutions.projectId})`,
      workflowVersion: sql<string>`(select (extract(epoch from w.updated_at) * 1000000)::bigint::text from workflows w where w.id = ${workflowExecutions.workflowId})`,
    });
  if (row) {
    const { projectDisabled, workflowVersion, ...execution } = row;
    return { kind: 'claimed', execution, projectDisabled: projectDisabled !== false, workflowVersion };
  }
  const [seen] = await db
    .select({ status: workflowExecutions.status, leaseUntil: workflowExecutions.leaseUntil })
    .from(workflowExecutions)
    .where(eq(workflowExecutions.id, id));
  if (!seen) return { kind: 'missing' };
  if (seen.status === 'RUNNING' || seen.status === 'WAITING')
    return { kind: 'held', until: seen.leaseUntil ?? new Date() };
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

/** What commits with a move, in the move's statement (only if the compare-and-set succeeds). */
export interface MoveEffects {
  /** Ends a step run: the run `id`, or `open` (the execution's RUNNING or WAITING run). */
  endRun?: {
    target: { id: string } | 'open';
    status: StepRunStatus;
    branch?: string | null;
    output?: Record<string, unknown>;
    error?: string | null;
  };
  /** Begins the run of the step the move leads to, at the new version (returned as `run`). */
  beginRun?: { stepId: string; stepType: string };
  /** A webhook event, written to the outbox for the project's subscribed endpoints. */
  hook?: { type: string; data: Record<string, unknown> };
}

/** Result of {@link moveExecution}. */
export interface MoveResult {
  /** The moved row; undefined when another mover won (nothing was written). */
  execution: ExecutionRow | undefined;
  /** The run begun by `beginRun`. */
  run?: StepRunRow;
  deliveries: WebhookDeliveryRef[];
}

const EXECUTION_DATES = new Set([
  'dueAt',
  'waitSince',
  'leaseUntil',
  'createdAt',
  'updatedAt',
  'finishedAt',
  'startedAt',
]);

/** A row read as JSON (`to_jsonb`): camelCase keys, timestamps as Dates. */
function rowFromJson<T>(j: Record<string, unknown>): T {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(j)) {
    const key = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    out[key] = EXECUTION_DATES.has(key) && typeof v === 'string' ? new Date(v) : v;
  }
  return out as T;
}

/**
 * Compare-and-set: moves the execution from `from.version` (which it must still have, live, under this lease),
 * bumps the version, and commits `effects` in the same statement (one round trip, atomic without a
 * transaction). A final move also ends the lease.
 *
 * @returns the moved row (undefined when another mover won), the begun run, the webhook deliveries to enqueue.
 */
export async function moveExecution(
  db: DbOrTx,
  from: { id: string; version: number },
  token: string,
  move: ExecutionMove,
  effects: MoveEffects = {},
): Promise<MoveResult> {
  const final = FINAL.includes(move.status);
  const setStep = move.currentStepId !== undefined;
  const setWait = move.waitEvent !== undefined;
  const setResume = move.resumeBranch !== undefined;
  const end = effects.endRun;
  const endById = end && end.target !== 'open' ? end.target.id : null;
  const hookType = effects.hook?.type ?? null;
  // A named statement, parsed once per connection. Planning it, across its CTEs and the partitions of
  // workflow_step_runs and webhook_deliveries, took 0.4–0.5 ms against 0.15–0.2 ms to execute. Postgres keeps one
  // generic plan for it after five calls with a few months of partitions, but re-plans it at every call once there
  // are a year's (docs/decisions/0016-named-statements.md). Two texts, by how the run to end is found: by id, a
  // generic plan still reads one partition (pruned by the parameter when it starts); the open run is looked up by
  // execution in each.
  const rows = await executeNamed<{
    execution: Record<string, unknown> | null;
    run: Record<string, unknown> | null;
    deliveries: WebhookDeliveryRef[];
  }>(
    db,
    sql`
    with moved as (
      update workflow_executions x set
        status = ${move.status},
        version = x.version + 1,
        current_step_id = case when ${setStep}::boolean then ${move.currentStepId ?? null}::uuid else x.current_step_id end,
        due_at = case when ${final}::boolean then null else coalesce(${move.dueAt?.toISOString() ?? null}::timestamptz, now()) end,
        wait_event = case when ${final}::boolean then null when ${setWait}::boolean then ${move.waitEvent ?? null}::text else x.wait_event end,
        wait_since = case when ${setWait}::boolean then (case when ${move.waitEvent ?? null}::text is null then null else clock_timestamp() end) else x.wait_since end,
        resume_branch = case when ${setResume}::boolean then ${move.resumeBranch ?? null}::text else x.resume_branch end,
        context = x.context || ${JSON.stringify(move.context ?? {})}::jsonb,
        exit_reason = coalesce(${move.exitReason ?? null}::text, x.exit_reason),
        error = coalesce(${move.error ?? null}::text, x.error),
        finished_at = case when ${final}::boolean then now() else x.finished_at end,
        lease_token = case when ${final}::boolean then null else x.lease_token end,
        lease_until = case when ${final}::boolean then null else x.lease_until end,
        updated_at = now()
      where x.id = ${from.id}::uuid and x.version = ${from.version} and x.lease_token = ${token}::uuid and x.status in ('RUNNING', 'WAITING')
      returning x.*
    ),
    run_end as (
      update workflow_step_runs r set
        status = ${end?.status ?? 'COMPLETED'},
        branch = case when ${end?.branch !== undefined}::boolean then ${end?.branch ?? null}::text else r.branch end,
        output = coalesce(${end?.output ? JSON.stringify(end.output) : null}::jsonb, r.output),
        error = case when ${end?.error !== undefined}::boolean then ${end?.error ?? null}::text else r.error end,
        finished_at = case when ${end?.status ?? 'COMPLETED'} in ('RUNNING', 'WAITING') then null else now() end
      from moved m
      where ${end !== undefined}::boolean and r.execution_id = m.id
        and ${endById === null ? sql`r.status in ('RUNNING', 'WAITING')` : sql`r.id = ${endById}::uuid`}
    ),
    run_begin as (
      insert into workflow_step_runs (id, execution_id, project_id, step_id, step_type, version, status)
      select ${STEP_RUN_ID_SQL}, m.id, m.project_id, ${effects.beginRun?.stepId ?? null}::uuid, ${effects.beginRun?.stepType ?? null}::text, m.version, 'RUNNING'
      from moved m where ${effects.beginRun !== undefined}::boolean
      on conflict (id) do nothing
      returning *
    ),
    hooks as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
      select mailroom_uuid_v7(clock_timestamp()), m.project_id, w.id, ${hookType}::text,
        jsonb_build_object('type', ${hookType}::text, 'timestamp', ${new Date().toISOString()}::text, 'data', ${JSON.stringify(effects.hook?.data ?? {})}::jsonb)
      from moved m join webhook_endpoints w on w.project_id = m.project_id and ${endpointWants(sql`${hookType}::text`)}
      where ${hookType}::text is not null
      returning id, project_id, generation
    )
    select (select to_jsonb(m) from moved m) as execution,
      (select to_jsonb(b) from run_begin b) as run,
      coalesce((select json_agg(json_build_object('id', id, 'projectId', project_id, 'generation', generation)) from hooks), '[]'::json) as deliveries
  `,
  );
  const r = rows.rows[0];
  return {
    execution: r.execution ? rowFromJson<ExecutionRow>(r.execution) : undefined,
    ...(r.run ? { run: rowFromJson<StepRunRow>(r.run) } : {}),
    deliveries: r.deliveries,
  };
}

/** Sets when a RUNNING execution's step is retried (WEBHOOK backoff), without a move. */
export async function deferExecution(db: DbOrTx, id: string, token: string, dueAt: Date): Promise<void> {
  await db
    .update(workflowExecutions)
    .set({ dueAt, updatedAt: new Date() })
    .where(and(eq(workflowExecutions.id, id), eq(workflowExecutions.leaseToken, token)));
}

/**
 * The step run of the execution's current version: created on first call, found again by a retried job through
 * its primary key ({@link stepRunId}; the id is the idempotency key of the step's effect).
 */
export async function beginStepRun(db: DbOrTx, x: ExecutionRow, step: WorkflowStepRow): Promise<StepRunRow> {
  // One round trip: the new run, or (a retried job) the one already begun at this version.
  const [run] = await db
    .insert(workflowStepRuns)
    .values({
      id: stepRunId(x.id, x.version),
      executionId: x.id,
      projectId: x.projectId,
      stepId: step.id,
      stepType: step.type,
      version: x.version,
      status: 'RUNNING',
    })
    .onConflictDoUpdate({ target: workflowStepRuns.id, set: { executionId: sql`excluded.execution_id` } })
    .returning();
  return run;
}

/** Records the end (or the wait) of a step run. */
export async function finishStepRun(
  tx: DbOrTx,
  runId: string,
  end: {
    status: StepRunStatus;
    branch?: string | null;
    output?: Record<string, unknown>;
    error?: string | null;
    attempts?: number;
  },
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

/** An execution a job should run. */
export interface ExecutionRef {
  id: string;
  projectId: string;
  version: number;
}

/**
 * Live executions due more than `olderThanMs` ago and not leased (their job was lost, or never added), oldest due
 * first, for the reconciler.
 */
export async function overdueExecutions(
  db: DbOrTx,
  olderThanMs: number,
  limit: number,
): Promise<(ExecutionRef & { dueAt: Date })[]> {
  const rows = await db.execute<{ id: string; project_id: string; version: number; due_at: string | Date }>(sql`
    select id, project_id, version, due_at from workflow_executions
    where status in ('RUNNING', 'WAITING') and due_at < now() - make_interval(secs => ${olderThanMs / 1000})
      and (lease_until is null or lease_until < now())
    order by due_at limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id, version: r.version, dueAt: new Date(r.due_at) }));
}
