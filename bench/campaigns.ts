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
 */
import { sql } from 'drizzle-orm';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue } from '@mailroom/queues/create';
import { type Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';
import { memory } from './contacts';

type Spawn = (file: string, env: Record<string, string>) => import('node:child_process').ChildProcess;
type Row = Record<string, string | number>;

const ms = (t: number) => Number((performance.now() - t).toFixed(1));

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

  let t = performance.now();
  await db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select mailroom_uuid_v7(now() + make_interval(secs => i / 1000.0)), ${project.id}::uuid, 'c' || i || '@bench.test', 'c' || i || '@bench.test', true,
      jsonb_build_object('plan', case when i % 7 = 0 then 'pro' else 'free' end, 'score', i % 100)
    from generate_series(1, ${count}) as i`);
  await db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    select mailroom_uuid_v7(now()), c.project_id, c.id, 'purchase', '{}'::jsonb, now()
    from contacts c, generate_series(1, 3) as k
    where c.project_id = ${project.id}::uuid and (hashtext(c.id::text) & 2147483647) % 10 = 0 and k <= 1 + (hashtext(c.id::text) & 3) % 3`);
  await db.execute(sql`analyze contacts; analyze events`);
  console.log(`seeded ${count} contacts and their purchase events in ${(ms(t) / 1000).toFixed(1)} s`);

  const port = await freePort();
  const appEnv = { ...env, PORT: String(port), RATE_LIMIT_PER_MINUTE: '10000000', WORKER_HEALTH_PORT: '0' };
  const api = spawnApp('apps/api/src/server.ts', appEnv);
  const worker = spawnApp('apps/worker/src/main.ts', appEnv);
  const base = `http://127.0.0.1:${port}`;
  const headers = { authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json' };
  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const json = (await res.json()) as { data: Record<string, unknown> };
    if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
    return json.data;
  };
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
