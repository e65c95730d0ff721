/**
 * The audience API on a real database (the test run's, `TEST_DATABASE_URL`): each audience type's predicate
 * selects exactly its contacts, with the paged list and the count agreeing, and a campaign's audience resolves the
 * same way.
 */
import { normalizeEmail } from '@mailroom/platform/address';
import { randomBytes } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { newId } from '@mailroom/platform/ids';
import { parseSegmentFilter } from '../filter-parser';
import { compileAudience, segmentAudience, type Audience } from '../audience';
import { campaignAudiencePredicate } from '@mailroom/campaigns/fanout';
import { audiencePredicate } from './audience';
import { changeStaticMembers, countMatchingContacts, createSegment, listMatchingContacts } from './segments';
import type { CampaignRow } from '@mailroom/campaigns/queries/campaigns';

let database: Database;
let projectId: string;
const ids: Record<string, string> = {};

beforeAll(async () => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 2, applicationName: 'audience-test' });
  projectId = (await createProject(database.db, `audience ${randomBytes(3).toString('hex')}`)).id;
  const rows = await upsertContacts(database.db, projectId, [
    { email: normalizeEmail('pro1@x.test'), defaultSubscribed: true, data: { plan: 'pro', seats: 10 } },
    { email: normalizeEmail('pro2@x.test'), defaultSubscribed: false, data: { plan: 'pro', seats: 2 } },
    { email: normalizeEmail('free@x.test'), defaultSubscribed: true, data: { plan: 'free' } },
    { email: normalizeEmail('none@x.test'), defaultSubscribed: true },
  ]);
  for (const r of rows) ids[r.email.split('@')[0]] = r.id;
});

afterAll(() => database.close());

/** The tags (local parts) of the project's contacts a predicate over `contacts` selects, and their count. */
async function selected(predicate: SQL): Promise<{ tags: string[]; count: number }> {
  const page = await listMatchingContacts(database.db, projectId, predicate, { limit: 50 });
  const counted = await countMatchingContacts(database.db, projectId, predicate);
  return { tags: page.items.map((c) => c.email.split('@')[0]).sort(), count: counted.count };
}

const now = () => ({ now: Date.now() });
const proFilter = parseSegmentFilter([{ field: 'data.plan', operator: 'equals', value: 'pro' }], 'filter');

test('ALL: every contact of the project', async () => {
  expect(await selected(compileAudience(projectId, { type: 'ALL' }, now()))).toEqual({
    tags: ['free', 'none', 'pro1', 'pro2'],
    count: 4,
  });
});

test('FILTERED: the contacts the parsed filter matches', async () => {
  expect(await selected(compileAudience(projectId, { type: 'FILTERED', filter: proFilter }, now()))).toEqual({
    tags: ['pro1', 'pro2'],
    count: 2,
  });
  const seats = parseSegmentFilter([{ field: 'data.seats', operator: 'greaterThan', value: 5 }], 'filter');
  expect(await selected(compileAudience(projectId, { type: 'FILTERED', filter: seats }, now()))).toEqual({
    tags: ['pro1'],
    count: 1,
  });
});

test('SEGMENT: a DYNAMIC segment by its filter, a STATIC one by its members; STATIC directly; a missing one is undefined', async () => {
  const dynamic = await createSegment(database.db, projectId, {
    name: `dyn ${newId()}`,
    type: 'DYNAMIC',
    filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }],
  });
  const fixed = await createSegment(database.db, projectId, { name: `static ${newId()}`, type: 'STATIC' });
  await changeStaticMembers(database.db, fixed, 'add', { contactIds: [ids.free, ids.none] });

  const of = async (audience: Audience) =>
    selected((await audiencePredicate(database.db, projectId, audience, now()))!);
  expect(await of({ type: 'SEGMENT', segmentId: dynamic.id })).toEqual({ tags: ['pro1', 'pro2'], count: 2 });
  expect(await of({ type: 'SEGMENT', segmentId: fixed.id })).toEqual({ tags: ['free', 'none'], count: 2 });
  expect(await of({ type: 'STATIC', segmentId: fixed.id })).toEqual({ tags: ['free', 'none'], count: 2 });
  expect(segmentAudience(dynamic)).toEqual({ type: 'FILTERED', filter: proFilter });
  expect(
    await audiencePredicate(database.db, projectId, { type: 'SEGMENT', segmentId: newId() }, now()),
  ).toBeUndefined();
});

test("a campaign's audience: its type's predicate over contacts c, or why it has none", async () => {
  const campaign = (c: Partial<CampaignRow>) =>
    ({
      projectId,
      startedAt: new Date(),
      audienceType: 'ALL',
      segmentId: null,
      audienceFilter: null,
      ...c,
    }) as CampaignRow;
  const tagsOf = async (c: CampaignRow) => {
    const predicate = await campaignAudiencePredicate(database.db, c);
    if (typeof predicate === 'string') return predicate;
    const rows = await database.db.execute<{ email: string }>(
      sql`select email from contacts c where c.project_id = ${projectId}::uuid and ${predicate} order by email`,
    );
    return rows.rows.map((r) => r.email.split('@')[0]);
  };
  expect(await tagsOf(campaign({ audienceType: 'ALL' }))).toEqual(['free', 'none', 'pro1', 'pro2']);
  expect(
    await tagsOf(
      campaign({
        audienceType: 'FILTERED',
        audienceFilter: [{ field: 'data.plan', operator: 'equals', value: 'free' }],
      }),
    ),
  ).toEqual(['free']);
  expect(await tagsOf(campaign({ audienceType: 'SEGMENT', segmentId: newId() }))).toBe(
    "the campaign's segment was deleted",
  );
  expect(await tagsOf(campaign({ audienceType: 'SEGMENT', segmentId: null }))).toBe(
    "the campaign's segment was deleted",
  );
});

test('number comparisons on data select exactly what comparing `(data #> path)::numeric` of JSON numbers selected', async () => {
  const p = (await createProject(database.db, `numbers ${randomBytes(3).toString('hex')}`)).id;
  const values: unknown[] = [
    10,
    5,
    5.5,
    -3,
    0,
    1e20,
    123456789012345680000,
    '10',
    '',
    true,
    false,
    null,
    [10],
    [[10]],
    { x: 10 },
  ];
  const docs: Record<string, unknown>[] = [
    ...values.map((n) => ({ n })),
    ...values.map((b) => ({ a: { b } })),
    { a: [{ b: 10 }] },
    { a: 10 },
    { 'q"k\\': 10, é: 10, '🙂': 10 },
    { items: [10, 1] },
    { items: { 0: 10 } },
    {},
  ];
  await upsertContacts(
    database.db,
    p,
    docs.map((data, i) => ({ email: normalizeEmail(`n${i}@x.test`), defaultSubscribed: true, data })),
  );
  const ops = { greaterThan: '>', lessThan: '<', greaterThanOrEqual: '>=', lessThanOrEqual: '<=' } as const;
  const tagsOf = async (predicate: SQL) => {
    const rows = await database.db.execute<{ email: string }>(
      sql`select email from contacts where project_id = ${p}::uuid and ${predicate} order by email`,
    );
    return rows.rows.map((r) => r.email);
  };
  let compared = 0;
  for (const field of ['data.n', 'data.a.b', 'data.q"k\\', 'data.é', 'data.🙂', 'data.items.0', 'data.missing']) {
    const path = field.slice('data.'.length).split('.');
    for (const [operator, op] of Object.entries(ops)) {
      for (const value of [5, 0, -3, 10, 1e20, 5.25]) {
        const filter = parseSegmentFilter([{ field, operator, value }], 'filter');
        const at = sql`(contacts.data #> ${sql.param(path)}::text[])`;
        const before = sql`coalesce((case when jsonb_typeof(${at}) = 'number' then ${at}::numeric end) ${sql.raw(op)} ${value}::numeric, false)`;
        const expected = await tagsOf(before);
        expect({
          field,
          operator,
          value,
          tags: await tagsOf(compileAudience(p, { type: 'FILTERED', filter }, now())),
        }).toEqual({ field, operator, value, tags: expected });
        if (expected.length > 0) compared++;
      }
    }
  }
  // The cases are not vacuous: most of them select someone.
  expect(compared).toBeGreaterThan(60);
});
