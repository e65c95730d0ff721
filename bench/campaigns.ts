/**
 * Campaigns and segments at scale (`npm run bench -- campaigns`), with BENCH_CAMPAIGN_CONTACTS (default
 * 1,000,000) subscribed contacts in one project (1 in 7 on `plan: "pro"`, 1 in 10 with 1–3 `purchase` events):
 *
 * - `POST /segments/preview` latency (count and a 10-contact sample) for a `data.*` filter, an `event.*` filter
 *   (performed) and an event count filter;
 * - a campaign to ALL: time from `POST /campaigns/{id}/send` to every recipient queued (fan-out done), the send
 *   queue's size meanwhile (the window), and the peak RSS of the worker (VmHWM);
 * - `GET /campaigns/{id}/stats` latency at that size (the first call, then the median of 5 more); the cancel
 *   request's latency (it cancels the queued window) and the time until the worker has cancelled every remaining
 *   email; CPU seconds of the worker process and of the database's Postgres backends (bench/cpu.ts) during the
 *   fan-out and during the sweep.
 *
 * API and worker run in their own processes. SES is the emulator at the default 14/s: the benchmark measures
 * the fan-out, not sending.
 *
 * BENCH_CAMPAIGNS_ONLY=preview stops after the previews; BENCH_EXPLAIN=dir writes there the plans
 * (`EXPLAIN (ANALYZE, BUFFERS)`) of each preview's count and sample queries, the same statements the route runs. With BENCH_KEEP_DATABASE=1 (bench/run.ts) the seeded
 * project of an earlier run with the same size is reused (a new key is issued for it) instead of seeding again.
 *
 * Before/after in one run: `BENCH_CAMPAIGNS_B_DIR=/path/to/checkout[,/another]` (each an `npm install`ed checkout,
 * e.g. a `git worktree` of an older commit) runs every measure on those checkouts too, alternating, see
 * {@link benchCampaigns}; the rows then carry the side and round, and a last table puts the medians side by side.
 */
import { spawn, spawnSync } from 'node:child_process';
import { sql } from 'drizzle-orm';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue } from '@mailroom/queues/create';
import { type Config } from '@mailroom/config/config';
import { rotateKeys } from '@mailroom/projects/queries/projects';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { compileAudience } from '@mailroom/audiences/audience';
import { COUNT_SETTINGS, matchingCountQuery, matchingPageQuery } from '@mailroom/audiences/queries/segments';
import { createDatabase, type Database } from '@mailroom/db/client';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { dropDatabase, freePort, waitForHttp } from '../test/support/services';
import { apiCaller } from './http';
import { BackendCpu, memory, processCpuMs } from './cpu';
import { benchQueuePrefix } from './queue-prefix';

type Spawn = (file: string, env: Record<string, string>) => import('node:child_process').ChildProcess;
type Row = Record<string, string | number>;

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const ms = (t: number) => Number((performance.now() - t).toFixed(1));

/** 1 in 7 contacts on `plan: "pro"`, `score` 0–99, 1 in 10 with 1–3 `purchase` events; then VACUUM ANALYZE. */
async function seed(database: Database, projectId: string, count: number): Promise<void> {
  const { db } = database;
  await db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select mailroom_uuid_v7(now() + make_interval(secs => i / 1000.0)), ${projectId}::uuid, 'c' || i || '@bench.test', 'c' || i || '@bench.test', true,
      jsonb_build_object('plan', case when i % 7 = 0 then 'pro' else 'free' end, 'score', i % 100)
    from generate_series(1, ${count}) as i`);
  await db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    select mailroom_uuid_v7(now()), c.project_id, c.id, 'purchase', '{}'::jsonb, now()
    from contacts c, generate_series(1, 3) as k
    where c.project_id = ${projectId}::uuid and (hashtext(c.id::text) & 2147483647) % 10 = 0 and k <= 1 + (hashtext(c.id::text) & 3) % 3`);
  // As autovacuum would (it is off on the CI host): the visibility map lets counts read indexes alone.
  await db.execute(sql`vacuum analyze contacts`);
  await db.execute(sql`vacuum analyze events`);
}

/** BENCH_EXPLAIN: each preview's count (with the count's settings) and sample, explained into `dir`. */
async function explainPreviews(
  database: Database,
  projectId: string,
  filters: [string, unknown][],
  dir: string,
): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (const [i, [name, filter]] of filters.entries()) {
    const predicate = compileAudience(
      projectId,
      { type: 'FILTERED', filter: parseSegmentFilter(filter, 'filter') },
      { now: Date.now() },
    );
    const page = matchingPageQuery(database.db, projectId, predicate, { limit: 10 }).getSQL();
    for (const [kind, query] of [
      ['count', matchingCountQuery(projectId, predicate)],
      ['sample', page],
    ] as const) {
      const plan = await database.db.transaction(async (tx) => {
        if (kind === 'count') await tx.execute(COUNT_SETTINGS);
        return tx.execute<{ 'QUERY PLAN': string }>(sql`explain (analyze, buffers) ${query}`);
      });
      writeFileSync(
        path.join(dir, `${i}-${kind}.txt`),
        `${name} (${kind})\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`,
      );
    }
  }
  console.log(`plans of the previews' queries written to ${dir}`);
}

/** One side of a run: a checkout (this one, or `BENCH_CAMPAIGNS_B_DIR`) with its own database and seeded project. */
interface Side {
  name: string;
  /** Starts one of this checkout's entry points. */
  spawn: Spawn;
  database: Database;
  dbUrl: string;
  project: { id: string; secretKey: string; domain: string };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 === 1 ? s[(s.length - 1) / 2] : Number(((s[s.length / 2 - 1] + s[s.length / 2]) / 2).toFixed(1));
};

/**
 * Runs the campaign benchmarks; returns the printed rows. With `BENCH_CAMPAIGNS_B_DIR=/path/to/other/checkout`
 * (a comma-separated list of checkouts) the same measures also run on each (its API and worker, its migrations, on a
 * database of its own seeded alike, `<database>_b<n>`), alternating sides for `BENCH_CAMPAIGNS_ROUNDS` rounds (default 3 with a B side, else 1;
 * the order flips every round). Every round starts from no campaign emails (`emails` truncated, then CHECKPOINT).
 */
export async function benchCampaigns(
  env: Record<string, string>,
  config: Config,
  database: Database,
  project: { id: string; secretKey: string; domain: string },
  spawnApp: Spawn,
  stop: (p: import('node:child_process').ChildProcess) => Promise<void>,
): Promise<Record<string, Row[]>> {
  const count = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 1_000_000);
  const seededName = `bench-campaigns-${count}`;
  const sides: Side[] = [{ name: 'this checkout', spawn: spawnApp, database, dbUrl: env.DATABASE_URL, project }];
  const bDirs = process.env.BENCH_CAMPAIGNS_B_DIR?.split(',').filter(Boolean) ?? [];
  for (const [i, dir] of bDirs.entries())
    sides.push(await otherCheckout(dir, `${env.DATABASE_URL}_b${i + 1}`, seededName, project.domain));
  const bDir = bDirs.length > 0;
  const rounds = Number(process.env.BENCH_CAMPAIGNS_ROUNDS ?? (bDir ? 3 : 1));

  for (const side of sides) {
    const { db } = side.database;
    const t = performance.now();
    const earlier = (await db.execute<{ id: string }>(sql`select id from projects where name = ${seededName} limit 1`))
      .rows[0];
    if (earlier && side.name === 'this checkout') {
      const keys = await rotateKeys(db, earlier.id, 0);
      const domain = (
        await db.execute<{ domain: string }>(
          sql`select domain from domains where project_id = ${earlier.id}::uuid limit 1`,
        )
      ).rows[0].domain;
      side.project = { id: earlier.id, secretKey: keys!.secretKey, domain };
    }
    if (earlier)
      console.log(`${side.name}: reusing the ${count} contacts seeded by an earlier run (project ${side.project.id})`);
    else {
      await seed(side.database, side.project.id, count);
      await db.execute(sql`update projects set name = ${seededName} where id = ${side.project.id}::uuid`);
      console.log(`${side.name}: seeded ${count} contacts and their purchase events in ${(ms(t) / 1000).toFixed(1)} s`);
    }
  }

  const out: Record<string, Row[]> = { previews: [], fanout: [] };
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 === 0 ? sides : [...sides].reverse()) {
      const got = await measure(
        side,
        { ...env, DATABASE_URL: side.dbUrl, QUEUE_PREFIX: benchQueuePrefix(`campaigns${r}`) },
        config,
        stop,
      );
      for (const row of got.previews) out.previews.push({ round: r + 1, side: side.name, ...row });
      if (got.fanout) out.fanout.push({ round: r + 1, side: side.name, ...got.fanout });
    }
  }
  console.log(`\nPOST /segments/preview (count + sample) at ${count} contacts`);
  console.table(out.previews);
  if (out.fanout.length > 0) {
    console.log('\nCampaign fan-out (ALL subscribed contacts)');
    console.table(out.fanout);
  }
  if (bDir && out.fanout.length > 0) {
    const summary: Row[] = [];
    for (const key of [
      'send → all queued (s)',
      'fan-out worker CPU (s)',
      'fan-out Postgres CPU (s)',
      'stats (ms)',
      'stats p50 of 5 (ms)',
      'cancel request (ms)',
      'all cancelled (s)',
    ]) {
      const of = (name: string) => median(out.fanout.filter((f) => f.side === name).map((f) => Number(f[key])));
      const row: Row = { measure: key };
      for (const side of sides) row[side.name] = of(side.name);
      for (const side of sides.slice(1))
        row[`this / ${side.name}`] = Number((of(sides[0].name) / of(side.name)).toFixed(2));
      summary.push(row);
    }
    console.log('\nMedians over the rounds, side by side');
    console.table(summary);
    out.summary = summary;
  }
  for (const side of sides.slice(1)) {
    await side.database.close();
    if (process.env.BENCH_KEEP_DATABASE !== '1') await dropDatabase(ADMIN_URL, new URL(side.dbUrl).pathname.slice(1));
  }
  return out;
}

/** A B side: the database at `dbUrl` (`<this run's database>_b<n>`) made and migrated by the other checkout, seeded alike. */
async function otherCheckout(dir: string, dbUrl: string, seededName: string, domain: string): Promise<Side> {
  const url = new URL(dbUrl);
  const name = url.pathname.slice(1);
  const keep = process.env.BENCH_KEEP_DATABASE === '1';
  const adminDb = createDatabase({ url: ADMIN_URL, poolSize: 1, applicationName: 'bench' });
  const exists = (await adminDb.db.execute(sql`select 1 from pg_database where datname = ${name}`)).rows.length > 0;
  if (exists && !keep) await adminDb.db.execute(sql.raw(`drop database "${name}" with (force)`));
  if (!exists || !keep) await adminDb.db.execute(sql.raw(`create database "${name}"`));
  await adminDb.close();
  const setup = spawnSync(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'campaigns-b-setup.ts'), dir, url.toString(), seededName, `b-${domain}`],
    {
      cwd: dir,
      env: { ...process.env, TSX_TSCONFIG_PATH: path.join(dir, 'tsconfig.json') },
      encoding: 'utf8',
    },
  );
  if (setup.status !== 0) throw new Error(`B setup in ${dir} failed: ${setup.stderr}`);
  const project = JSON.parse(setup.stdout.trim().split('\n').pop()!) as Side['project'];
  const spawnB: Spawn = (file, e) =>
    spawn(process.execPath, ['--import', 'tsx', path.join(dir, file)], {
      cwd: dir,
      env: { ...process.env, ...e, TSX_TSCONFIG_PATH: path.join(dir, 'tsconfig.json') },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  const database = createDatabase({ url: url.toString(), poolSize: 4, applicationName: 'bench' });
  return {
    name: `B ${name.slice(name.lastIndexOf('_') + 1)} ${path.basename(dir)}`,
    spawn: spawnB,
    database,
    dbUrl: url.toString(),
    project,
  };
}

/** One side's round: previews, then a campaign to ALL (fan-out, stats, cancel, sweep), from no campaign emails. */
async function measure(
  side: Side,
  env: Record<string, string>,
  config: Config,
  stop: (p: import('node:child_process').ChildProcess) => Promise<void>,
): Promise<{ previews: Row[]; fanout?: Row }> {
  const { db } = side.database;
  await db.execute(sql`truncate emails, email_events cascade`);
  await db.execute(sql`delete from campaigns`);
  await db.execute(sql`checkpoint`);
  const port = await freePort();
  const appEnv = { ...env, PORT: String(port), RATE_LIMIT_PER_MINUTE: '10000000', WORKER_HEALTH_PORT: '0' };
  const api = side.spawn('apps/api/src/server.ts', appEnv);
  const worker = side.spawn('apps/worker/src/main.ts', appEnv);
  const base = `http://127.0.0.1:${port}`;
  const call = apiCaller(base, side.project.secretKey);
  const pg = new BackendCpu(side.dbUrl);
  await pg.connect();
  let t: number;
  try {
    await waitForHttp(`${base}/health/ready`, 30_000);

    const previews: Row[] = [];
    const filters: [string, unknown][] = [
      ['data.plan equals "pro"', [{ field: 'data.plan', operator: 'equals', value: 'pro' }]],
      ['data.score greaterThan 90', [{ field: 'data.score', operator: 'greaterThan', value: 90 }]],
      ['event.purchase exists', [{ field: 'event.purchase', operator: 'exists' }]],
      ['event.purchase count >= 2', [{ field: 'event.purchase', operator: 'greaterThanOrEqual', value: 2 }]],
      [
        'pro AND purchased',
        [
          { field: 'data.plan', operator: 'equals', value: 'pro' },
          { field: 'event.purchase', operator: 'exists' },
        ],
      ],
    ];
    for (const [name, filter] of filters) {
      const times: number[] = [];
      let matched = 0;
      for (let i = 0; i < 5; i++) {
        t = performance.now();
        matched = (await call('POST', '/segments/preview', { filter })).count as number;
        times.push(ms(t));
      }
      times.sort((a, b) => a - b);
      previews.push({ filter: name, matched, 'p50 ms': times[2], 'max ms': times[4] });
    }
    if (process.env.BENCH_EXPLAIN)
      await explainPreviews(side.database, side.project.id, filters, process.env.BENCH_EXPLAIN);
    if (process.env.BENCH_CAMPAIGNS_ONLY === 'preview') return { previews };

    const campaign = await call('POST', '/campaigns', {
      name: 'bench',
      subject: 'Hi',
      body: '<p>Hi {{email}}</p>',
      from: `news@${side.project.domain}`,
      audienceType: 'ALL',
    });
    const id = campaign.id as string;
    const redis = createRedis(config, 'producer');
    const sendQueue = createSendQueue({ ...config, queuePrefix: env.QUEUE_PREFIX }, redis);
    let maxQueued = 0;
    const workerCpu0 = processCpuMs(worker.pid!);
    await pg.start();
    t = performance.now();
    await call('POST', `/campaigns/${id}/send`, {});
    for (;;) {
      const row = await db.execute<{ fanout_done: boolean; recipients: number }>(
        sql`select fanout_done, recipients::int from campaigns where id = ${id}::uuid`,
      );
      maxQueued = Math.max(maxQueued, await sendQueue.count());
      if (row.rows[0].fanout_done) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const fanoutMs = ms(t);
    const fanoutPg = await pg.stop();
    const fanoutWorker = processCpuMs(worker.pid!) - workerCpu0;
    const recipients = Number((await call('GET', `/campaigns/${id}`)).recipients);
    const workerMem = memory(worker.pid!);
    t = performance.now();
    const stats = await call('GET', `/campaigns/${id}/stats`);
    const statsMs = ms(t);
    const statsTimes: number[] = [];
    for (let i = 0; i < 5; i++) {
      t = performance.now();
      await call('GET', `/campaigns/${id}/stats`);
      statsTimes.push(ms(t));
    }
    const sweepWorker0 = processCpuMs(worker.pid!);
    await pg.start();
    t = performance.now();
    const cancelled = await call('POST', `/campaigns/${id}/cancel`, {});
    const cancelMs = ms(t);
    // The rest of the audience (never handed to the queue) is cancelled by the worker: time it to zero queued.
    for (;;) {
      const left = await db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'queued'`,
      );
      if (left.rows[0].n === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const sweepMs = ms(t);
    const sweepPg = await pg.stop();
    const sweepWorker = processCpuMs(worker.pid!) - sweepWorker0;
    await sendQueue.close();
    redis.disconnect();
    const s = (x: number) => Number((x / 1000).toFixed(1));
    return {
      previews,
      fanout: {
        recipients,
        'send → all queued (s)': s(fanoutMs),
        'rows/s': Math.round(recipients / (fanoutMs / 1000)),
        'fan-out worker CPU (s)': s(fanoutWorker),
        'fan-out Postgres CPU (s)': s(fanoutPg),
        'max send-queue jobs': maxQueued,
        'worker peak RSS (MiB)': workerMem.peak,
        'stats (ms)': statsMs,
        'stats p50 of 5 (ms)': median(statsTimes),
        'cancel request (ms)': cancelMs,
        'cancelled by request': Number(cancelled.cancelledEmails),
        'all cancelled (s)': s(sweepMs),
        'sweep worker / Postgres CPU (s)': `${s(sweepWorker)} / ${s(sweepPg)}`,
        'sent meanwhile': Number(stats.sent),
      },
    };
  } finally {
    await pg.end();
    await Promise.all([stop(api), stop(worker)]);
  }
}
