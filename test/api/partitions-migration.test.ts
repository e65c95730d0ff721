/**
 * Migration 0018 (time partitioning) on a database that already holds history: every row is kept and lands in the
 * partition of its month, derived counts stay, and keys, cascades and the `events` statement triggers work on the
 * partitioned tables afterwards.
 */
import { sql } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { migrate } from '@mailroom/db/migrate';
import { createTestProject, isolatedDatabase } from '../support/harness';
import { fillHistory } from '../support/history-fill';

const TABLES = ['emails', 'email_events', 'events', 'webhook_deliveries', 'webhook_attempts'];

let iso: { url: string; drop: () => Promise<void> };
let database: Database;
beforeAll(async () => {
  iso = await isolatedDatabase('0017_counter_deltas');
  database = createDatabase({ url: iso.url, poolSize: 2, applicationName: 'partitions-migration-test' });
});
afterAll(async () => {
  await database.close();
  await iso.drop();
});

const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) => (await database.db.execute<T>(query)).rows;

async function snapshot(projectId: string) {
  const counts: Record<string, number> = {};
  for (const t of TABLES) counts[t] = (await q<{ n: number }>(sql`select count(*)::int as n from ${sql.identifier(t)}`))[0].n;
  const names = await q<{ name: string; count: number }>(sql`select name, count::int from event_names_now where project_id = ${projectId}::uuid order by name`);
  const digest = await q<{ d: string }>(sql`select md5(string_agg(e::text, ',' order by e.id)) as d from emails e`);
  return { counts, names, emailsDigest: digest[0].d };
}

test('the rows of a populated database move into month partitions, kept whole, with counts, keys and triggers working', async () => {
  const p = await createTestProject(database);
  await fillHistory(database.db, { projectId: p.id, contacts: 40, emails: 600, events: 900, webhookDeliveries: 120, days: 100 });
  // A timeline row with a random (v4) id, as erasure wrote them before 0018, and an event from another decade.
  const [someEmail] = await q<{ id: string }>(sql`select id from emails limit 1`);
  await database.db.execute(sql`insert into email_events (id, email_id, project_id, type) values (gen_random_uuid(), ${someEmail.id}::uuid, ${p.id}::uuid, 'cancelled')`);
  const [someContact] = await q<{ id: string }>(sql`select id from contacts where project_id = ${p.id}::uuid limit 1`);
  await database.db.execute(sql`insert into events (id, project_id, contact_id, name, created_at)
    values (mailroom_uuid_v7('1999-05-05Z'), ${p.id}::uuid, ${someContact.id}::uuid, 'ancient', '1999-05-05Z')`);
  const before = await snapshot(p.id);
  expect(before.counts).toEqual({ emails: 600, email_events: 601, events: 901, webhook_deliveries: 120, webhook_attempts: 120 });
  expect(before.names).toEqual([
    { name: 'ancient', count: 1 },
    { name: 'login', count: 300 },
    { name: 'purchase', count: 300 },
    { name: 'signup', count: 300 },
  ]);

  await migrate(iso.url);

  expect(await snapshot(p.id)).toEqual(before);
  for (const t of TABLES) {
    const [kind] = await q<{ relkind: string }>(sql`select relkind from pg_class where oid = ${t}::regclass`);
    expect(kind.relkind).toBe('p');
    // Every row of a month partition is of that month; the default partition holds only what no month covers.
    const misplaced = await q<{ part: string; n: number }>(sql`
      select tableoid::regclass::text as part, count(*)::int as n from ${sql.identifier(t)}
      where tableoid::regclass::text <> ${`${t}_default`}
        and tableoid::regclass::text <> ${t} || '_p' || to_char(to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0) at time zone 'UTC', 'YYYYMM')
      group by 1`);
    expect(misplaced).toEqual([]);
  }
  // Partitions cover the months of the rows (100 days back) and three months ahead; the odd ones sit in default.
  const months = await q<{ n: number }>(sql`select count(*)::int as n from pg_inherits where inhparent = 'events'::regclass`);
  expect(months[0].n).toBeGreaterThanOrEqual(4 + 3 + 1);
  const inDefault = await q<{ name: string }>(sql`select name from events_default`);
  expect(inDefault).toEqual([{ name: 'ancient' }]);
  expect((await q<{ n: number }>(sql`select count(*)::int as n from email_events_default`))[0].n).toBeGreaterThanOrEqual(1);

  // Statement triggers fire on the partitioned table: an insert counts, a delete uncounts, the inbox trigger runs.
  await database.db.execute(sql`insert into events (id, project_id, contact_id, name) values (mailroom_uuid_v7(now()), ${p.id}::uuid, ${someContact.id}::uuid, 'login')`);
  expect((await q<{ count: number }>(sql`select count::int from event_names_now where project_id = ${p.id}::uuid and name = 'login'`))[0].count).toBe(301);
  await database.db.execute(sql`delete from events where project_id = ${p.id}::uuid and name = 'ancient'`);
  expect(await q(sql`select 1 from event_names_now where project_id = ${p.id}::uuid and name = 'ancient'`)).toEqual([]);

  // Foreign keys to and from the partitioned tables: a duplicate id is refused, cascades reach every partition.
  await expect(database.db.execute(sql`insert into emails select * from emails where id = ${someEmail.id}::uuid`)).rejects.toMatchObject({ cause: { code: '23505' } });
  await expect(
    database.db.execute(sql`insert into email_events (id, email_id, project_id, type) values (mailroom_uuid_v7(now()), gen_random_uuid(), ${p.id}::uuid, 'x')`),
  ).rejects.toMatchObject({ cause: { code: '23503' } });
  const [contactEvents] = await q<{ n: number }>(sql`select count(*)::int as n from events where contact_id = ${someContact.id}::uuid`);
  expect(contactEvents.n).toBeGreaterThan(0);
  await database.db.execute(sql`delete from contacts where id = ${someContact.id}::uuid`);
  expect(await q(sql`select 1 from events where contact_id = ${someContact.id}::uuid`)).toEqual([]);
  expect(await q(sql`select 1 from emails where contact_id = ${someContact.id}::uuid`)).toEqual([]);
  await database.db.execute(sql`delete from projects where id = ${p.id}::uuid`);
  for (const t of TABLES) expect((await q<{ n: number }>(sql`select count(*)::int as n from ${sql.identifier(t)}`))[0].n).toBe(0);
  expect(await q(sql`select 1 from event_names_now where project_id = ${p.id}::uuid`)).toEqual([]);
});
