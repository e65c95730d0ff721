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
 * - migration: 0018 itself (`migrate`), one transaction.
 *
 * Prints both times (ms), the ratio, and the rows per table.
 */
import { sql } from 'drizzle-orm';
import { createDatabase } from '@mailroom/db/client';
import { migrate } from '@mailroom/db/migrate';
import { createProject } from '@mailroom/db/queries/projects';
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
    await fillHistory(db, { projectId: project.id, contacts: 10_000, emails: rows, events: rows, webhookDeliveries: Math.round(rows / 10), days: 365 });
    for (const table of TABLES) await db.execute(sql.raw(`vacuum analyze ${table}`));
    const fillMs = Date.now() - t;
    const counts: Record<string, number> = {};
    for (const table of TABLES) counts[table] = (await db.execute<{ n: number }>(sql.raw(`select count(*)::int as n from ${table}`))).rows[0].n;
    const [{ size }] = (await db.execute<{ size: string }>(sql`select pg_size_pretty(sum(pg_total_relation_size(t::regclass))) as size from unnest(${sql.param(TABLES)}::text[]) t`)).rows;
    console.log(`partition-migration: filled ${JSON.stringify(counts)} (${size} with indexes) in ${fillMs} ms`);

    // Ceiling: the same rows into plain tables with the same indexes, then dropped.
    t = Date.now();
    for (const table of TABLES) {
      await db.execute(sql.raw(`create table ceiling_${table} (like ${table} including defaults including constraints)`));
      await db.execute(sql.raw(`insert into ceiling_${table} select * from ${table}`));
      const defs = (await db.execute<{ def: string }>(sql`select indexdef as def from pg_indexes where tablename = ${table}`)).rows;
      for (const { def } of defs) {
        await db.execute(sql.raw(def.replace(/INDEX (\S+) ON public\.(\S+)/, (_m, idx: string, tbl: string) => `INDEX ceiling_${idx} ON public.ceiling_${tbl}`)));
      }
    }
    const ceilingMs = Date.now() - t;
    for (const table of TABLES) await db.execute(sql.raw(`drop table ceiling_${table}`));

    t = Date.now();
    await migrate(url);
    const migrationMs = Date.now() - t;
    const parts = (await db.execute<{ n: number }>(sql`select count(*)::int as n from pg_inherits where inhparent = 'emails'::regclass`)).rows[0].n;
    const after: Record<string, number> = {};
    for (const table of TABLES) after[table] = (await db.execute<{ n: number }>(sql.raw(`select count(*)::int as n from ${table}`))).rows[0].n;
    const result = { rows: counts, rowsAfter: after, emailsPartitions: parts, migrationMs, ceilingMs, ratio: Number((migrationMs / ceilingMs).toFixed(2)) };
    console.log(`partition-migration: 0018 took ${migrationMs} ms; ceiling (plain copy with the same indexes) ${ceilingMs} ms; ratio ${result.ratio}`);
    console.log(`partition-migration: emails now in ${parts} partitions (months + default); rows after ${JSON.stringify(after)}`);
    return result;
  } finally {
    await database.close();
    await dropDatabase(adminUrl, name);
  }
}
