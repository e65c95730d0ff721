/**
 * `npm run bench -- worker`: the send worker's drain rate beside a bare ceiling (`bench/worker-ceiling.ts`: one
 * BullMQ job, one SES `SendEmail` of a prebuilt raw message, one `UPDATE` per email), each draining its own
 * `BENCH_EMAILS` (default 3,000) emails accepted through `acceptSend`, against the SES emulator directly (not the
 * tests' recording proxy), with the limiter raised (`SES_MAX_SEND_RATE` 10,000, `SEND_CONCURRENCY` 32), with 1
 * and 2 processes, the ceiling first then the worker, `BENCH_WORKER_ROUNDS` times (default 1). Then the limiter's
 * accuracy at 14/s with 2 worker processes (arrival times at the recording proxy).
 *
 * Campaign mail (`BENCH_WORKER_MAIL`, default `transactional,campaign`; name one to drain only that): after the
 * transactional drain, the same worker processes drain a campaign to `BENCH_EMAILS` subscribed contacts of a new
 * project, started as `POST /campaigns/{id}/send` starts one (bench/campaign-mail.ts) before the processes are
 * spawned. The workers' own `campaign` job fans it out and feeds the send queue (the campaign lane, fair share and
 * guardrails at their defaults): the bench enqueues no send job, so the row measures whatever that path does. Its
 * ratio is to the same round's ceiling (which drains transactional emails: the ceiling has no campaign path). The
 * fan-out of up to `CAMPAIGN_BATCH_SIZE` (5,000) recipients is one statement before the first send, so it falls in
 * *incl. start-up*, not in the steady rate or the CPU per email.
 *
 * Two rates per drain: *steady*, the middle 80% of the emails over the time between the 10th and the 90th
 * percentile of their `sent_at` (start-up and the tail left out), and *incl. start-up*, all emails over the time
 * from spawning the processes to the last `sent` row. Also the Postgres transactions committed per email
 * (`pg_stat_database`, the bench's polling included: about 10/s, each a count over the drain's id range), and the
 * CPU time per email after start-up (`/proc/<pid>/stat`) of the drain's processes and of Postgres, Redis and the
 * emulator.
 *
 * `BENCH_WORKER_PROCESSES=1` drains with that many processes only (default: 1, then 2); `BENCH_WORKER_LIMITER=0`
 * leaves the limiter's row out (quicker rounds while profiling); `BENCH_SEND_CONCURRENCY` sets the worker's
 * `SEND_CONCURRENCY` and the ceiling's concurrency (default 32).
 * `BENCH_PROFILE=dir` writes a `--cpu-prof` profile of the first worker process of each drain there.
 * `BENCH_WORKER_B_NODE_FLAGS="--max-semi-space-size=64"` also drains with this checkout's worker started with those
 * Node flags, in the same rounds.
 * `BENCH_WORKER_B_CONCURRENCY=64` also drains with this checkout's worker at that `SEND_CONCURRENCY`, in the same rounds.
 * `BENCH_WORKER_B_ENV="SES_BULK_COALESCE=false"` also drains transactional mail with this checkout's worker under
 * those settings (space-separated `K=V`), in the same rounds.
 * `BENCH_WORKER_B_DIR=/path/to/other/checkout` also drains with that checkout's worker in the same rounds (before
 * and after a change; the database schema must be the same).
 *
 * @module
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { sql, type SQL } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue, createWebhookQueue } from '@mailroom/queues/create';
import { loadConfig, type Config } from '@mailroom/config/config';
import { type Database } from '@mailroom/db/client';
import { acceptSend } from '@mailroom/sending/accept';
import type { RecordedSend } from '../test/support/ses-recorder';
import { memory, processCpuMs, servicesCpuSince, servicesCpuSnapshot, type Service, type ServicesCpu } from './cpu';
import { seededProject, startCampaign } from './campaign-mail';
import { benchQueuePrefix } from './queue-prefix';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;
type Rows = Record<string, string | number>[];

/** Accepts `count` emails through the send path (rows + jobs) under `config`'s queue prefix. @returns their ids. */
async function enqueue(
  config: Config,
  database: Database,
  count: number,
  domain: string,
  projectId: string,
  tag: string,
): Promise<string[]> {
  const redis = createRedis(config, 'producer');
  await new Promise((r) => redis.once('ready', r));
  const sendQueue = createSendQueue(config, redis);
  const webhookQueue = createWebhookQueue(config, redis);
  const log = createLogger(config, 'bench');
  const ids: string[] = [];
  for (let i = 0; i < count; i += 100) {
    const to = Array.from({ length: Math.min(100, count - i) }, (_, j) => `${tag}${i + j}@bench.test`);
    const jobs: (() => Promise<void>)[] = [];
    const r = await acceptSend(
      { config, db: database.db, sendQueue, webhookQueue, log },
      projectId,
      { to, from: `w@${domain}`, subject: 'Hi {{name}}', body: '<p>Hello {{name}}</p>', data: { name: 'Ann' } },
      (fn) => jobs.push(fn),
    );
    for (const job of jobs) await job();
    ids.push(...r.emails.map((e) => e.email));
  }
  await sendQueue.close();
  await webhookQueue.close();
  redis.disconnect();
  return ids;
}

const idArray = (ids: string[]) => `{${ids.join(',')}}`;

/**
 * The drain's emails as an id range: their ids are UUIDv7, so the emails one drain accepted are exactly those
 * between its lowest and highest id (drains accept their emails one after another, never interleaved).
 */
function idRange(ids: string[]): { lo: string; hi: string } {
  const sorted = [...ids].sort();
  return { lo: sorted[0], hi: sorted[sorted.length - 1] };
}

/**
 * Emails of the drain already `sent`, polled about 10 times a second while it runs. By id range (an index range
 * scan of one partition, about 1.3 ms for 3,000 rows), not by the id list: `id = any(<3,000 ids>)` took Postgres
 * 38 ms to plan at every poll (measured with EXPLAIN); the Postgres processes' CPU over 5 s of a ceiling drain fell
 * from 3,710 to 1,430 ms with the range.
 */
async function sentCount(database: Database, range: { lo: string; hi: string }): Promise<number> {
  const r = await database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from emails where id between ${range.lo}::uuid and ${range.hi}::uuid and status = 'sent'`,
  );
  return r.rows[0].n;
}

/** Emails/s over the middle 80% of the sends (by `sent_at`) of the emails `where` selects: start-up and the tail left out. */
async function steadyRate(database: Database, where: SQL, total: number): Promise<number> {
  const r = await database.db.execute<{ p10: string; p90: string }>(sql`
    select extract(epoch from percentile_disc(0.1) within group (order by sent_at))::float8 as p10,
      extract(epoch from percentile_disc(0.9) within group (order by sent_at))::float8 as p90
    from emails where ${where} and status = 'sent'`);
  const seconds = Number(r.rows[0].p90) - Number(r.rows[0].p10);
  return (0.8 * total) / seconds;
}

/** What one drain drains: `total` emails waiting for the drain's processes, and how to read their progress. */
interface Batch {
  total: number;
  /** Emails of the batch `sent` so far (polled about 10 times a second, so cheap). */
  sent(): Promise<number>;
  /** Checked once after the drain: throws when the emails counted were not exactly the batch's. */
  verify(): Promise<void>;
  /** {@link steadyRate} of the batch. */
  steady(): Promise<number>;
}

/** `total` transactional emails accepted through `acceptSend` (rows + send jobs) under `env`'s queue prefix. */
async function transactionalBatch(
  env: Record<string, string>,
  database: Database,
  p: { id: string; domain: string },
  total: number,
  tag: string,
): Promise<Batch> {
  const ids = await enqueue(loadConfig(env), database, total, p.domain, p.id, tag);
  const range = idRange(ids);
  return {
    total,
    sent: () => sentCount(database, range),
    verify: async () => {
      // The range counted only this drain's emails (see `idRange`): checked once against the id list.
      const exact = await database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where id = any(${idArray(ids)}::uuid[]) and status = 'sent'`,
      );
      if (exact.rows[0].n !== total)
        throw new Error(
          `${tag}: ${exact.rows[0].n} of the drain's ${total} emails sent, but the id range counted more`,
        );
    },
    steady: () => steadyRate(database, sql`id = any(${idArray(ids)}::uuid[])`, total),
  };
}

/**
 * A campaign to `total` subscribed contacts of a new project, started as the API starts one (bench/campaign-mail.ts)
 * under `env`'s queue prefix: the drain's workers find only the campaign's job, and fan it out and feed the send
 * queue themselves. Counted by `campaign_id` (the `emails_campaign_status_idx` index).
 */
async function campaignBatch(
  env: Record<string, string>,
  database: Database,
  total: number,
  tag: string,
): Promise<Batch> {
  const p = await seededProject(database, `bench-${tag.replace(/-$/, '')}-${Date.now()}`, total, tag);
  const id = await startCampaign(loadConfig(env), database, p);
  const ofCampaign = sql`campaign_id = ${id}::uuid`;
  const count = async (status?: string) =>
    (
      await database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where ${ofCampaign} ${status ? sql`and status = ${status}` : sql``}`,
      )
    ).rows[0].n;
  return {
    total,
    sent: () => count('sent'),
    verify: async () => {
      const rows = await count();
      if (rows !== total) throw new Error(`${tag}: the campaign has ${rows} emails, not ${total}`);
    },
    steady: () => steadyRate(database, ofCampaign, total),
  };
}

interface Drain {
  steady: number;
  withStartUp: number;
  seconds: number;
  /** Postgres transactions committed in the bench database per email (the bench's own polling included). */
  commitsPerEmail: number;
  /**
   * CPU time (user + system, ms) the drain's processes spent per email, from the first poll that saw an email sent
   * to the last (start-up left out): what the rate is made of when the processes are CPU-bound, and less moved by
   * other load on the host than the rate itself.
   */
  cpuMsPerEmail: number;
  /** The same for the services the drain shares the host with (every Postgres backend, Redis, the SES emulator). */
  servicesCpuMsPerEmail: Record<Service, number>;
  /** The largest peak resident set size (MiB) of the drain's processes, read at its end (`VmHWM`). */
  peakRssMiB: number;
}

/** Transactions committed so far in the current database (counted when a backend reports, at the latest on exit). */
async function commits(database: Database): Promise<number> {
  const r = await database.db.execute<{ n: string }>(
    sql`select xact_commit as n from pg_stat_database where datname = current_database()`,
  );
  return Number(r.rows[0].n);
}

/** Runs one drain: the batch made by `prepare`, drained by the processes `start` spawns; waits for every email `sent`, stops them. */
async function drain(
  start: () => ChildProcess[],
  prepare: (tag: string) => Promise<Batch>,
  database: Database,
  tag: string,
): Promise<Drain> {
  const batch = await prepare(tag);
  const { total } = batch;
  const committedBefore = await commits(database);
  const started = performance.now();
  const children = start();
  let sent = 0;
  let progressAt = performance.now();
  const cpuNow = () => children.reduce((sum, c) => sum + (c.pid ? processCpuMs(c.pid) : 0), 0);
  let cpuFrom: { ms: number; sent: number; services: ServicesCpu } | undefined;
  for (let last = 0; (sent = await batch.sent()) < total; last = sent) {
    if (children.some((c) => c.exitCode !== null)) throw new Error(`${tag}: a process exited before the drain ended`);
    if (sent > 0 && !cpuFrom) cpuFrom = { ms: cpuNow(), sent, services: servicesCpuSnapshot() };
    if (sent > last) progressAt = performance.now();
    // Nothing sent for 30 s (start-up included): give up rather than hold the machine.
    if (performance.now() - progressAt > 30_000) {
      await Promise.all(children.map(stopChild));
      throw new Error(`${tag}: no email sent for 30 s (${sent} of ${total})`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const seconds = (performance.now() - started) / 1000;
  await batch.verify();
  const cpuMsPerEmail = cpuFrom ? (cpuNow() - cpuFrom.ms) / (sent - cpuFrom.sent) : NaN;
  const servicesUsed = cpuFrom ? servicesCpuSince(cpuFrom.services) : undefined;
  const perEmail = (k: Service) => (cpuFrom && servicesUsed ? servicesUsed[k] / (sent - cpuFrom.sent) : NaN);
  const servicesCpuMsPerEmail = {
    postgres: perEmail('postgres'),
    redis: perEmail('redis'),
    emulator: perEmail('emulator'),
  };
  const peakRssMiB = Math.max(...children.map((c) => (c.pid ? memory(c.pid).peak : NaN)));
  await Promise.all(children.map(stopChild));
  await database.db.execute(sql`select pg_stat_clear_snapshot()`);
  const commitsPerEmail = ((await commits(database)) - committedBefore) / total;
  return {
    steady: await batch.steady(),
    withStartUp: sent / seconds,
    seconds,
    commitsPerEmail,
    cpuMsPerEmail,
    servicesCpuMsPerEmail,
    peakRssMiB,
  };
}

const stopChild = (c: ChildProcess) =>
  new Promise<void>((resolve) =>
    c.exitCode !== null ? resolve() : (c.once('exit', () => resolve()), c.kill('SIGTERM')),
  );

/** Spawns the worker of another checkout (`BENCH_WORKER_B_DIR`). */
function spawnFrom(dir: string, env: Record<string, string>): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(dir, 'apps/worker/src/main.ts')], {
    cwd: dir,
    env: { ...process.env, ...env, TSX_TSCONFIG_PATH: path.join(dir, 'tsconfig.json') },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

/** Runs the worker bench (see the module notes). @returns the printed rows. */
export async function benchWorker(
  baseEnv: Record<string, string>,
  database: Database,
  ses: { endpoint: string; emulator: string },
  p: { id: string; domain: string },
  spawnApp: Spawn,
): Promise<Rows> {
  const rows: Rows = [];
  const total = Number(process.env.BENCH_EMAILS ?? 3000);
  const rounds = Number(process.env.BENCH_WORKER_ROUNDS ?? 1);
  const flagsB = (process.env.BENCH_WORKER_B_NODE_FLAGS ?? '').split(' ').filter(Boolean);
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const other = process.env.BENCH_WORKER_B_DIR;
  const onlyProcesses = process.env.BENCH_WORKER_PROCESSES;
  const concurrency = process.env.BENCH_SEND_CONCURRENCY ?? '32';
  const concurrencyB = process.env.BENCH_WORKER_B_CONCURRENCY;
  const envB = Object.fromEntries(
    (process.env.BENCH_WORKER_B_ENV ?? '')
      .split(' ')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
  const mail = (process.env.BENCH_WORKER_MAIL ?? 'transactional,campaign').split(',').map((m) => m.trim());
  for (const m of mail)
    if (m !== 'transactional' && m !== 'campaign')
      throw new Error(`BENCH_WORKER_MAIL: ${m} is neither transactional nor campaign`);
  const fmt = (d: Drain) =>
    `${d.steady.toFixed(0)} emails/s steady, ${d.withStartUp.toFixed(0)} incl. start-up (${d.seconds.toFixed(1)} s), ${d.commitsPerEmail.toFixed(2)} Postgres commits/email, ${d.cpuMsPerEmail.toFixed(2)} CPU ms/email (Postgres ${d.servicesCpuMsPerEmail.postgres.toFixed(2)}, Redis ${d.servicesCpuMsPerEmail.redis.toFixed(2)}, emulator ${d.servicesCpuMsPerEmail.emulator.toFixed(2)}), peak RSS ${d.peakRssMiB.toFixed(0)} MiB`;
  let n = 0;
  for (let round = 1; round <= rounds; round++) {
    for (const processes of onlyProcesses ? [Number(onlyProcesses)] : [1, 2]) {
      const env = (name: string) => ({
        ...baseEnv,
        QUEUE_PREFIX: benchQueuePrefix(`${name}${processes}`),
        SES_ENDPOINT: ses.emulator,
        SES_MAX_SEND_RATE: '10000',
        SES_RATE_SAFETY_MS: '0',
        SEND_CONCURRENCY: concurrency,
        WORKER_HEALTH_PORT: '0',
        CONCURRENCY: concurrency,
      });
      const label = `${processes} process${processes > 1 ? 'es' : ''}`;
      const ceilingEnv = env('ceiling');
      const ceiling = await drain(
        () => Array.from({ length: processes }, () => spawnApp('bench/worker-ceiling.ts', ceilingEnv)),
        (tag) => transactionalBatch(ceilingEnv, database, p, total, tag),
        database,
        `c${n++}-`,
      );
      rows.push({ measure: `round ${round}, ${label}: ceiling`, value: fmt(ceiling) });
      const ratios = (d: Drain) =>
        `ratio ${(d.steady / ceiling.steady).toFixed(2)}× steady, ${(d.withStartUp / ceiling.withStartUp).toFixed(2)}× incl. start-up`;
      const spawnWorkers = (workerEnv: Record<string, string>) => () =>
        Array.from({ length: processes }, (_, i) =>
          spawnApp('apps/worker/src/main.ts', workerEnv, i === 0 ? profile : []),
        );
      if (mail.includes('transactional')) {
        const workerEnv = env('worker');
        const worker = await drain(
          spawnWorkers(workerEnv),
          (tag) => transactionalBatch(workerEnv, database, p, total, tag),
          database,
          `w${n++}-`,
        );
        rows.push({ measure: `round ${round}, ${label}: worker`, value: `${fmt(worker)}; ${ratios(worker)}` });
      }
      if (mail.includes('campaign')) {
        const campaignEnv = env('campaign');
        const campaign = await drain(
          spawnWorkers(campaignEnv),
          (tag) => campaignBatch(campaignEnv, database, total, tag),
          database,
          `m${n++}-`,
        );
        rows.push({
          measure: `round ${round}, ${label}: worker, campaign mail`,
          value: `${fmt(campaign)}; ${ratios(campaign)}`,
        });
      }
      if (flagsB.length > 0) {
        const fEnv = env('flags');
        const f = await drain(
          () => Array.from({ length: processes }, () => spawnApp('apps/worker/src/main.ts', fEnv, flagsB)),
          (tag) => transactionalBatch(fEnv, database, p, total, tag),
          database,
          `f${n++}-`,
        );
        rows.push({
          measure: `round ${round}, ${label}: worker with ${flagsB.join(' ')}`,
          value: `${fmt(f)}; ratio ${(f.steady / ceiling.steady).toFixed(2)}× steady`,
        });
      }
      if (concurrencyB) {
        const kEnv = { ...env('k'), SEND_CONCURRENCY: concurrencyB };
        const k = await drain(
          () => Array.from({ length: processes }, () => spawnApp('apps/worker/src/main.ts', kEnv)),
          (tag) => transactionalBatch(kEnv, database, p, total, tag),
          database,
          `k${n++}-`,
        );
        rows.push({
          measure: `round ${round}, ${label}: worker at SEND_CONCURRENCY ${concurrencyB}`,
          value: `${fmt(k)}; ratio ${(k.steady / ceiling.steady).toFixed(2)}× steady`,
        });
      }
      if (Object.keys(envB).length > 0) {
        const vEnv = { ...env('v'), ...envB };
        const v = await drain(
          () => Array.from({ length: processes }, () => spawnApp('apps/worker/src/main.ts', vEnv)),
          (tag) => transactionalBatch(vEnv, database, p, total, tag),
          database,
          `v${n++}-`,
        );
        rows.push({
          measure: `round ${round}, ${label}: worker with ${process.env.BENCH_WORKER_B_ENV}`,
          value: `${fmt(v)}; ratio ${(v.steady / ceiling.steady).toFixed(2)}× steady`,
        });
      }
      if (other) {
        const bEnv = env('b');
        const b = await drain(
          () => Array.from({ length: processes }, () => spawnFrom(other, bEnv)),
          (tag) => transactionalBatch(bEnv, database, p, total, tag),
          database,
          `b${n++}-`,
        );
        rows.push({
          measure: `round ${round}, ${label}: worker of ${other}`,
          value: `${fmt(b)}; ratio ${(b.steady / ceiling.steady).toFixed(2)}× steady`,
        });
      }
    }
  }

  if (process.env.BENCH_WORKER_LIMITER === '0') return rows;
  // Limiter accuracy at 14/s with two processes, arrival times at the recording proxy.
  const count = 140;
  const rateEnv = {
    ...baseEnv,
    QUEUE_PREFIX: benchQueuePrefix('rate'),
    SES_MAX_SEND_RATE: '14',
    WORKER_HEALTH_PORT: '0',
  };
  const rateIds = await enqueue(loadConfig(rateEnv), database, count, p.domain, p.id, 'rate');
  const workers = [spawnApp('apps/worker/src/main.ts', rateEnv), spawnApp('apps/worker/src/main.ts', rateEnv)];
  const rateRange = idRange(rateIds);
  while ((await sentCount(database, rateRange)) < count) await new Promise((r) => setTimeout(r, 200));
  await Promise.all(workers.map(stopChild));
  const recorded = (await (
    await fetch(`${ses.endpoint}/__recorded`, { method: 'POST', body: JSON.stringify({ toPrefix: 'rate' }) })
  ).json()) as RecordedSend[];
  const times = recorded.map((s) => s.at).sort((a, b) => a - b);
  let busiest = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    busiest = Math.max(busiest, i - j + 1);
  }
  const tightest = Math.min(...times.slice(14).map((t, i) => t - times[i]));
  const rate = (times.length - 1) / ((times[times.length - 1] - times[0]) / 1000);
  rows.push({
    measure: `limiter at 14/s, 2 worker processes, ${count} emails: achieved rate`,
    value: `${rate.toFixed(2)} emails/s`,
  });
  rows.push({ measure: 'limiter: busiest one-second window (must be ≤ 14)', value: busiest });
  rows.push({
    measure: 'limiter: tightest span of 15 consecutive sends (must be ≥ 1000 ms)',
    value: `${tightest.toFixed(1)} ms`,
  });
  return rows;
}
