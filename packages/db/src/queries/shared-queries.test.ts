/**
 * Shared queries of `packages/db` against a real Postgres (the test run's database): the keyset page of the list
 * endpoints (`keyset.ts`), LIKE patterns matched by Postgres (`like.ts`), and named statements prepared once per
 * connection (`named.ts`).
 */
import { randomBytes } from 'node:crypto';
import { and, eq, like, sql } from 'drizzle-orm';
import { emailKey, normalizeEmail } from '@mailroom/platform/address';
import { createDatabase, type Database } from '../client';
import { contacts } from '../schema/contacts';
import { projects } from '../schema/projects';
import { keysetList } from './keyset';
import { likePattern } from './like';
import { executeNamed, executeNamedText, executeTemplate, namedTemplate } from './named';

let database: Database;
/** One connection: the named statements of `named.ts` are per connection. */
let single: Database;
let projectId: string;
/** The project's contact ids, newest first (the keyset order: id descending). */
let ids: string[];

beforeAll(async () => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 2, applicationName: 'test-db-shared' });
  single = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 1, applicationName: 'test-db-named' });
  // A bare project row: keys and their administration belong to packages/projects.
  const [project] = await database.db
    .insert(projects)
    .values({ name: `db ${randomBytes(3).toString('hex')}` })
    .returning({ id: projects.id });
  projectId = project.id;
  const emails = [
    '50%_off@x.test',
    '50xyoff@x.test',
    'a\\b@x.test',
    ...Array.from({ length: 7 }, (_, i) => `c${i}@x.test`),
  ];
  // Bare contact rows (the merge rule that upserts them belongs to the owners' queries).
  const made = await database.db
    .insert(contacts)
    .values(
      emails.map((email) => ({ projectId, email: normalizeEmail(email), emailKey: emailKey(email), subscribed: true })),
    )
    .returning({ id: contacts.id });
  ids = made.map((c) => c.id).sort((a, b) => (a < b ? 1 : -1));
});
afterAll(async () => {
  await single?.close();
  await database?.close();
});

const ofProject = () => eq(contacts.projectId, projectId);

describe('keysetList', () => {
  test('pages newest first after the cursor, says whether more follow, and counts every match', async () => {
    const first = await keysetList(database.db, contacts, ofProject(), { limit: 4 });
    expect(first.items.map((c) => c.id)).toEqual(ids.slice(0, 4));
    expect(first).toMatchObject({ hasMore: true, total: 10, totalExact: true });
    const second = await keysetList(database.db, contacts, ofProject(), { limit: 4, beforeId: ids[3] });
    expect(second.items.map((c) => c.id)).toEqual(ids.slice(4, 8));
    const last = await keysetList(database.db, contacts, ofProject(), { limit: 4, beforeId: ids[7] });
    expect(last.items.map((c) => c.id)).toEqual(ids.slice(8));
    expect(last).toMatchObject({ hasMore: false, total: 10 });
  });

  test('an offset skips rows (page numbers); a count cap gives a lower bound and says so', async () => {
    const paged = await keysetList(database.db, contacts, ofProject(), { limit: 3, offset: 6 });
    expect(paged.items.map((c) => c.id)).toEqual(ids.slice(6, 9));
    expect(paged.hasMore).toBe(true);
    expect(await keysetList(database.db, contacts, ofProject(), { limit: 2, countCap: 5 })).toMatchObject({
      total: 5,
      totalExact: false,
    });
    expect(await keysetList(database.db, contacts, ofProject(), { limit: 2, countCap: 10 })).toMatchObject({
      total: 10,
      totalExact: true,
    });
  });

  test('the filter narrows both the page and the count', async () => {
    const page = await keysetList(database.db, contacts, and(ofProject(), like(contacts.email, 'c%')), { limit: 50 });
    expect(page.items).toHaveLength(7);
    expect(page).toMatchObject({ hasMore: false, total: 7 });
  });
});

test("Postgres matches a likePattern's %, _ and \\ literally", async () => {
  const match = async (text: string, mode?: 'contains' | 'startsWith' | 'endsWith') =>
    (
      await database.db
        .select({ email: contacts.email })
        .from(contacts)
        .where(and(ofProject(), like(contacts.email, likePattern(text, mode))))
    )
      .map((r) => r.email)
      .sort();
  // Unescaped, `50%_off` would also match `50xyoff`.
  expect(await match('50%_off')).toEqual(['50%_off@x.test']);
  expect(await match('a\\b', 'startsWith')).toEqual(['a\\b@x.test']);
  expect(await match('_off@x.test', 'endsWith')).toEqual(['50%_off@x.test']);
});

describe('named statements', () => {
  const prepared = async () =>
    (
      await single.db.execute<{ name: string; statement: string }>(
        sql`select name, statement from pg_prepared_statements where name like 'mr\\_%' or name like 'test\\_db\\_%'`,
      )
    ).rows;

  test('one text is prepared once per connection under a digest name, and answers as db.execute would', async () => {
    const query = (n: number) =>
      sql`select count(*)::int as n from contacts where project_id = ${projectId}::uuid and ${n} > 0`;
    const a = await executeNamed<{ n: number }>(single.db, query(1));
    const b = await executeNamed<{ n: number }>(single.db, query(2));
    expect(a.rows).toEqual([{ n: 10 }]);
    expect(b.rows).toEqual([{ n: 10 }]);
    expect((await single.db.execute<{ n: number }>(query(1))).rows).toEqual(a.rows);
    const named = (await prepared()).filter((s) => s.statement.includes('from contacts where project_id'));
    expect(named).toHaveLength(1);
    expect(named[0].name).toMatch(/^mr_[0-9a-f]{24}$/);
    // Another text, another name.
    await executeNamed(single.db, sql`select ${projectId}::uuid as id`);
    expect((await prepared()).filter((s) => s.name.startsWith('mr_')).length).toBeGreaterThanOrEqual(2);
  });

  test('a fixed text runs under the name given, an array being one parameter', async () => {
    const name = `test_db_${randomBytes(4).toString('hex')}`;
    const text = 'select count(*)::int as n from contacts where project_id = $1 and email = any($2::text[])';
    const r = await executeNamedText<{ n: number }>(single.db, name, text, [projectId, ['c0@x.test', 'c1@x.test']]);
    expect(r.rows).toEqual([{ n: 2 }]);
    await executeNamedText(single.db, name, text, [projectId, []]);
    expect((await prepared()).filter((s) => s.name === name)).toHaveLength(1);
  });

  test('a template is built once: its placeholders take the values of each call, its other values stay fixed', async () => {
    const template = namedTemplate(
      sql`select count(*)::int as n from contacts where project_id = ${sql.placeholder('project')}::uuid
        and email = any(${sql.placeholder('emails')}::text[]) and ${7} > 0`,
    );
    expect(template.name).toMatch(/^mr_[0-9a-f]{24}$/);
    expect(template.slots).toEqual([{ key: 'project' }, { key: 'emails' }, { value: 7 }]);
    const run = (emails: string[]) =>
      executeTemplate<{ n: number }>(single.db, template, { project: projectId, emails });
    expect((await run(['c0@x.test', 'c1@x.test', 'c2@x.test'])).rows).toEqual([{ n: 3 }]);
    expect((await run([])).rows).toEqual([{ n: 0 }]);
    expect((await prepared()).filter((s) => s.name === template.name)).toHaveLength(1);
    await expect(executeTemplate(single.db, template, { project: projectId })).rejects.toThrow(/emails/);
  });
});
