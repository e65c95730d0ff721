/**
 * Event filters read through `events_project_name_contact_idx` (project, name, contact, id) on a real database:
 * the count and the sample stay exact after new events, after retention deletes old events, and after a contact
 * is erased. The planner is steered onto the index (sequential scans, hashes and bitmaps off for the
 * transaction), as it is at 1,000,000 contacts; a plan check makes sure the index is what was read.
 */
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { retentionBatch } from '@mailroom/retention/queries/retention';
import { eraseContact } from '@mailroom/contacts/queries/erase';
import { normalizeEmail } from '@mailroom/platform/address';
import { parseSegmentFilter } from '../filter-parser';
import { compileAudience } from '../audience';
import { countMatchingContacts, listMatchingContacts } from './segments';

let database: Database;
let projectId: string;
const ids: Record<string, string> = {};

/** Records `n` events named `name` for a contact, `daysAgo` days old (ids are UUIDv7 of that time). */
async function track(tag: string, name: string, n: number, daysAgo = 0): Promise<void> {
  await database.db.execute(sql`
    insert into events (id, project_id, contact_id, name, created_at)
    select mailroom_uuid_v7(t.at), ${projectId}::uuid, ${ids[tag]}::uuid, ${name}, t.at
    from generate_series(1, ${n}) k, lateral (select now() - make_interval(days => ${daysAgo}::int) - make_interval(secs => k) as at) t`);
}

beforeAll(async () => {
  database = createDatabase({
    url: process.env.TEST_DATABASE_URL!,
    poolSize: 2,
    applicationName: 'event-filters-test',
  });
  projectId = (await createProject(database.db, `event filters ${randomBytes(3).toString('hex')}`)).id;
  const tags = ['three', 'one', 'old', 'never', 'erased', 'other'];
  const rows = await upsertContacts(
    database.db,
    projectId,
    tags.map((t) => ({ email: normalizeEmail(`${t}@x.test`), defaultSubscribed: true })),
  );
  for (const r of rows) ids[r.email.split('@')[0]] = r.id;
  await track('three', 'purchase', 3);
  await track('one', 'purchase', 1);
  await track('old', 'purchase', 2, 400);
  await track('erased', 'purchase', 2);
  await track('other', 'signup', 2);
});

afterAll(() => database.close());

const filters = {
  performed: [{ field: 'event.purchase', operator: 'exists' }],
  never: [{ field: 'event.purchase', operator: 'notExists' }],
  twiceOrMore: [{ field: 'event.purchase', operator: 'greaterThanOrEqual', value: 2 }],
  lessThanTwice: [{ field: 'event.purchase', operator: 'lessThan', value: 2 }],
  inTheLastMonth: [{ field: 'event.purchase', operator: 'within', value: 30, unit: 'days' }],
  twiceInTheLastMonth: [
    { field: 'event.purchase', operator: 'greaterThanOrEqual', value: 2, window: { value: 30, unit: 'days' } },
  ],
};

/** For each filter: the tags its sample lists and the count, both read with the planner kept on the indexes. */
async function matches(): Promise<Record<string, { tags: string[]; count: number }>> {
  const out: Record<string, { tags: string[]; count: number }> = {};
  for (const [name, given] of Object.entries(filters)) {
    const predicate = compileAudience(
      projectId,
      { type: 'FILTERED', filter: parseSegmentFilter(given, 'filter') },
      { now: Date.now() },
    );
    out[name] = await database.db.transaction(async (tx) => {
      await tx.execute(
        sql`set local enable_seqscan = off; set local enable_hashagg = off; set local enable_hashjoin = off; set local enable_bitmapscan = off`,
      );
      const plan = await tx.execute<{ 'QUERY PLAN': string }>(
        sql`explain select count(*) from contacts where contacts.project_id = ${projectId}::uuid and ${predicate}`,
      );
      expect(plan.rows.map((r) => r['QUERY PLAN']).join('\n')).toContain('events_project_name_contact_idx');
      const page = await listMatchingContacts(tx, projectId, predicate, { limit: 50 });
      const counted = await countMatchingContacts(tx, projectId, predicate);
      return { tags: page.items.map((c) => c.email.split('@')[0]).sort(), count: counted.count };
    });
  }
  return out;
}

const of = (...tags: string[]) => ({ tags: tags.sort(), count: tags.length });

test('exact after inserts, after retention deletes old events, and after an erasure', async () => {
  expect(await matches()).toEqual({
    performed: of('three', 'one', 'old', 'erased'),
    never: of('never', 'other'),
    twiceOrMore: of('three', 'old', 'erased'),
    lessThanTwice: of('one', 'never', 'other'),
    inTheLastMonth: of('three', 'one', 'erased'),
    twiceInTheLastMonth: of('three', 'erased'),
  });

  // New events move contacts across the thresholds.
  await track('one', 'purchase', 1);
  await track('never', 'purchase', 1);
  expect(await matches()).toEqual({
    performed: of('three', 'one', 'old', 'erased', 'never'),
    never: of('other'),
    twiceOrMore: of('three', 'one', 'old', 'erased'),
    lessThanTwice: of('never', 'other'),
    inTheLastMonth: of('three', 'one', 'erased', 'never'),
    twiceInTheLastMonth: of('three', 'one', 'erased'),
  });

  // Retention (events older than 365 days) takes `old`'s purchases.
  expect(await retentionBatch(database.db, 'events', projectId, 365, 1000)).toBe(2);
  // Erasure removes the contact and, by cascade, its events.
  expect(await eraseContact(database.db, projectId, ids.erased)).toBeDefined();
  expect(await matches()).toEqual({
    performed: of('three', 'one', 'never'),
    never: of('old', 'other'),
    twiceOrMore: of('three', 'one'),
    lessThanTwice: of('old', 'never', 'other'),
    inTheLastMonth: of('three', 'one', 'never'),
    twiceInTheLastMonth: of('three', 'one'),
  });
});
