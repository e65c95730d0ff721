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
import { sql } from 'drizzle-orm';
import type { AnyPgColumn, PgTable } from 'drizzle-orm/pg-core';
import type { Db } from '@mailroom/db/client';
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
import { PlunkSource, PLUNK_QUERIES } from './source';
import * as m from './map';
import { idOf } from './map-context';
import { mapCampaign, mapCampaignEmail } from './map-campaigns';
import { mapStep, mapTransition, mapWorkflow } from './map-workflows';
import type { PlunkImportOptions, PlunkImportReport } from './report';
import { Run, type Item } from './writer';

const byId = (row: Record<string, unknown>) => idOf(row);
/** A table keyed by a uuid `id`. */
type IdTable = PgTable & { id: AnyPgColumn<{ data: string; notNull: true }> };
const idsIn = (db: Db, table: IdTable) => async (keys: string[]) => {
  const rows = await db
    .select({ id: table.id })
    .from(table)
    .where(sql`${table.id} IN (SELECT jsonb_array_elements_text(${JSON.stringify(keys)}::jsonb)::uuid)`);
  return new Set(rows.map((r) => r.id));
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
      map.set(plunkId, idOf(row));
    /** Copies Plunk's rows of `kind` (keyed by their `id`) into `table` through `map`, batch by batch. */
    const copyById = (
      kind: keyof typeof PLUNK_QUERIES,
      table: IdTable,
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- rows reach each kind's typed mapper as read
      map: (row: Record<string, any>) => Item['mapped'],
      onPresent?: (plunkId: string, row: Record<string, unknown>) => void,
    ) =>
      run.each(kind, PLUNK_QUERIES[kind], (batch) =>
        run.write(
          kind,
          table,
          batch.map((r) => item(r.id, map(r))),
          byId,
          ['id'],
          idsIn(db, table),
          onPresent,
        ),
      );

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
    await copyById('domains', domains, (r) => m.mapDomain(r, ctx));
    await copyById('contacts', contacts, (r) => m.mapContact(r, ctx));
    await copyById('templates', templates, (r) => m.mapTemplate(r, ctx), remember(ctx.template));
    await copyById('segments', segments, (r) => m.mapSegment(r, ctx), remember(ctx.segment));
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
    await copyById('campaigns', campaigns, (r) => mapCampaign(r, ctx), remember(ctx.campaign));
    await copyById('campaignEmails', emails, (r) => mapCampaignEmail(r, ctx));
    await copyById(
      'workflows',
      workflows,
      (r) => mapWorkflow(r, ctx),
      (plunkId, row) => {
        ctx.workflow.set(plunkId, idOf(row));
        run.workflowProject.set(idOf(row), idOf(row, 'projectId'));
      },
    );
    const projectOf = (workflowId: string) => run.workflowProject.get(workflowId);
    await copyById('steps', workflowSteps, (r) => mapStep(r, ctx, projectOf), remember(ctx.step));
    await copyById('transitions', workflowTransitions, (r) => mapTransition(r, ctx, projectOf));
    await copyById('events', events, (r) => m.mapEvent(r, ctx));
    return run.finish();
  } finally {
    await source.close();
  }
}
