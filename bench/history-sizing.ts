/**
 * Bytes per row of the history tables, for docs/self-hosting/sizing.md: for each table its exact row count, heap, TOAST
 * (table and its index) and each index (`pg_relation_size`), summed over the partitions when the table is
 * partitioned (`pg_partition_tree`; a plain table is its own only leaf), divided by the row count.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { Database } from '@mailroom/db/client';

/**
 * The leaf relations of a table or index as `t(relid)`: its partitions' when it is partitioned, else itself
 * (`pg_partition_tree` answers nothing for a relation that is neither partitioned nor a partition).
 */
function leaves(rel: string | SQL): SQL {
  const r = typeof rel === 'string' ? sql`${rel}::regclass` : rel;
  return sql`(select relid from pg_partition_tree(${r}) where isleaf
    union all select ${r}::regclass where not exists (select 1 from pg_partition_tree(${r}))) t`;
}

const TABLES = ['emails', 'email_events', 'events', 'webhook_deliveries', 'webhook_attempts', 'contacts'];

/** One table's size per row (bytes), its parts, and each index's. */
export interface TableSize {
  table: string;
  rows: number;
  totalBytesPerRow: number;
  heapBytesPerRow: number;
  toastBytesPerRow: number;
  indexBytesPerRow: number;
  indexes: Record<string, number>;
}

/** Measures and prints the size per row of every history table (and contacts). */
export async function historySizing(database: Database): Promise<TableSize[]> {
  const out: TableSize[] = [];
  for (const table of TABLES) {
    const rows = (
      await database.db.execute<{ n: number }>(sql`select count(*)::float8 as n from ${sql.identifier(table)}`)
    ).rows[0].n;
    if (rows === 0) continue;
    const parts = await database.db.execute<{ heap: number; toast: number; total: number }>(sql`
      select coalesce(sum(pg_relation_size(c.oid) + pg_relation_size(c.oid, 'fsm') + pg_relation_size(c.oid, 'vm')), 0)::float8 as heap,
        coalesce(sum(case when c.reltoastrelid <> 0 then pg_total_relation_size(c.reltoastrelid) else 0 end), 0)::float8 as toast,
        coalesce(sum(pg_total_relation_size(c.oid)), 0)::float8 as total
      from ${leaves(table)} join pg_class c on c.oid = t.relid`);
    // Each index of the table (for a partitioned one: each parent index, summed over its partitions' indexes).
    const idx = await database.db.execute<{ name: string; bytes: number }>(sql`
      select i.relname as name, coalesce((select sum(pg_relation_size(t.relid)) from ${leaves(sql`i.oid`)}), 0)::float8 as bytes
      from pg_index x join pg_class i on i.oid = x.indexrelid where x.indrelid = ${table}::regclass order by i.relname`);
    const { heap, toast, total } = parts.rows[0];
    const indexBytes = idx.rows.reduce((s, r) => s + r.bytes, 0);
    out.push({
      table,
      rows,
      totalBytesPerRow: Math.round(total / rows),
      heapBytesPerRow: Math.round(heap / rows),
      toastBytesPerRow: Math.round(toast / rows),
      indexBytesPerRow: Math.round(indexBytes / rows),
      indexes: Object.fromEntries(idx.rows.map((r) => [r.name, Math.round(r.bytes / rows)])),
    });
  }
  console.log('\nBytes per row (pg_total_relation_size / rows; heap, TOAST and indexes)');
  console.table(
    out.map(({ indexes, ...rest }) => ({
      ...rest,
      'total MiB': Number(((rest.totalBytesPerRow * rest.rows) / 1048576).toFixed(0)),
      indexes: Object.keys(indexes).length,
    })),
  );
  for (const t of out) {
    console.log(
      `  ${t.table} indexes (bytes/row): ${Object.entries(t.indexes)
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}`,
    );
  }
  return out;
}
