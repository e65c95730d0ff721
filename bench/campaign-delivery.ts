/**
 * `npm run bench -- campaign-delivery`: how close a large campaign comes to the send rate's physical bound. One
 * project with `BENCH_CAMPAIGN_CONTACTS` (default 100,000) subscribed contacts, a campaign to ALL of them sent through
 * the API (`POST /campaigns`, then `POST /campaigns/{id}/send`), the API and two worker processes each in a process
 * of its own, every `SendEmail` and `SendBulkEmail` going through a counting proxy (bench/ses-tally.ts) to the SES emulator, the send
 * rate capped at `SES_MAX_SEND_RATE` = `BENCH_CAMPAIGN_RATE` (default {@link DEFAULT_RATE}/s). Everything else is at
 * its defaults: the rate gate's safety margin, the campaign lane and its fair share, the guardrails.
 *
 * Timed: from just before `POST /campaigns/{id}/send` to the arrival of the last message at the proxy (the
 * bench and the proxy read the same clock), beside the physical bound `recipients ÷ rate`; the ratio of the two is the
 * figure (target ≤ 1.15). Everything between is in it: the request, the fan-out, the feeding of the send queue,
 * the limiter. Also: the first `SendEmail` after the request, when the fan-out was done, the rate between the first
 * and last sends, the busiest one-second window (never above the rate), and the CPU per email of the workers, the
 * API, the database's Postgres backends and Redis.
 *
 * Checked (printed, not asserted): every recipient got exactly one message: messages at the proxy ==
 * distinct recipients == contacts, no recipient twice, none refused, every email of the campaign `sent`.
 *
 * The default rate should be one the host's two workers sustain, so that the ratio prices the path and not a starved
 * host. Found by running this bench uncapped (`BENCH_CAMPAIGN_CONTACTS=10000 BENCH_CAMPAIGN_RATE=10000`) and taking
 * about two thirds of the rate printed between the first and last sends: on the shared 2-core host of
 * docs/performance.md two workers sent 98–138/s uncapped at load average 10–12 (411/s steady in the worker bench's
 * two-process campaign row at a quieter moment), so 100/s, the bottom of that range. `BENCH_SEND_CONCURRENCY` sets
 * the workers' `SEND_CONCURRENCY` (default: the service default). At 5,000 contacts (`BENCH_CAMPAIGN_CONTACTS=5000`)
 * it runs in a minute or two; it prints its progress every 30 s.
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import type { Database } from '@mailroom/db/client';
import { loadConfig } from '@mailroom/config/config';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue } from '@mailroom/queues/create';
import { freePort, waitForHttp } from '../test/support/services';
import { apiCaller } from './http';
import { BackendCpu, processCpuMs, servicesCpuSince, servicesCpuSnapshot } from './cpu';
import { BENCH_CAMPAIGN, seededProject } from './campaign-mail';
import type { Tally } from './ses-tally';
import { benchQueuePrefix } from './queue-prefix';

type Spawn = (file: string, env: Record<string, string>) => ChildProcess;
type Row = Record<string, string | number>;

/** `BENCH_CAMPAIGN_RATE`'s default (emails/s): see the module notes for how it was found. */
export const DEFAULT_RATE = 100;

/** The bench process's clock as epoch ms with sub-ms resolution, as the proxy stamps arrivals. */
const now = () => performance.timeOrigin + performance.now();

/** Starts the counting proxy in front of `upstream` in a process of its own. @returns its URL and process. */
async function startTally(upstream: string): Promise<{ url: string; process: ChildProcess }> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'ses-tally.ts'), upstream, String(port)],
    {
      env: { ...process.env, TSX_TSCONFIG_PATH: path.join(__dirname, '..', 'tsconfig.json') },
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('the SES tally proxy did not start')), 15_000);
    child.stdout.once('data', () => {
      clearTimeout(t);
      resolve();
    });
  });
  return { url: `http://127.0.0.1:${port}`, process: child };
}

/**
 * The rate gate's waits of a worker, from its `/metrics` (`mailroom_send_rate_gate_wait_seconds`, every delivery
 * connection): sends that waited, their summed wait (s), and how many waited at most 10 ms.
 */
async function gateWaits(port: number): Promise<{ count: number; sum: number; under10ms: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const total = (re: RegExp) =>
    text
      .split('\n')
      .filter((l) => re.test(l))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  return {
    count: total(/^mailroom_send_rate_gate_wait_seconds_count/),
    sum: total(/^mailroom_send_rate_gate_wait_seconds_sum/),
    under10ms: total(/^mailroom_send_rate_gate_wait_seconds_bucket\{.*le="0\.01"/),
  };
}

/** Runs the bench (see the module notes). @returns the printed rows. */
export async function benchCampaignDelivery(
  env: Record<string, string>,
  database: Database,
  ses: { emulator: string },
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
): Promise<Row[]> {
  const count = Number(process.env.BENCH_CAMPAIGN_CONTACTS ?? 100_000);
  const rate = Number(process.env.BENCH_CAMPAIGN_RATE ?? DEFAULT_RATE);
  const prefix = `cd${Date.now()}-`;
  let t = performance.now();
  const project = await seededProject(database, `bench-delivery-${count}`, count, prefix);
  console.log(`seeded ${count} contacts in ${((performance.now() - t) / 1000).toFixed(1)} s`);

  const tally = await startTally(ses.emulator);
  const port = await freePort();
  const workerPorts = [await freePort(), await freePort()];
  const appEnv = {
    ...env,
    QUEUE_PREFIX: benchQueuePrefix('delivery'),
    SES_ENDPOINT: tally.url,
    SES_MAX_SEND_RATE: String(rate),
    // The emulated account's 24-hour quota holds the campaign twice over (at the default 50,000 the quota guard
    // pauses campaigns at 47,500 sent, its reserve).
    SES_LOCAL_MAX_24H_SEND: String(Math.max(50_000, 2 * count)),
    PORT: String(port),
    RATE_LIMIT_PER_MINUTE: '10000000',
    ...(process.env.BENCH_SEND_CONCURRENCY ? { SEND_CONCURRENCY: process.env.BENCH_SEND_CONCURRENCY } : {}),
  };
  const api = spawnApp('apps/api/src/server.ts', appEnv);
  const workers = workerPorts.map((p) =>
    spawnApp('apps/worker/src/main.ts', { ...appEnv, WORKER_HEALTH_PORT: String(p) }),
  );
  const processes = [api, ...workers];
  const base = `http://127.0.0.1:${port}`;
  const call = apiCaller(base, project.secretKey);
  const pg = new BackendCpu(env.DATABASE_URL);
  await pg.connect();
  const redis = createRedis(loadConfig(appEnv), 'producer');
  const sendQueue = createSendQueue(loadConfig(appEnv), redis);
  try {
    await Promise.all([
      waitForHttp(`${base}/health/ready`, 60_000),
      ...workerPorts.map((p) => waitForHttp(`http://127.0.0.1:${p}/health/ready`, 60_000)),
    ]);
    const created = await call('POST', '/campaigns', {
      name: 'bench delivery',
      subject: BENCH_CAMPAIGN.subject,
      body: BENCH_CAMPAIGN.body,
      from: `news@${project.domain}`,
      audienceType: 'ALL',
    });
    const id = created.id as string;
    const cpu = (p: ChildProcess) => (p.pid ? processCpuMs(p.pid) : 0);
    const before = { workers: workers.map(cpu), api: cpu(api), services: servicesCpuSnapshot() };
    await pg.start();

    const t0 = now();
    t = performance.now();
    await call('POST', `/campaigns/${id}/send`, {});
    const sendRequestMs = performance.now() - t;
    let fanoutDoneMs = NaN;
    let sent = 0;
    let progressAt = performance.now();
    let reportedAt = performance.now();
    // The send queue's depth at each poll while sending: the lane kept full (the sending side binds) or run dry
    // (the feeding side does).
    const depths: number[] = [];
    for (;;) {
      if (processes.some((p) => p.exitCode !== null)) throw new Error('an app process exited during the campaign');
      const r = await database.db.execute<{ status: string; fanout_done: boolean; sent: number }>(sql`
        select status, fanout_done,
          (select count(*)::int from emails where campaign_id = ${id}::uuid and status = 'sent') as sent
        from campaigns where id = ${id}::uuid`);
      const row = r.rows[0];
      if (row.fanout_done && Number.isNaN(fanoutDoneMs)) fanoutDoneMs = now() - t0;
      if (row.sent > sent) progressAt = performance.now();
      sent = row.sent;
      if (row.status === 'SENT') break;
      if (sent > 0) {
        const c = await sendQueue.getJobCounts('waiting', 'prioritized');
        depths.push(c.waiting + c.prioritized);
      }
      // A line every 30 s, so a long run shows how it goes (and where it stood if stopped).
      if (performance.now() - reportedAt > 30_000) {
        reportedAt = performance.now();
        console.log(`${((now() - t0) / 1000).toFixed(0)} s: ${sent} of ${count} sent (${row.status})`);
      }
      if (row.status !== 'SENDING') throw new Error(`the campaign is ${row.status} (${sent} of ${count} sent)`);
      // Nothing sent for 60 s: give up rather than hold the machine.
      if (performance.now() - progressAt > 60_000) throw new Error(`no email sent for 60 s (${sent} of ${count})`);
      await new Promise((r) => setTimeout(r, 500));
    }
    const pgMs = await pg.stop();
    depths.sort((a, b) => a - b);
    const depth = (q: number) => depths[Math.min(depths.length - 1, Math.floor(q * depths.length))] ?? NaN;
    const services = servicesCpuSince(before.services);
    const workersMs = workers.reduce((sum, w, i) => sum + cpu(w) - before.workers[i], 0);
    const apiMs = cpu(api) - before.api;
    const waits = await Promise.all(workerPorts.map(gateWaits));
    const gate = waits.reduce((a, w) => ({
      count: a.count + w.count,
      sum: a.sum + w.sum,
      under10ms: a.under10ms + w.under10ms,
    }));
    const at = (await (
      await fetch(`${tally.url}/__tally`, { method: 'POST', body: JSON.stringify({ toPrefix: prefix }) })
    ).json()) as Tally;

    const seconds = (at.last - t0) / 1000;
    const bound = count / rate;
    const perEmail = (ms: number) => (ms / count).toFixed(2);
    const once = at.sends === count && at.recipients === count && at.duplicates === 0 && at.failed === 0;
    return [
      { measure: 'recipients · send rate (SES_MAX_SEND_RATE)', value: `${count} · ${rate}/s` },
      { measure: 'POST /campaigns/{id}/send → last message at SES', value: `${seconds.toFixed(1)} s` },
      { measure: 'physical bound: recipients ÷ rate', value: `${bound.toFixed(1)} s` },
      { measure: 'ratio (target ≤ 1.15)', value: `${(seconds / bound).toFixed(3)}` },
      {
        measure: 'send request · first message at SES · fan-out done (after the request started)',
        value: `${sendRequestMs.toFixed(0)} ms · ${((at.first - t0) / 1000).toFixed(2)} s · ${(fanoutDoneMs / 1000).toFixed(1)} s`,
      },
      {
        measure: 'rate between the first and last message · busiest one-second window',
        value: `${((at.sends - 1) / ((at.last - at.first) / 1000)).toFixed(1)}/s · ${at.busiestSecond}`,
      },
      {
        measure: 'emails/s in each tenth of the time from the first to the last message',
        value: at.tenths.map((n) => (n / ((at.last - at.first) / 10_000)).toFixed(0)).join(' '),
      },
      {
        measure: 'send-queue jobs waiting while sending: min · p10 · median · max (lane depth: 3 s at the rate)',
        value: `${depth(0)} · ${depth(0.1)} · ${depth(0.5)} · ${depth(1)}`,
      },
      {
        measure: 'rate-gate wait per SES call (both workers /metrics): mean · share ≤ 10 ms',
        value: `${((gate.sum / gate.count) * 1000).toFixed(1)} ms · ${((100 * gate.under10ms) / gate.count).toFixed(0)}%`,
      },
      {
        measure: 'exactly one message per recipient',
        value: `${once ? 'yes' : 'NO'}: ${at.sends} messages (SendEmail calls, SendBulkEmail entries), ${at.recipients} distinct recipients of ${count}, ${at.duplicates} twice or more${at.duplicates > 0 ? ` (${at.duplicateSample.join(', ')})` : ''}, ${at.failed} refused; ${sent} emails sent`,
      },
      {
        measure: 'CPU ms per email: 2 workers · API · Postgres (this database) · Redis',
        value: `${perEmail(workersMs)} · ${perEmail(apiMs)} · ${perEmail(pgMs)} · ${perEmail(services.redis)}`,
      },
    ];
  } finally {
    await pg.end();
    await sendQueue.close();
    redis.disconnect();
    await Promise.all(processes.map(stop));
    tally.process.kill();
  }
}
