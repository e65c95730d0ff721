/**
 * Maintained counters without a hot row (migration `0017_counter_deltas`): `GET /contacts` totals and
 * `GET /events/names` counts are exact at every moment, before and after the worker folds the deltas; concurrent
 * folds never count a delta twice; a name whose count reaches zero disappears; deltas of a deleted project go.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { foldAllCounterDeltas, foldCounterDeltas } from '@mailroom/contacts/queries/counters';
import { createTestProject, recipient, useApiWithProject, waitFor, type TestProject } from '../support/harness';

const ctx = useApiWithProject();

const track = (p: TestProject, body: object) =>
  request(ctx.api.app).post('/v1/track').set('Authorization', `Bearer ${p.secretKey}`).send(body);
const get = (p: TestProject, path: string) => request(ctx.api.app).get(path).set('Authorization', p.auth);

async function pendingDeltas(projectId: string): Promise<number> {
  const r = await ctx.api.database.db.execute<{ n: number }>(
    sql`select ((select count(*) from contact_stat_deltas where project_id = ${projectId}::uuid)
      + (select count(*) from event_name_deltas where project_id = ${projectId}::uuid))::int as n`,
  );
  return r.rows[0].n;
}

async function totals(p: TestProject) {
  const all = (await get(p, '/contacts?limit=1')).body.data.total as number;
  const subscribed = (await get(p, '/contacts?limit=1&subscribed=true')).body.data.total as number;
  const unsubscribed = (await get(p, '/contacts?limit=1&subscribed=false')).body.data.total as number;
  const names = (await get(p, '/events/names?limit=100')).body.data.items as { name: string; count: number }[];
  return { all, subscribed, unsubscribed, names: Object.fromEntries(names.map((n) => [n.name, n.count])) };
}

async function counted(p: TestProject) {
  const r = await ctx.api.database.db.execute<{ all: number; subscribed: number }>(
    sql`select count(*)::int as all, (count(*) filter (where subscribed))::int as subscribed from contacts where project_id = ${p.id}::uuid`,
  );
  const e = await ctx.api.database.db.execute<{ name: string; n: number }>(
    sql`select name, count(*)::int as n from events where project_id = ${p.id}::uuid group by name`,
  );
  const { all, subscribed } = r.rows[0];
  return {
    all,
    subscribed,
    unsubscribed: all - subscribed,
    names: Object.fromEntries(e.rows.map((x) => [x.name, x.n])),
  };
}

describe('counters from deltas', () => {
  test('200 concurrent writers of one project: totals and event-name counts exact before any fold and after', async () => {
    const p = await createTestProject(ctx.api.database);
    const results = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        track(p, { email: recipient(`c${i % 150}`), event: i % 2 ? 'odd' : 'even', subscribed: i % 3 !== 0 }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(Array(200).fill(200));
    expect(await pendingDeltas(p.id)).toBeGreaterThan(0);
    const truth = await counted(p);
    expect(truth.names).toMatchObject({ odd: 100, even: 100 });
    expect(await totals(p)).toEqual(truth);

    // Two folds at once: each takes rows the other does not hold; nothing is counted twice.
    await Promise.all([
      foldAllCounterDeltas(ctx.api.database.db, 100, 7),
      foldAllCounterDeltas(ctx.api.database.db, 100, 7),
    ]);
    expect(await pendingDeltas(p.id)).toBe(0);
    expect(await totals(p)).toEqual(truth);
  });

  test('deletes: a contact deleted and its events gone; a name whose count reaches zero disappears, folded or not', async () => {
    const p = await createTestProject(ctx.api.database);
    const a = await track(p, { email: recipient('del-a'), event: 'only-a' });
    await track(p, { email: recipient('del-b'), event: 'shared' });
    await track(p, { email: recipient('del-c'), event: 'shared' });
    await foldAllCounterDeltas(ctx.api.database.db);
    expect((await totals(p)).names).toMatchObject({ 'only-a': 1, shared: 2 });

    const deleted = await request(ctx.api.app).delete(`/contacts/${a.body.data.contact}`).set('Authorization', p.auth);
    expect(deleted.status).toBe(200);
    // Not folded yet: the view leaves the zero-count name out and the totals follow.
    const before = await totals(p);
    expect(before).toEqual(await counted(p));
    expect(before.names).not.toHaveProperty('only-a');
    await foldAllCounterDeltas(ctx.api.database.db);
    const rows = await ctx.api.database.db.execute(
      sql`select name from event_names where project_id = ${p.id}::uuid and name = 'only-a'`,
    );
    expect(rows.rows).toEqual([]);
    expect(await totals(p)).toEqual(await counted(p));
    // The name comes back with a fresh count.
    await track(p, { email: recipient('del-d'), event: 'only-a' });
    expect((await totals(p)).names).toMatchObject({ 'only-a': 1, shared: 2 });
  });

  test('deltas of a deleted project are dropped by the fold', async () => {
    const p = await createTestProject(ctx.api.database);
    await track(p, { email: recipient('gone'), event: 'x' });
    expect(await pendingDeltas(p.id)).toBeGreaterThan(0);
    await ctx.api.database.db.execute(sql`delete from projects where id = ${p.id}::uuid`);
    await foldAllCounterDeltas(ctx.api.database.db);
    expect(await pendingDeltas(p.id)).toBe(0);
    const left = await ctx.api.database.db.execute(
      sql`select 1 from contact_stats where project_id = ${p.id}::uuid union all select 1 from event_names where project_id = ${p.id}::uuid`,
    );
    expect(left.rows).toEqual([]);
  });

  test('a fold with nothing to do folds nothing', async () => {
    await foldAllCounterDeltas(ctx.api.database.db);
    // Other test files may write at the same time in other databases only: this database is this file's own.
    expect(await foldCounterDeltas(ctx.api.database.db)).toBe(0);
  });

  test('a running worker folds the deltas within seconds', async () => {
    const p = await createTestProject(ctx.api.database);
    await Promise.all(Array.from({ length: 20 }, (_, i) => track(p, { email: recipient(`w${i}`), event: 'folded' })));
    const truth = await counted(p);
    let worker: RunningWorker | undefined;
    try {
      worker = await startWorker(ctx.api.config, { healthPort: null });
      await waitFor(async () => (await pendingDeltas(p.id)) === 0, 20_000, 'deltas folded by the worker');
    } finally {
      await worker?.stop();
    }
    const folded = await ctx.api.database.db.execute<{ total: number; subscribed: number }>(
      sql`select total::int, subscribed::int from contact_stats where project_id = ${p.id}::uuid`,
    );
    expect(folded.rows).toEqual([{ total: truth.all, subscribed: truth.subscribed }]);
    expect(await totals(p)).toEqual(truth);
  });
});
