/**
 * The writing side of a Plunk import: one {@link Run} per import holds the map context and the report, writes each
 * mapped batch with one bulk `INSERT … ON CONFLICT DO NOTHING` (making the month partitions its rows need first),
 * and counts what was imported, already here, or refused.
 *
 * @module
 */
import { getTableColumns, getTableName, sql } from 'drizzle-orm';
import type { PgTable } from 'drizzle-orm/pg-core';
import type { Db } from '@mailroom/db/client';
import { ensureMonthPartitions, monthStartMs, type PartitionedTable } from '@mailroom/retention/queries/partitions';
import { emails, events } from '@mailroom/db/schema';
import { errorMessage } from '@mailroom/platform/errors';
import type { PlunkSource, PlunkQuery } from './source';
import { idOf, newMapContext, type Mapped } from './map-context';
import { PLUNK_IMPORT_KINDS, type PlunkImportKind, type PlunkImportOptions, type PlunkImportReport } from './report';

const CONFLICT: Partial<Record<PlunkImportKind, string>> = {
  keys: 'this key is already in use here',
  domains: 'this domain is registered by another project here',
  contacts: 'another contact of the project has the same address (addresses are case-insensitive here)',
  segments: 'another segment of the project has this name (names are unique here)',
  campaignEmails: 'another email of the campaign goes to the same contact',
  transitions: 'another transition leaves the same step on the same branch',
};

export type Item = { plunkId: string; mapped: Mapped<Record<string, unknown> | null> };

/** One import run: its map context, report and writes. */
export class Run {
  readonly report: PlunkImportReport;
  readonly ctx = newMapContext();
  /** Our workflow id → our project id (steps and transitions carry the project). */
  readonly workflowProject = new Map<string, string>();
  private readonly started = Date.now();
  /** Per partitioned table, the months (first ms, UTC) whose partition this run has made sure of. */
  private readonly months = new Map<PartitionedTable, Set<number>>();

  constructor(
    readonly db: Db,
    readonly source: PlunkSource,
    readonly options: Required<Pick<PlunkImportOptions, 'batchSize' | 'maxListed'>> & PlunkImportOptions,
  ) {
    const kinds = Object.fromEntries(
      PLUNK_IMPORT_KINDS.map((k) => [k, { read: 0, imported: 0, skipped: 0, unmapped: 0 }]),
    );
    this.report = {
      durationMs: 0,
      kinds: kinds as PlunkImportReport['kinds'],
      unmapped: { total: 0, first: [] },
      notes: { total: 0, first: [] },
    };
  }

  private refuse(kind: PlunkImportKind, plunkId: string, reason: string) {
    this.report.kinds[kind].unmapped += 1;
    this.report.unmapped.total += 1;
    if (this.report.unmapped.first.length < this.options.maxListed)
      this.report.unmapped.first.push({ kind, plunkId, reason });
    if (kind === 'contacts') this.ctx.missingContacts.add(plunkId);
  }

  private note(text: string) {
    this.report.notes.total += 1;
    if (this.report.notes.first.length < this.options.maxListed) this.report.notes.first.push(text);
  }

  /**
   * Writes one batch of mapped rows of `kind` into `table` and tallies it.
   *
   * @param keyOf - a written row's key (`id`, or the composite key of a table without one).
   * @param present - our rows that exist now (mapped from Plunk rows): `onPresent` records them in the context.
   */
  async write(
    kind: PlunkImportKind,
    table: PgTable,
    items: Item[],
    keyOf: (row: Record<string, unknown>) => string,
    returning: string[],
    exists: ((keys: string[]) => Promise<Set<string>>) | null,
    onPresent?: (plunkId: string, row: Record<string, unknown>) => void,
  ): Promise<void> {
    const tally = this.report.kinds[kind];
    tally.read += items.length;
    const rows: { plunkId: string; row: Record<string, unknown> }[] = [];
    for (const { plunkId, mapped } of items) {
      if (!mapped.ok) this.refuse(kind, plunkId, mapped.reason);
      else if (mapped.row === null)
        tally.read -= 1; // not a row here (a Plunk TRIGGER step)
      else {
        rows.push({ plunkId, row: mapped.row });
        if (mapped.note) this.note(mapped.note);
      }
    }
    if (rows.length === 0) return;
    const partitioned = PARTITIONED[getTableName(table)];
    if (partitioned)
      await this.ensureMonths(
        partitioned,
        rows.map((r) => idOf(r.row)),
      );
    const written = await bulkInsert(
      this.db,
      table,
      rows.map((r) => r.row),
      returning,
    );
    const inserted = new Set(written.map(keyOf));
    const missing = rows.filter((r) => !inserted.has(keyOf(r.row))).map((r) => keyOf(r.row));
    const here = missing.length === 0 ? new Set<string>() : exists ? await exists(missing) : new Set(missing);
    for (const { plunkId, row } of rows) {
      const key = keyOf(row);
      if (inserted.has(key)) tally.imported += 1;
      else if (here.has(key)) tally.skipped += 1;
      else {
        this.refuse(kind, plunkId, CONFLICT[kind] ?? 'conflicts with a different row here');
        continue;
      }
      onPresent?.(plunkId, row);
    }
  }

  /**
   * Creates the month partitions of `table` that the ids need and this run has not made sure of yet. A month whose
   * rows already sit in the default partition (an import from before this was done) stays there, noted; a lock
   * that cannot be had in time leaves the rows to the default partition too, noted: the data is the same either way.
   */
  private async ensureMonths(table: PartitionedTable, ids: string[]): Promise<void> {
    const done = this.months.get(table) ?? new Set<number>();
    this.months.set(table, done);
    const needed = new Set(ids.map((id) => monthStartMs(parseInt(id.replace(/-/g, '').slice(0, 12), 16))));
    for (const month of [...needed].filter((m) => !done.has(m)).sort((a, b) => a - b)) {
      const label = `${table} ${new Date(month).toISOString().slice(0, 7)}`;
      try {
        const blocked = await ensureMonthPartitions(this.db, table, month, month);
        if (blocked.length > 0)
          this.note(`${label}: rows of that month were already in the default partition; the month stays there`);
      } catch (err) {
        this.note(
          `${label}: the month partition could not be made (${errorMessage(err)}); its rows went to the default partition`,
        );
      }
      done.add(month);
    }
  }

  /** Reads `query` in batches and hands each batch to `handle`. */
  async each(
    kind: PlunkImportKind,
    query: PlunkQuery,
    // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows reach each kind's typed mapper as read
    handle: (batch: Record<string, any>[]) => Promise<void>,
  ): Promise<void> {
    const total = this.options.onProgress ? await this.source.count(query) : 0;
    let done = 0;
    for await (const batch of this.source.batches<Record<string, unknown>>(query, this.options.batchSize)) {
      await handle(batch);
      done += batch.length;
      this.options.onProgress?.(kind, done, total);
    }
  }

  finish(): PlunkImportReport {
    this.report.durationMs = Date.now() - this.started;
    return this.report;
  }
}

/**
 * One INSERT of many rows: the rows travel as one JSON parameter read by `jsonb_populate_recordset` with the
 * table's own row type (so each value gets its column's type, JSON arrays become Postgres arrays), only the
 * columns the rows carry are written (the others take their defaults), and rows whose key is taken are skipped.
 *
 * @param rows - objects keyed by the table's Drizzle field names (as `insert().values()` takes them).
 * @param returning - field names to return for each inserted row.
 * @returns the inserted rows' `returning` fields, keyed by field name.
 */
async function bulkInsert(
  db: Db,
  table: PgTable,
  rows: Record<string, unknown>[],
  returning: string[],
): Promise<Record<string, unknown>[]> {
  const columns = getTableColumns(table) as Record<string, { name: string }>;
  const fields = [...new Set(rows.flatMap((r) => Object.keys(r)))];
  const name = (field: string) => {
    const column = columns[field];
    if (!column) throw new Error(`bulkInsert: ${getTableName(table)} has no field ${field}`);
    return `"${column.name}"`;
  };
  const list = fields.map(name).join(', ');
  const json = JSON.stringify(rows.map((r) => Object.fromEntries(fields.map((f) => [columns[f].name, r[f] ?? null]))));
  const result = await db.execute<Record<string, unknown>>(
    sql`INSERT INTO ${sql.raw(`"${getTableName(table)}"`)} (${sql.raw(list)}) SELECT ${sql.raw(list)} FROM jsonb_populate_recordset(NULL::${sql.raw(`"${getTableName(table)}"`)}, ${json}::jsonb) ON CONFLICT DO NOTHING RETURNING ${sql.raw(returning.map((f) => `${name(f)} AS "${f}"`).join(', '))}`,
  );
  return result.rows;
}

/** The partitioned tables the import writes, by table name. */
const PARTITIONED: Partial<Record<string, PartitionedTable>> = {
  [getTableName(emails)]: 'emails',
  [getTableName(events)]: 'events',
};
