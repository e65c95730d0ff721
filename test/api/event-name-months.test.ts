/**
 * Event counts per month partition (migration `0021_event_name_months`): the deltas that keep `event_names` carry the
 * month of their events' ids, the fold keeps `event_name_months` exact (inserts, deletes, cascades, concurrent folds,
 * a name reaching zero), and dropping a month partition lowers both counters by that month's counts, folded or not.
 */
import { sql } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { ensureMonthPartitions } from '@mailroom/retention/queries/partitions';
import { foldAllCounterDeltas } from '@mailroom/contacts/queries/counters';
import { runRetentionPass } from '@mailroom/retention/retention';
import { createTestProject, recipient, useIsolatedApi } from '../support/harness';

const ctx = useIsolatedApi();

const deps = () => ({
  config: ctx.api.config,
  database: ctx.api.database,
  logger: createLogger(ctx.api.config, 'test'),
});
const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await ctx.api.database.db.execute<T>(query)).rows;
const utc = (y: number, m: number, d = 1) => Date.UTC(y, m - 1, d);
const iso = (ms: number) => new Date(ms).toISOString();

async function contactOf(projectId: string, name: string): Promise<string> {
  const [c] = await q<{ id: string }>(sql`
    insert into contacts (id, project_id, email, email_key, subscribed) values (mailroom_uuid_v7(now()), ${projectId}::uuid, ${recipient(name)}, ${recipient(name)}, true)
    returning id`);
  return c.id;
}

/** Inserts events of `name` at each time (ms) in one statement. */
async function track(projectId: string, contactId: string, name: string, times: number[]): Promise<void> {
  await ctx.api.database.db.execute(sql`insert into events (id, project_id, contact_id, name, created_at)
    select mailroom_uuid_v7(t), ${projectId}::uuid, ${contactId}::uuid, ${name}, t from unnest(${`{${times.map(iso).join(',')}}`}::timestamptz[]) t`);
}

/** `name month: count` from the events themselves (the month of each id), and as the counters say, with and without pending deltas. */
async function months(projectId: string) {
  const line = (rows: { name: string; month: string; n: number }[]) =>
    Object.fromEntries(rows.map((r) => [`${r.name} ${r.month}`, r.n]));
  const truth = line(
    await q(sql`select name, to_char(date_trunc('month', mailroom_uuid_v7_time(id) at time zone 'UTC'), 'YYYY-MM') as month, count(*)::int as n
    from events where project_id = ${projectId}::uuid group by 1, 2`),
  );
  const folded = line(
    await q(
      sql`select name, to_char(month, 'YYYY-MM') as month, count::int as n from event_name_months where project_id = ${projectId}::uuid`,
    ),
  );
  const now = line(
    await q(sql`select name, to_char(month, 'YYYY-MM') as month, sum(count)::int as n from (
      select name, month, count from event_name_months where project_id = ${projectId}::uuid
      union all select name, month, count from event_name_deltas where project_id = ${projectId}::uuid) c
    group by 1, 2 having sum(count) <> 0`),
  );
  return { truth, folded, now };
}

test('deltas carry the month of their ids; the fold keeps per-month counts exact through deletes, cascades and concurrent folds', async () => {
  const p = await createTestProject(ctx.api.database);
  const a = await contactOf(p.id, 'enm-a');
  const b = await contactOf(p.id, 'enm-b');
  const lastMsOfJan = utc(2027, 2) - 1;
  await track(p.id, a, 'login', [utc(2027, 1, 3), lastMsOfJan, utc(2027, 2), utc(2027, 3, 9)]);
  await track(p.id, b, 'login', [utc(2027, 1, 20), utc(2027, 3, 1)]);
  await track(p.id, b, 'purchase', [utc(2027, 2, 14)]);

  let m = await months(p.id);
  expect(m.truth).toEqual({ 'login 2027-01': 3, 'login 2027-02': 1, 'login 2027-03': 2, 'purchase 2027-02': 1 });
  expect(m.now).toEqual(m.truth); // exact before any fold: the pending deltas say it
  const deltas = await q<{ month: string | null }>(
    sql`select to_char(month, 'YYYY-MM-DD') as month from event_name_deltas where project_id = ${p.id}::uuid`,
  );
  expect(deltas.every((d) => d.month !== null && d.month.endsWith('-01'))).toBe(true);

  // Two folds at once, small batches: nothing counted twice.
  await Promise.all([
    foldAllCounterDeltas(ctx.api.database.db, 100, 2),
    foldAllCounterDeltas(ctx.api.database.db, 100, 2),
  ]);
  m = await months(p.id);
  expect(m.folded).toEqual(m.truth);

  // A delete statement, and a contact deleted (its events go by cascade): the months follow; a month or name that
  // reaches zero is gone from the counters.
  await ctx.api.database.db.execute(
    sql`delete from events where project_id = ${p.id}::uuid and name = 'login' and id < mailroom_uuid_v7_floor(${iso(utc(2027, 1, 10))}::timestamptz)`,
  );
  await ctx.api.database.db.execute(sql`delete from contacts where id = ${b}::uuid`);
  m = await months(p.id);
  expect(m.now).toEqual({ 'login 2027-01': 1, 'login 2027-02': 1, 'login 2027-03': 1 });
  await foldAllCounterDeltas(ctx.api.database.db);
  m = await months(p.id);
  expect(m.folded).toEqual(m.truth);
  expect(m.folded).toEqual({ 'login 2027-01': 1, 'login 2027-02': 1, 'login 2027-03': 1 });
  expect(await q(sql`select name, count::int from event_names where project_id = ${p.id}::uuid`)).toEqual([
    { name: 'login', count: 3 },
  ]);
});

test('dropping a month partition lowers event_names and event_name_months by that month, counts folded or still pending', async () => {
  const p = await createTestProject(ctx.api.database);
  const c = await contactOf(p.id, 'enm-drop');
  await ensureMonthPartitions(ctx.api.database.db, 'events', utc(2002, 1), utc(2002, 4));
  // January: folded, then more arrive and stay pending. February: pending only. March is past retention too.
  await track(p.id, c, 'view', [utc(2002, 1, 2), utc(2002, 1, 3)]);
  await track(p.id, c, 'buy', [utc(2002, 1, 4)]);
  await foldAllCounterDeltas(ctx.api.database.db);
  await track(p.id, c, 'view', [utc(2002, 1, 30)]);
  await track(p.id, c, 'view', [utc(2002, 2, 2), utc(2002, 2, 3)]);
  await track(p.id, c, 'view', [Date.now()]);
  // A negative delta of January pending as well: one of its views deleted after the fold.
  await ctx.api.database.db.execute(
    sql`delete from events where project_id = ${p.id}::uuid and created_at = ${iso(utc(2002, 1, 2))}::timestamptz`,
  );
  expect((await months(p.id)).now).toMatchObject({ 'view 2002-01': 2, 'buy 2002-01': 1, 'view 2002-02': 2 });

  const r = await runRetentionPass(deps(), { maxBatches: 0 });
  expect(r.partitionsDropped).toEqual(expect.arrayContaining(['events_p200201', 'events_p200202', 'events_p200203']));
  expect(r.partitionMs).toBeGreaterThan(0);

  let m = await months(p.id);
  expect(m.truth).toEqual({ [`view ${iso(Date.now()).slice(0, 7)}`]: 1 });
  expect(m.now).toEqual(m.truth);
  const names = () =>
    q(sql`select name, count::int from event_names_now where project_id = ${p.id}::uuid order by name`);
  expect(await names()).toEqual([{ name: 'view', count: 1 }]);
  await foldAllCounterDeltas(ctx.api.database.db);
  m = await months(p.id);
  expect(m.folded).toEqual(m.truth);
  expect(await q(sql`select name, count::int from event_names where project_id = ${p.id}::uuid order by name`)).toEqual(
    [{ name: 'view', count: 1 }],
  );
  expect(await names()).toEqual([{ name: 'view', count: 1 }]);
});
