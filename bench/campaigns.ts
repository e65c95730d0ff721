/**
 * Campaigns and segments at scale (`npm run bench -- campaigns`), with BENCH_CAMPAIGN_CONTACTS (default
 * 1,000,000) subscribed contacts in one project (1 in 7 on `plan: "pro"`, 1 in 10 with 1–3 `purchase` events):
 *
 * - `POST /segments/preview` latency (count and a 10-contact sample) for a `data.*` filter, an `event.*` filter
 *   (performed) and an event count filter;
 * - a campaign to ALL: time from `POST /campaigns/{id}/send` to every recipient queued (fan-out done), the send
 *   queue's size meanwhile (the window), and the peak RSS of the worker (VmHWM);
 * - `GET /campaigns/{id}/stats` latency at that size; the cancel request's latency (it cancels the queued window)
 *   and the time until the worker has cancelled every remaining email.
 *
 * API and worker run in their own processes. SES is the emulator at the default 14/s: the benchmark measures
 * the fan-out, not sending.
 *
 * BENCH_CAMPAIGNS_ONLY=preview stops after the previews; BENCH_EXPLAIN=dir writes there the plans
 * (`EXPLAIN (ANALYZE, BUFFERS)`) of each preview's count and sample queries, the same statements the route runs. With BENCH_KEEP_DATABASE=1 (bench/run.ts) the seeded
 * project of an earlier run with the same size is reused (a new key is issued for it) instead of seeding again.
 */
import { sql } from 'drizzle-orm';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue } from '@mailroom/queues/create';
import { type Config } from '@mailroom/config/config';
import { rotateKeys } from '@mailroom/db/queries/projects';
import { parseSegmentFilter } from '@mailroom/audiences/segments';
import { compileAudience } from '@mailroom/audiences/audience';
import { COUNT_SETTINGS, matchingCountQuery, matchingPageQuery } from '@mailroom/audiences/queries/segments';
import type { Database } from '@mailroom/db/client';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { freePort, waitForHttp } from '../test/support/services';
import { apiCaller } from './http';
import { memory } from './contacts';

type Spawn = (file: string, env: Record<string, string>) => import('node:child_process').ChildProcess;
type Row = Record<string, string | number>;

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
async function explainPreviews(database: Database, projectId: string, filters: [string, unknown][], dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true });
  for (const [i, [name, filter]] of filters.entries()) {
    const predicate = compileAudience(projectId, { type: 'FILTERED', filter: parseSegmentFilter(filter, 'filter') }, { now: Date.now() });
    const page = matchingPageQuery(database.db, projectId, predicate, { limit: 10 }).getSQL();
    for (const [kind, query] of [['count', matchingCountQuery(projectId, predicate)], ['sample', page]] as const) {
      const plan = await database.db.transaction(async (tx) => {
        if (kind === 'count') await tx.execute(COUNT_SETTINGS);
        return tx.execute<{ 'QUERY PLAN': string }>(sql`explain (analyze, buffers) ${query}`);
      });
      writeFileSync(path.join(dir, `${i}-${kind}.txt`), `${name} (${kind})\n${plan.rows.map((r) => r['QUERY PLAN']).join('\n')}\n`);
    }
  }
  console.log(`plans of the previews' queries written to ${dir}`);
}

/** Runs the campaign benchmarks; returns the printed rows. */
export async function benchCampaigns(
  env: Record<string, string>,
  config: Config,
  database: Database,
  project: { id: string; secretKey: string; domain: string },
  spawnApp: Spawn,
  stop: (p: import('node:child_process').ChildProcess) => Promise<void>,
): Promise<Record<string, Row[]>> {
  const count = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 1_000_000);
  const { db } = database;
  const out: Record<string, Row[]> = {};
  const seededName = `bench-campaigns-${count}`;

  let t = performance.now();
  const earlier = process.env.BENCH_KEEP_DATABASE === '1'
    ? (await db.execute<{ id: string; domain: string }>(sql`
        select p.id, d.domain from projects p join domains d on d.project_id = p.id where p.name = ${seededName} limit 1`)).rows[0]
    : undefined;
  if (earlier) {
    const keys = await rotateKeys(db, earlier.id, 0);
    project = { id: earlier.id, secretKey: keys!.secretKey, domain: earlier.domain };
    console.log(`reusing the ${count} contacts seeded by an earlier run (project ${earlier.id})`);
  } else {
    await seed(database, project.id, count);
    await db.execute(sql`update projects set name = ${seededName} where id = ${project.id}::uuid`);
    console.log(`seeded ${count} contacts and their purchase events in ${(ms(t) / 1000).toFixed(1)} s`);
  }

  const port = await freePort();
  const appEnv = { ...env, PORT: String(port), RATE_LIMIT_PER_MINUTE: '10000000', WORKER_HEALTH_PORT: '0' };
  const api = spawnApp('apps/api/src/server.ts', appEnv);
  const worker = spawnApp('apps/worker/src/main.ts', appEnv);
  const base = `http://127.0.0.1:${port}`;
  const call = apiCaller(base, project.secretKey);
  try {
    await waitForHttp(`${base}/health/ready`, 30_000);

    const previews: Row[] = [];
    const filters: [string, unknown][] = [
      ['data.plan equals "pro"', [{ field: 'data.plan', operator: 'equals', value: 'pro' }]],
      ['data.score greaterThan 90', [{ field: 'data.score', operator: 'greaterThan', value: 90 }]],
      ['event.purchase exists', [{ field: 'event.purchase', operator: 'exists' }]],
      ['event.purchase count >= 2', [{ field: 'event.purchase', operator: 'greaterThanOrEqual', value: 2 }]],
      ['pro AND purchased', [{ field: 'data.plan', operator: 'equals', value: 'pro' }, { field: 'event.purchase', operator: 'exists' }]],
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
    console.log(`\nPOST /segments/preview (count + sample) at ${count} contacts`);
    console.table(previews);
    out.previews = previews;
    if (process.env.BENCH_EXPLAIN) await explainPreviews(database, project.id, filters, process.env.BENCH_EXPLAIN);
    if (process.env.BENCH_CAMPAIGNS_ONLY === 'preview') return out;

    const campaign = await call('POST', '/campaigns', { name: 'bench', subject: 'Hi', body: '<p>Hi {{email}}</p>', from: `news@${project.domain}`, audienceType: 'ALL' });
    const id = campaign.id as string;
    const redis = createRedis(config, 'producer');
    const sendQueue = createSendQueue(config, redis);
    let maxQueued = 0;
    t = performance.now();
    await call('POST', `/campaigns/${id}/send`, {});
    for (;;) {
      const row = await db.execute<{ fanout_done: boolean; recipients: number }>(sql`select fanout_done, recipients::int from campaigns where id = ${id}::uuid`);
      maxQueued = Math.max(maxQueued, await sendQueue.count());
      if (row.rows[0].fanout_done) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const fanoutMs = ms(t);
    const recipients = Number((await call('GET', `/campaigns/${id}`)).recipients);
    const workerMem = memory(worker.pid!);
    t = performance.now();
    const stats = await call('GET', `/campaigns/${id}/stats`);
    const statsMs = ms(t);
    t = performance.now();
    const cancelled = await call('POST', `/campaigns/${id}/cancel`, {});
    const cancelMs = ms(t);
    // The rest of the audience (never handed to the queue) is cancelled by the worker: time it to zero queued.
    for (;;) {
      const left = await db.execute<{ n: number }>(sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'queued'`);
      if (left.rows[0].n === 0) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const sweepMs = ms(t);
    await sendQueue.close();
    redis.disconnect();
    const fanout: Row[] = [
      {
        recipients,
        'send → all queued (s)': Number((fanoutMs / 1000).toFixed(1)),
        'rows/s': Math.round(recipients / (fanoutMs / 1000)),
        'max send-queue jobs': maxQueued,
        'worker peak RSS (MiB)': workerMem.peak,
        'stats (ms)': statsMs,
        'cancel request (ms)': cancelMs,
        'cancelled by request': Number(cancelled.cancelledEmails),
        'all cancelled (s)': Number((sweepMs / 1000).toFixed(1)),
        'sent meanwhile': Number(stats.sent),
      },
    ];
    console.log('\nCampaign fan-out (ALL subscribed contacts)');
    console.table(fanout);
    out.fanout = fanout;
  } finally {
    await Promise.all([stop(api), stop(worker)]);
  }
  return out;
}
