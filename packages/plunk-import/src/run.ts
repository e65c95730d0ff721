/**
 * `import plunk`: copies a running Plunk v2's projects (with their keys), domains, contacts, templates, segments
 * (with static members), campaigns (drafts and history), workflows (steps and transitions) and events into this
 * database.
 *
 * - Idempotent: every row's id is derived from its Plunk id ({@link plunkRowId}) and written with
 *   `ON CONFLICT DO NOTHING`, so a second run writes nothing and a later run adds only what Plunk gained since.
 *   Rows already here are never overwritten (changes made here win).
 * - Streaming: each Plunk table is read in keyset batches and written with one bulk INSERT per batch.
 * - History in its own months: emails and events keep their Plunk `createdAt` in their ids (UUIDv7), and those
 *   tables are partitioned by month of id; before each batch the month partitions its rows need are created
 *   ({@link ensureMonthPartitions}), so imported history (years older than the partitions a deployment makes ahead)
 *   never piles up in a default partition, and retention can drop its months whole.
 * - Never fatal for a row: a row that cannot be mapped (or that collides with a different row here, e.g. two
 *   Plunk contacts whose addresses differ only in case) is counted and reported with its reason, and its
 *   dependants are refused with a reason naming it.
 *
 * @module
 */
import { getTableColumns, getTableName, sql } from 'drizzle-orm';
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Db } from '@mailroom/db/client';
import { ensureMonthPartitions, monthStartMs, type PartitionedTable } from '@mailroom/db/queries/partitions';
import {
  apiKeys,
  campaigns,
  contacts,
  domains,
  emails,
  events,
  projects,
  segmentMembers,
  segments,
  templates,
  workflows,
  workflowSteps,
  workflowTransitions,
} from '@mailroom/db/schema';
import { PlunkSource, PLUNK_QUERIES, type PlunkQuery } from './source';
import * as m from './map';
import { errorMessage } from '@mailroom/platform/errors';

/** The kinds reported, in import order. */
export const PLUNK_IMPORT_KINDS = [
  'projects',
  'keys',
  'domains',
  'contacts',
  'templates',
  'segments',
  'segmentMembers',
  'campaigns',
  'campaignEmails',
  'workflows',
  'steps',
  'transitions',
  'events',
] as const;
export type PlunkImportKind = (typeof PLUNK_IMPORT_KINDS)[number];

/** Counts of one kind: `imported` written by this run, `skipped` already here (an earlier run), `unmapped` refused. */
export interface KindTally {
  read: number;
  imported: number;
  skipped: number;
  unmapped: number;
}

/** A refused row. */
export interface UnmappedRow {
  kind: PlunkImportKind;
  plunkId: string;
  reason: string;
}

/** What a run did (the CLI prints it as JSON). */
export interface PlunkImportReport {
  durationMs: number;
  kinds: Record<PlunkImportKind, KindTally>;
  unmapped: { total: number; first: UnmappedRow[] };
  /** Changes made on the way (a workflow imported disabled, a domain kept unverified…). */
  notes: { total: number; first: string[] };
}

/** Options of {@link importFromPlunk}. */
export interface PlunkImportOptions {
  /** Rows per read and per INSERT (default 2000). */
  batchSize?: number;
  /** How many refused rows and notes the report lists (default 100; all are counted). */
  maxListed?: number;
  /** Told after each batch: the kind, rows read so far, and the kind's total in Plunk. */
  onProgress?: (kind: PlunkImportKind, done: number, total: number) => void;
}

/** Why an INSERT that skipped a row means a different row already holds its unique key. */
const CONFLICT: Partial<Record<PlunkImportKind, string>> = {
  keys: 'this key is already in use here',
  domains: 'this domain is registered by another project here',
  contacts: 'another contact of the project has the same address (addresses are case-insensitive here)',
  segments: 'another segment of the project has this name (names are unique here)',
  campaignEmails: 'another email of the campaign goes to the same contact',
  transitions: 'another transition leaves the same step on the same branch',
};

type Item = { plunkId: string; mapped: m.Mapped<Record<string, unknown> | null> };

class Run {
  readonly report: PlunkImportReport;
  readonly ctx = m.newMapContext();
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
        rows.map((r) => r.row.id as string),
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

const byId = (row: Record<string, unknown>) => row.id as string;
const idsIn = (db: Db, table: PgTable & { id: AnyPgColumn }) => async (keys: string[]) => {
  const rows = await db
    .select({ id: table.id })
    .from(table)
    .where(sql`${table.id} IN (SELECT jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb)::uuid)`);
  return new Set(rows.map((r: { id: string }) => r.id));
};

/**
 * Imports a Plunk v2 database into ours (see the module comment for what and how).
 *
 * @param db - this platform's database.
 * @param sourceUrl - the Plunk database's connection string; read only.
 * @returns the per-kind counts, refused rows and notes.
 * @throws Error when the source is unreachable or is not a Plunk v2 database; database errors of our side.
 */
export async function importFromPlunk(
  db: Db,
  sourceUrl: string,
  options: PlunkImportOptions = {},
): Promise<PlunkImportReport> {
  const source = new PlunkSource(sourceUrl);
  try {
    await source.check();
    const run = new Run(db, source, {
      ...options,
      batchSize: options.batchSize ?? 2000,
      maxListed: options.maxListed ?? 100,
    });
    const { ctx } = run;
    const item = (plunkId: string, mapped: Item['mapped']): Item => ({ plunkId, mapped });
    const remember = (map: Map<string, string>) => (plunkId: string, row: Record<string, unknown>) =>
      map.set(plunkId, row.id as string);

    await run.each('projects', PLUNK_QUERIES.projects, async (batch) => {
      await run.write(
        'projects',
        projects,
        batch.map((r) => item(r.id, m.mapProject(r))),
        byId,
        ['id'],
        idsIn(db, projects),
        remember(ctx.project),
      );
      const keys = batch.flatMap((r) => {
        const projectId = ctx.project.get(r.id);
        return projectId
          ? (['secret', 'public'] as const).map((kind) => item(`${r.id}:${kind}`, m.mapKey(r, projectId, kind)))
          : [];
      });
      await run.write('keys', apiKeys, keys, byId, ['id'], idsIn(db, apiKeys));
    });
    await run.each('domains', PLUNK_QUERIES.domains, (batch) =>
      run.write(
        'domains',
        domains,
        batch.map((r) => item(r.id, m.mapDomain(r, ctx))),
        byId,
        ['id'],
        idsIn(db, domains),
      ),
    );
    await run.each('contacts', PLUNK_QUERIES.contacts, (batch) =>
      run.write(
        'contacts',
        contacts,
        batch.map((r) => item(r.id, m.mapContact(r, ctx))),
        byId,
        ['id'],
        idsIn(db, contacts),
      ),
    );
    await run.each('templates', PLUNK_QUERIES.templates, (batch) =>
      run.write(
        'templates',
        templates,
        batch.map((r) => item(r.id, m.mapTemplate(r, ctx))),
        byId,
        ['id'],
        idsIn(db, templates),
        remember(ctx.template),
      ),
    );
    await run.each('segments', PLUNK_QUERIES.segments, (batch) =>
      run.write(
        'segments',
        segments,
        batch.map((r) => item(r.id, m.mapSegment(r, ctx))),
        byId,
        ['id'],
        idsIn(db, segments),
        remember(ctx.segment),
      ),
    );
    const memberKey = (row: Record<string, unknown>) => `${String(row.segmentId)}:${String(row.contactId)}`;
    await run.each('segmentMembers', PLUNK_QUERIES.segmentMembers, (batch) =>
      run.write(
        'segmentMembers',
        segmentMembers,
        batch.map((r) => item(`${r.segmentId}:${r.contactId}`, m.mapSegmentMember(r, ctx))),
        memberKey,
        ['segmentId', 'contactId'],
        null, // the primary key is the only unique key: a skipped member is already a member
      ),
    );
    await run.each('campaigns', PLUNK_QUERIES.campaigns, (batch) =>
      run.write(
        'campaigns',
        campaigns,
        batch.map((r) => item(r.id, m.mapCampaign(r, ctx))),
        byId,
        ['id'],
        idsIn(db, campaigns),
        remember(ctx.campaign),
      ),
    );
    await run.each('campaignEmails', PLUNK_QUERIES.campaignEmails, (batch) =>
      run.write(
        'campaignEmails',
        emails,
        batch.map((r) => item(r.id, m.mapCampaignEmail(r, ctx))),
        byId,
        ['id'],
        idsIn(db, emails),
      ),
    );
    await run.each('workflows', PLUNK_QUERIES.workflows, (batch) =>
      run.write(
        'workflows',
        workflows,
        batch.map((r) => item(r.id, m.mapWorkflow(r, ctx))),
        byId,
        ['id'],
        idsIn(db, workflows),
        (plunkId, row) => {
          ctx.workflow.set(plunkId, row.id as string);
          run.workflowProject.set(row.id as string, row.projectId as string);
        },
      ),
    );
    const projectOf = (workflowId: string) => run.workflowProject.get(workflowId);
    await run.each('steps', PLUNK_QUERIES.steps, (batch) =>
      run.write(
        'steps',
        workflowSteps,
        batch.map((r) => item(r.id, m.mapStep(r, ctx, projectOf))),
        byId,
        ['id'],
        idsIn(db, workflowSteps),
        remember(ctx.step),
      ),
    );
    await run.each('transitions', PLUNK_QUERIES.transitions, (batch) =>
      run.write(
        'transitions',
        workflowTransitions,
        batch.map((r) => item(r.id, m.mapTransition(r, ctx, projectOf))),
        byId,
        ['id'],
        idsIn(db, workflowTransitions),
      ),
    );
    await run.each('events', PLUNK_QUERIES.events, (batch) =>
      run.write(
        'events',
        events,
        batch.map((r) => item(r.id, m.mapEvent(r, ctx))),
        byId,
        ['id'],
        idsIn(db, events),
      ),
    );
    return run.finish();
  } finally {
    await source.close();
  }
}
