/**
 * Time partitions of the history tables (docs/architecture.md#time-partitions; migrations `0018_partitioning` and
 * `0020_partition_step_runs`): `emails`, `email_events`, `events`, `webhook_deliveries`, `webhook_attempts` and
 * `workflow_step_runs` (whose ids carry the time of their execution's start) are partitioned BY RANGE (id), one
 * partition `<table>_pYYYYMM` per calendar month (UTC) whose bounds are the UUIDv7s of the month's first millisecond,
 * plus a `<table>_default` partition for any id outside them.
 *
 * The statements here create months ahead ({@link ensureMonthPartitions}), list them ({@link listMonthPartitions}),
 * count what landed in the default partition ({@link defaultPartitionRows}), and drop a whole month when every row
 * in it is past retention ({@link dropMonthPartition}). Taking a lock on a hot parent never waits longer than
 * {@link PARTITION_LOCK_TIMEOUT_MS}: the statement fails instead and the next pass tries again.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** The partitioned tables, in the order a retention pass may drop their months (referencing tables first). */
export const PARTITIONED_TABLES = [
  'webhook_attempts',
  'webhook_deliveries',
  'email_events',
  'emails',
  'events',
  'workflow_step_runs',
] as const;
export type PartitionedTable = (typeof PARTITIONED_TABLES)[number];

/** Longest wait (ms) for the lock on a parent table when attaching or detaching a partition. */
export const PARTITION_LOCK_TIMEOUT_MS = 3_000;

/** One month partition of a table. */
export interface MonthPartition {
  table: PartitionedTable;
  /** `<table>_pYYYYMM`. */
  name: string;
  /** First millisecond of the month (UTC), Unix epoch ms. */
  fromMs: number;
  /** First millisecond of the next month (UTC), Unix epoch ms: the exclusive upper bound. */
  toMs: number;
}

/** First millisecond (UTC) of the month `offset` months after the month of `ms`. */
export function monthStartMs(ms: number, offset = 0): number {
  const d = new Date(ms);
  return Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + offset, 1);
}

/** The smallest UUIDv7 of millisecond `ms` (what SQL `mailroom_uuid_v7_floor` gives). */
function idFloor(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

/**
 * Creates the month partitions of `table` from the month of `fromMs` to the month of `untilMs` (inclusive) that do
 * not exist yet. Rows of a created month that sat in the default partition move into it when nothing references
 * the table by foreign key; otherwise that month is left uncreated (its rows keep going to the default partition).
 *
 * @returns the months (first ms, UTC) left uncreated because the default partition holds rows of theirs.
 * @throws the driver's error, e.g. `lock_timeout` when the parent stayed locked longer than {@link PARTITION_LOCK_TIMEOUT_MS}.
 */
export async function ensureMonthPartitions(
  db: DbOrTx,
  table: PartitionedTable,
  fromMs: number,
  untilMs: number,
): Promise<number[]> {
  return db.transaction(async (tx) => {
    await tx.execute(sql.raw(`set local lock_timeout = ${PARTITION_LOCK_TIMEOUT_MS}`));
    const rows = await tx.execute<{ blocked: string[] | null }>(sql`
      select mailroom_ensure_month_partitions(${table}, ${new Date(fromMs).toISOString()}::timestamptz, ${new Date(untilMs).toISOString()}::timestamptz)::text[] as blocked`);
    return (rows.rows[0]?.blocked ?? []).map((d) => Date.parse(`${d}T00:00:00Z`));
  });
}

/** The month partitions of `table`, oldest first (the default partition is not one). */
export async function listMonthPartitions(db: DbOrTx, table: PartitionedTable): Promise<MonthPartition[]> {
  const rows = await db.execute<{ name: string }>(sql`
    select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
    where i.inhparent = ${table}::regclass and c.relname ~ ${`^${table}_p[0-9]{6}$`}
    order by c.relname`);
  return rows.rows.map(({ name }) => {
    const ym = name.slice(-6);
    const fromMs = Date.UTC(Number(ym.slice(0, 4)), Number(ym.slice(4)) - 1, 1);
    return { table, name, fromMs, toMs: monthStartMs(fromMs, 1) };
  });
}

/**
 * Rows of `table` in its default partition (ids outside every month partition: made by a clock far off, or
 * imported history older than the oldest month), counted up to `cap`.
 */
export async function defaultPartitionRows(db: DbOrTx, table: PartitionedTable, cap = 100_000): Promise<number> {
  const rows = await db.execute<{ n: number }>(sql`
    select count(*)::int as n from (select 1 from ${sql.identifier(`${table}_default`)} limit ${cap}) d`);
  return rows.rows[0].n;
}

/** Statements that decide whether a month can go, and what must happen before it goes. */
interface DropPlan {
  /**
   * Take the parent's ACCESS EXCLUSIVE lock (the detach's) before checking `blocked` a second time: for a table
   * whose old months may still receive a row (a step run of an execution started that month).
   */
  lockParent?: boolean;
  /** True when something in (or depending on) the month must stay; `part` is the month's partition. */
  blocked?: (lo: string, hi: string, part: SQL) => SQL;
  /**
   * Run, in order, before the detach: rows of other tables referencing the month (the detach checks that none is left
   * for a foreign key; rows referencing through a 0022 trigger are deleted again by `after`).
   */
  before?: (lo: string, hi: string) => SQL[];
  /**
   * Run, in order, right after the detach (under its ACCESS EXCLUSIVE lock on the parent): rows referencing the month
   * through a statement trigger (0022), which the detach does not check. A timeline row or attempt whose insert
   * locked its email or delivery between `before` and the detach has committed by now (the detach waited for it);
   * later inserts wait for the lock and then fail their check (23503). Usually deletes nothing.
   */
  after?: (lo: string, hi: string) => SQL[];
  /**
   * Run before the detached table is dropped: derived counters that a statement trigger kept. `month` is the
   * partition's month (`YYYY-MM-01`, UTC).
   */
  finish?: (detached: SQL, month: string) => SQL[];
}

const NOT_FINAL = sql`('scheduled', 'queued', 'sending')`;

/** The statement deleting the rows of `table` whose `column` points into `[lo, hi)`: a month's referencing rows. */
const deleteReferencing = (table: string, column: string) => (lo: string, hi: string) =>
  sql`delete from ${sql.identifier(table)} where ${sql.identifier(column)} >= ${lo}::uuid and ${sql.identifier(column)} < ${hi}::uuid`;
// Referencing through 0022's triggers: deleted before the detach, and again after it (see `after`).
const attemptsOf = deleteReferencing('webhook_attempts', 'delivery_id');
const timelinesOf = deleteReferencing('email_events', 'email_id');

const PLANS: Readonly<Record<PartitionedTable, DropPlan>> = {
  // Attempts of a delivery come after it: the month's attempts belong to deliveries from its oldest one referenced
  // to the month's end; a pending one among them keeps the month.
  webhook_attempts: {
    blocked: (_lo, hi, part) => sql`exists (select 1 from webhook_deliveries where status = 'pending'
      and id >= (select delivery_id from ${part} order by delivery_id limit 1) and id < ${hi}::uuid)`,
  },
  webhook_deliveries: {
    blocked: (lo, hi) =>
      sql`exists (select 1 from webhook_deliveries where status = 'pending' and id >= ${lo}::uuid and id < ${hi}::uuid)`,
    before: (lo, hi) => [attemptsOf(lo, hi)],
    after: (lo, hi) => [attemptsOf(lo, hi)],
  },
  // A timeline row comes after its email: the month's rows belong to emails from its oldest one referenced to the
  // month's end; a campaign email (kept while its campaign exists) or an email not yet final among them keeps it.
  // Two probes, one per partial index (campaign emails; emails not yet final), never a read of the range's emails:
  // one `or` over both conditions was planned as a scan of every email in the range (a month of them).
  // (An empty month has no oldest email: `id >= null` matches nothing, so it is not blocked.)
  email_events: {
    blocked: (_lo, hi, part) => {
      const oldest = sql`(select email_id from ${part} order by email_id limit 1)`;
      return sql`exists (select 1 from emails where campaign_id is not null and id >= ${oldest} and id < ${hi}::uuid)
        or exists (select 1 from emails where status in ${NOT_FINAL} and id >= ${oldest} and id < ${hi}::uuid)`;
    },
  },
  emails: {
    blocked: (
      lo,
      hi,
    ) => sql`exists (select 1 from emails where campaign_id is not null and id >= ${lo}::uuid and id < ${hi}::uuid)
      or exists (select 1 from emails where status in ${NOT_FINAL} and id >= ${lo}::uuid and id < ${hi}::uuid)`,
    before: (lo, hi) => [
      timelinesOf(lo, hi),
      deleteReferencing('test_messages', 'email_id')(lo, hi),
      sql`update suppressions set source_email_id = null where source_email_id >= ${lo}::uuid and source_email_id < ${hi}::uuid`,
    ],
    after: (lo, hi) => [timelinesOf(lo, hi)],
  },
  // DROP fires no statement trigger: the month's counts per (project, name) go to event_name_deltas as negative
  // deltas of that month, as the delete trigger would write them, in the transaction that drops it; the counters'
  // fold lowers event_names and event_name_months and removes what reaches zero. The counts come from
  // event_name_months plus that month's deltas not yet folded (one statement, one snapshot: a fold running
  // meanwhile is seen whole or not at all; migration 0021_event_name_months), never from the partition's rows, so
  // the drop costs the same however many events the month holds. Nothing adds to the month once it is detached.
  events: {
    finish: (_detached, month) => [
      sql`insert into event_name_deltas (project_id, name, count, month)
        select project_id, name, -sum(count), month from (
          select project_id, name, count, month from event_name_months where month = ${month}::date
          union all
          select project_id, name, count, month from event_name_deltas where month = ${month}::date
        ) c
        group by project_id, name, month having sum(count) <> 0`,
    ],
  },
  // A step run sits in the month its execution started and goes by cascade with its execution: a month goes only
  // once empty (every execution of it deleted by retention), checked again under the lock so that no run of a late
  // execution lands in it meanwhile. Nothing references an empty month (emails.workflow_step_run_id).
  workflow_step_runs: {
    lockParent: true,
    blocked: (_lo, _hi, part) => sql`exists (select 1 from ${part})`,
  },
};

/** Name a month partition takes once detached, until it is dropped. */
const detachedName = (name: string) => `${name}_detached`;

/**
 * Drops one month partition when nothing in it must stay (no pending webhook delivery, campaign email or email
 * not yet final owns its rows, no step run is left in it; see the plans above). The caller decides that every row is past retention (the
 * month ends before the oldest cutoff of every project). Two short transactions:
 *
 * 1. Rows of other tables referencing the month are deleted (timelines, attempts, test messages) or unlinked
 *    (a suppression's source email), then the month is detached and renamed `<name>_detached`. The detach holds
 *    the parent's ACCESS EXCLUSIVE lock to the commit, so nothing slow runs after it.
 * 2. Counters kept by statement triggers are lowered by the detached rows (negative `event_name_deltas` for
 *    `events`), and the table is dropped ({@link finishDetachedPartitions} completes this step after a crash between the two).
 *
 * @returns true when dropped; false when something in it must stay (nothing changed).
 * @throws the driver's error, e.g. `lock_timeout` when the parent stayed busy longer than {@link PARTITION_LOCK_TIMEOUT_MS}
 *   (the transaction rolls back; the next pass tries again).
 */
export async function dropMonthPartition(db: DbOrTx, p: MonthPartition): Promise<boolean> {
  const plan = PLANS[p.table];
  const lo = idFloor(p.fromMs);
  const hi = idFloor(p.toMs);
  const detached = await db.transaction(async (tx) => {
    await tx.execute(sql.raw(`set local lock_timeout = ${PARTITION_LOCK_TIMEOUT_MS}`));
    const blocked = async () =>
      plan.blocked !== undefined &&
      (
        await tx.execute<{ blocked: boolean }>(
          sql`select (${plan.blocked(lo, hi, sql`${sql.identifier(p.name)}`)}) as blocked`,
        )
      ).rows[0].blocked;
    if (await blocked()) return false;
    if (plan.lockParent) {
      await tx.execute(sql`lock table ${sql.identifier(p.table)} in access exclusive mode`);
      if (await blocked()) return false;
    }
    for (const statement of plan.before?.(lo, hi) ?? []) await tx.execute(statement);
    await tx.execute(sql`alter table ${sql.identifier(p.table)} detach partition ${sql.identifier(p.name)}`);
    for (const statement of plan.after?.(lo, hi) ?? []) await tx.execute(statement);
    await tx.execute(sql`alter table ${sql.identifier(p.name)} rename to ${sql.identifier(detachedName(p.name))}`);
    return true;
  });
  if (detached) await finishDetached(db, p.table, detachedName(p.name));
  return detached;
}

async function finishDetached(db: DbOrTx, table: PartitionedTable, name: string): Promise<void> {
  const m = /_p(\d{4})(\d{2})_detached$/.exec(name);
  if (!m) throw new Error(`not a detached month partition: ${name}`);
  await db.transaction(async (tx) => {
    for (const statement of PLANS[table].finish?.(sql`${sql.identifier(name)}`, `${m[1]}-${m[2]}-01`) ?? [])
      await tx.execute(statement);
    await tx.execute(sql`drop table ${sql.identifier(name)}`);
  });
}

/**
 * Completes the drop of month partitions detached by {@link dropMonthPartition} whose second step did not run
 * (the process died between the two): counters lowered, table dropped.
 *
 * @returns the names of the tables dropped.
 */
export async function finishDetachedPartitions(db: DbOrTx): Promise<string[]> {
  const done: string[] = [];
  for (const table of PARTITIONED_TABLES) {
    const rows = await db.execute<{ name: string }>(sql`
      select relname as name from pg_class where relkind = 'r' and relname ~ ${`^${table}_p[0-9]{6}_detached$`} and not relispartition`);
    for (const { name } of rows.rows) {
      await finishDetached(db, table, name);
      done.push(name);
    }
  }
  return done;
}
