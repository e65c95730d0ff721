/**
 * Migrations 0018 (time partitioning) and 0020 (workflow_step_runs partitioned) on a database that already holds
 * history: every row is kept and lands in the partition of its month, derived counts stay, and keys, cascades and
 * the `events` statement triggers work on the partitioned tables afterwards.
 */
import { sql } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { migrate } from '@mailroom/db/migrate';
import { newId } from '@mailroom/platform/ids';
import { isolatedDatabase } from '../support/harness';
import { fillHistory } from '../support/history-fill';
import { stepRunId } from '@mailroom/workflows/queries/workflow-engine';

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

const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await database.db.execute<T>(query)).rows;

/** The columns of `emails` when the test starts: later migrations add columns, which the digest must not see. */
let emailColumns: string[] | undefined;

async function snapshot(projectId: string) {
  emailColumns ??= (
    await q<{ c: string }>(
      sql`select column_name as c from information_schema.columns where table_name = 'emails' and table_schema = 'public' order by ordinal_position`,
    )
  ).map((r) => r.c);
  const row = sql.join(
    emailColumns.map((c) => sql`e.${sql.identifier(c)}`),
    sql`, `,
  );
  const counts: Record<string, number> = {};
  for (const t of TABLES)
    counts[t] = (await q<{ n: number }>(sql`select count(*)::int as n from ${sql.identifier(t)}`))[0].n;
  const names = await q<{ name: string; count: number }>(
    sql`select name, count::int from event_names_now where project_id = ${projectId}::uuid order by name`,
  );
  const digest = await q<{ d: string }>(
    sql`select md5(string_agg(row(${row})::text, ',' order by e.id)) as d from emails e`,
  );
  return { counts, names, emailsDigest: digest[0].d };
}

test('the rows of a populated database move into month partitions, kept whole, with counts, keys and triggers working', async () => {
  // The project as a 0017 schema holds it (today's insert names columns added by later migrations).
  const p = { id: newId() };
  await database.db.execute(sql`insert into projects (id, name) values (${p.id}::uuid, 'partitions migration')`);
  await fillHistory(database.db, {
    projectId: p.id,
    contacts: 40,
    emails: 600,
    events: 900,
    webhookDeliveries: 120,
    days: 100,
  });
  // A timeline row with a random (v4) id, as erasure wrote them before 0018, and an event from another decade.
  const [someEmail] = await q<{ id: string }>(sql`select id from emails limit 1`);
  await database.db.execute(
    sql`insert into email_events (id, email_id, project_id, type) values (gen_random_uuid(), ${someEmail.id}::uuid, ${p.id}::uuid, 'cancelled')`,
  );
  const [someContact] = await q<{ id: string }>(sql`select id from contacts where project_id = ${p.id}::uuid limit 1`);
  await database.db.execute(sql`insert into events (id, project_id, contact_id, name, created_at)
    values (mailroom_uuid_v7('1999-05-05Z'), ${p.id}::uuid, ${someContact.id}::uuid, 'ancient', '1999-05-05Z')`);
  const before = await snapshot(p.id);
  expect(before.counts).toEqual({
    emails: 600,
    email_events: 601,
    events: 901,
    webhook_deliveries: 120,
    webhook_attempts: 120,
  });
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
  const months = await q<{ n: number }>(
    sql`select count(*)::int as n from pg_inherits where inhparent = 'events'::regclass`,
  );
  expect(months[0].n).toBeGreaterThanOrEqual(4 + 3 + 1);
  const inDefault = await q<{ name: string }>(sql`select name from events_default`);
  expect(inDefault).toEqual([{ name: 'ancient' }]);
  expect(
    (await q<{ n: number }>(sql`select count(*)::int as n from email_events_default`))[0].n,
  ).toBeGreaterThanOrEqual(1);

  // Statement triggers fire on the partitioned table: an insert counts, a delete uncounts, the inbox trigger runs.
  await database.db.execute(
    sql`insert into events (id, project_id, contact_id, name) values (mailroom_uuid_v7(now()), ${p.id}::uuid, ${someContact.id}::uuid, 'login')`,
  );
  expect(
    (
      await q<{ count: number }>(
        sql`select count::int from event_names_now where project_id = ${p.id}::uuid and name = 'login'`,
      )
    )[0].count,
  ).toBe(301);
  await database.db.execute(sql`delete from events where project_id = ${p.id}::uuid and name = 'ancient'`);
  expect(await q(sql`select 1 from event_names_now where project_id = ${p.id}::uuid and name = 'ancient'`)).toEqual([]);

  // Foreign keys to and from the partitioned tables: a duplicate id is refused, cascades reach every partition.
  await expect(
    database.db.execute(sql`insert into emails select * from emails where id = ${someEmail.id}::uuid`),
  ).rejects.toMatchObject({ cause: { code: '23505' } });
  await expect(
    database.db.execute(
      sql`insert into email_events (id, email_id, project_id, type) values (mailroom_uuid_v7(now()), gen_random_uuid(), ${p.id}::uuid, 'x')`,
    ),
  ).rejects.toMatchObject({ cause: { code: '23503' } });
  const [contactEvents] = await q<{ n: number }>(
    sql`select count(*)::int as n from events where contact_id = ${someContact.id}::uuid`,
  );
  expect(contactEvents.n).toBeGreaterThan(0);
  await database.db.execute(sql`delete from contacts where id = ${someContact.id}::uuid`);
  expect(await q(sql`select 1 from events where contact_id = ${someContact.id}::uuid`)).toEqual([]);
  expect(await q(sql`select 1 from emails where contact_id = ${someContact.id}::uuid`)).toEqual([]);
  await database.db.execute(sql`delete from projects where id = ${p.id}::uuid`);
  for (const t of TABLES)
    expect((await q<{ n: number }>(sql`select count(*)::int as n from ${sql.identifier(t)}`))[0].n).toBe(0);
  expect(await q(sql`select 1 from event_names_now where project_id = ${p.id}::uuid`)).toEqual([]);
});

test('0020: the step runs of a populated database move into month partitions, kept whole, ids unchanged, keys working', async () => {
  const iso19 = await isolatedDatabase('0019_segment_event_index');
  const db19 = createDatabase({ url: iso19.url, poolSize: 2, applicationName: 'partitions-migration-test' });
  try {
    const q19 = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
      (await db19.db.execute<T>(query)).rows;
    // The project as a 0019 schema holds it (today's insert names columns added by later migrations).
    const p = { id: newId(), domain: 'partitions.example.com' };
    await db19.db.execute(sql`insert into projects (id, name) values (${p.id}::uuid, 'partitions migration')`);
    const [c] = await q19<{ id: string }>(sql`
      insert into contacts (id, project_id, email, email_key, subscribed) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'a@b.test', 'a@b.test', true) returning id`);
    const [w] = await q19<{ id: string }>(sql`
      insert into workflows (id, project_id, name, trigger_type, trigger_event) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'wf', 'EVENT', 'signup') returning id`);
    // A live execution started 70 days ago with runs since, a finished one, and a run with a random (v4) id.
    const x = async (daysAgo: number, status: string, key: string) =>
      (
        await q19<{ id: string }>(sql`
      insert into workflow_executions (id, project_id, workflow_id, contact_id, status, entry_key, created_at)
      values (mailroom_uuid_v7(now() - make_interval(days => ${daysAgo})), ${p.id}::uuid, ${w.id}::uuid, ${c.id}::uuid, ${status}, ${key}, now() - make_interval(days => ${daysAgo}))
      returning id`)
      )[0].id;
    const live = await x(70, 'WAITING', 'live');
    const done = await x(20, 'COMPLETED', 'done');
    const run = (
      execution: string,
      version: number,
      daysAgo: number,
      id = sql`mailroom_uuid_v7(now() - make_interval(days => ${daysAgo}))`,
    ) =>
      db19.db.execute(sql`
      insert into workflow_step_runs (id, execution_id, project_id, step_type, version, status, started_at)
      values (${id}, ${execution}::uuid, ${p.id}::uuid, 'DELAY', ${version}, 'COMPLETED', now() - make_interval(days => ${daysAgo}))`);
    for (const [v, d] of [
      [0, 70],
      [1, 40],
      [2, 10],
    ])
      await run(live, v, d);
    await run(done, 0, 20);
    await run(done, 1, 19, sql`gen_random_uuid()`);
    const [linked] = await q19<{ id: string }>(
      sql`select id from workflow_step_runs where execution_id = ${done}::uuid and version = 0`,
    );
    await db19.db
      .execute(sql`insert into emails (id, project_id, source, to_email, from_email, subject, body, body_format, status, workflow_step_run_id)
      values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'workflow', 'a@b.test', ${`a@${p.domain}`}, 's', 'b', 'html', 'sent', ${linked.id}::uuid)`);
    const digest = async () =>
      (
        await q19<{ d: string; n: number }>(
          sql`select md5(string_agg(r::text, ',' order by r.id)) as d, count(*)::int as n from workflow_step_runs r`,
        )
      )[0];
    const before = await digest();
    expect(before.n).toBe(5);

    await migrate(iso19.url);

    expect(await digest()).toEqual(before);
    expect(
      (await q19<{ relkind: string }>(sql`select relkind from pg_class where oid = 'workflow_step_runs'::regclass`))[0]
        .relkind,
    ).toBe('p');
    const misplaced = await q19(sql`
      select tableoid::regclass::text as part from workflow_step_runs
      where tableoid::regclass::text <> 'workflow_step_runs_default'
        and tableoid::regclass::text <> 'workflow_step_runs_p' || to_char(mailroom_uuid_v7_time(id) at time zone 'UTC', 'YYYYMM')`);
    expect(misplaced).toEqual([]);
    // Months from the live execution's start to three months ahead.
    const months = (
      await q19<{ name: string }>(sql`select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid
      where i.inhparent = 'workflow_step_runs'::regclass and c.relname <> 'workflow_step_runs_default'`)
    ).map((r) => r.name);
    const ym = (daysAgo: number, ahead = 0) => {
      const d = new Date(Date.now() - daysAgo * 86_400_000);
      const m = new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + ahead, 1));
      return `workflow_step_runs_p${m.toISOString().slice(0, 7).replace('-', '')}`;
    };
    expect(months).toEqual(expect.arrayContaining([ym(70), ym(0), ym(0, 3)]));
    // The next run of the live execution gets its derived id, in the month the execution started; a second insert
    // of it conflicts on the primary key, and (execution, version) is a plain index now.
    const next = stepRunId(live, 3);
    const insertNext = sql`insert into workflow_step_runs (id, execution_id, project_id, step_type, version, status)
      values (${next}::uuid, ${live}::uuid, ${p.id}::uuid, 'DELAY', 3, 'RUNNING')`;
    await db19.db.execute(insertNext);
    expect(
      (
        await q19<{ part: string }>(
          sql`select tableoid::regclass::text as part from workflow_step_runs where id = ${next}::uuid`,
        )
      )[0].part,
    ).toBe(ym(70));
    await expect(db19.db.execute(insertNext)).rejects.toMatchObject({ cause: { code: '23505' } });
    expect(
      (
        await q19<{ u: boolean }>(
          sql`select indisunique as u from pg_index where indexrelid = 'workflow_step_runs_version_idx'::regclass`,
        )
      )[0].u,
    ).toBe(false);
    // Foreign keys: an email's run link is unset when the run goes (cascade from its execution); a run needs its execution.
    await db19.db.execute(sql`delete from workflow_executions where id = ${done}::uuid`);
    expect(await q19(sql`select 1 from workflow_step_runs where execution_id = ${done}::uuid`)).toEqual([]);
    expect(await q19(sql`select workflow_step_run_id from emails where source = 'workflow'`)).toEqual([
      { workflow_step_run_id: null },
    ]);
    await expect(
      db19.db.execute(
        sql`insert into workflow_step_runs (id, execution_id, project_id, step_type, version, status) values (mailroom_uuid_v7(now()), gen_random_uuid(), ${p.id}::uuid, 'DELAY', 0, 'RUNNING')`,
      ),
    ).rejects.toMatchObject({ cause: { code: '23503' } });
  } finally {
    await db19.close();
    await iso19.drop();
  }
});
