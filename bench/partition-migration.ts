/**
 * `npm run bench -- partition-migration`: the time of migration 0018 (time partitioning) on a populated database.
 *
 * A database of its own is migrated up to 0017 (the schema before partitioning) and filled with one project's
 * history: `BENCH_PARTITION_ROWS` (default 1,000,000) emails with one timeline row each, as many contact events
 * (through their triggers) and a tenth as many webhook deliveries with one attempt each, spread over 365 days
 * (13 month partitions). Then, in the same run:
 *
 * - ceiling: the same rows copied into plain (unpartitioned) tables with the same indexes: the least a migration
 *   that rewrites these tables costs on this machine;
 * - migration: 0018 itself, its statements run in one transaction as the migrator runs them, each one timed (the
 *   profile: which statements the time goes to).
 *
 * Then the oldest full month of each table is dropped as retention would drop it, each drop timed.
 *
 * Prints both times (ms), the ratio, the slowest statements, the drops, and the rows per table.
 */
import { sql } from 'drizzle-orm';
import { createDatabase } from '@mailroom/db/client';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { MIGRATIONS_FOLDER } from '@mailroom/db/migrate';
import { dropMonthPartition, listMonthPartitions, PARTITIONED_TABLES } from '@mailroom/retention/queries/partitions';
import { createProject } from '@mailroom/projects/queries/projects';
import { dropDatabase, freshDatabase } from '../test/support/services';
import { fillHistory } from '../test/support/history-fill';

const TABLES = ['emails', 'email_events', 'events', 'webhook_deliveries', 'webhook_attempts'];

/** Runs the benchmark on the server of `adminUrl`; returns what it printed. */
export async function benchPartitionMigration(adminUrl: string): Promise<Record<string, unknown>> {
  const rows = Number(process.env.BENCH_PARTITION_ROWS ?? 1_000_000);
  const name = `mailroom_bench_partmig_${process.pid}`;
  const url = await freshDatabase(adminUrl, name, '0017_counter_deltas');
  const database = createDatabase({ url, poolSize: 2, applicationName: 'bench-partition-migration' });
  const { db } = database;
  try {
    const project = await createProject(db, 'bench partitions');
    let t = Date.now();
    await fillHistory(db, {
      projectId: project.id,
      contacts: 10_000,
      emails: rows,
      events: rows,
      webhookDeliveries: Math.round(rows / 10),
      days: 365,
    });
    for (const table of TABLES) await db.execute(sql.raw(`vacuum analyze ${table}`));
    const fillMs = Date.now() - t;
    const counts: Record<string, number> = {};
    for (const table of TABLES)
      counts[table] = (await db.execute<{ n: number }>(sql.raw(`select count(*)::int as n from ${table}`))).rows[0].n;
    const [{ size }] = (
      await db.execute<{ size: string }>(
        sql`select pg_size_pretty(sum(pg_total_relation_size(t::regclass))) as size from unnest(${sql.param(TABLES)}::text[]) t`,
      )
    ).rows;
    console.log(`partition-migration: filled ${JSON.stringify(counts)} (${size} with indexes) in ${fillMs} ms`);

    // Ceiling: the same rows into plain tables with the same indexes, then dropped.
    t = Date.now();
    for (const table of TABLES) {
      await db.execute(
        sql.raw(`create table ceiling_${table} (like ${table} including defaults including constraints)`),
      );
      await db.execute(sql.raw(`insert into ceiling_${table} select * from ${table}`));
      const defs = (
        await db.execute<{ def: string }>(sql`select indexdef as def from pg_indexes where tablename = ${table}`)
      ).rows;
      for (const { def } of defs) {
        await db.execute(
          sql.raw(
            def.replace(
              /INDEX (\S+) ON public\.(\S+)/,
              (_m, idx: string, tbl: string) => `INDEX ceiling_${idx} ON public.ceiling_${tbl}`,
            ),
          ),
        );
      }
    }
    const ceilingMs = Date.now() - t;
    for (const table of TABLES) await db.execute(sql.raw(`drop table ceiling_${table}`));

    // The migration's statements as the migrator splits them, in one transaction, each timed.
    const text = await readFile(path.join(MIGRATIONS_FOLDER, '0018_partitioning.sql'), 'utf8');
    const statements = text
      .split('--> statement-breakpoint')
      .map((s) => s.trim())
      .filter((s) => s.length > 0);
    const timed: { ms: number; statement: string }[] = [];
    const client = await database.pool.connect();
    t = Date.now();
    try {
      await client.query('begin');
      for (const statement of statements) {
        const s = Date.now();
        await client.query(statement);
        timed.push({
          ms: Date.now() - s,
          statement: statement
            .replace(/^(--.*\n)+/, '')
            .replace(/\s+/g, ' ')
            .slice(0, 110),
        });
      }
      await client.query('commit');
    } finally {
      client.release();
    }
    const migrationMs = Date.now() - t;
    const slowest = [...timed].sort((a, b) => b.ms - a.ms).slice(0, 10);
    const parts = (
      await db.execute<{ n: number }>(
        sql`select count(*)::int as n from pg_inherits where inhparent = 'emails'::regclass`,
      )
    ).rows[0].n;
    const after: Record<string, number> = {};
    for (const table of TABLES)
      after[table] = (await db.execute<{ n: number }>(sql.raw(`select count(*)::int as n from ${table}`))).rows[0].n;
    // Retention's whole-month drop at this size: the oldest full month of each table, timed (the detach holds the
    // parent's ACCESS EXCLUSIVE lock from its start to the commit, and validates the foreign keys pointing in).
    const drops: Record<string, { partition: string; rows: number; ms: number }> = {};
    // (workflow_step_runs is partitioned by 0020, not by the migration timed here.)
    for (const table of PARTITIONED_TABLES.filter((tb) => tb !== 'workflow_step_runs')) {
      const [, oldestFull] = await listMonthPartitions(db, table);
      const n = (await db.execute<{ n: number }>(sql.raw(`select count(*)::int as n from ${oldestFull.name}`))).rows[0]
        .n;
      t = Date.now();
      const dropped = await dropMonthPartition(db, oldestFull);
      drops[table] = {
        partition: dropped ? oldestFull.name : `${oldestFull.name} (kept)`,
        rows: n,
        ms: Date.now() - t,
      };
    }
    console.log(`partition-migration: whole-month drops ${JSON.stringify(drops)}`);
    const result = {
      drops,
      rows: counts,
      rowsAfter: after,
      emailsPartitions: parts,
      migrationMs,
      ceilingMs,
      ratio: Number((migrationMs / ceilingMs).toFixed(2)),
      slowest,
    };
    console.log(
      `partition-migration: 0018 took ${migrationMs} ms; ceiling (plain copy with the same indexes) ${ceilingMs} ms; ratio ${result.ratio}`,
    );
    console.log(
      `partition-migration: emails now in ${parts} partitions (months + default); rows after ${JSON.stringify(after)}`,
    );
    console.log('partition-migration: slowest statements of 0018 (ms):');
    for (const s of slowest) console.log(`  ${String(s.ms).padStart(7)}  ${s.statement}`);
    return result;
  } finally {
    await database.close();
    await dropDatabase(adminUrl, name);
  }
}
