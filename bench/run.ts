/**
 * Benchmarks (`npm run bench [-- api|worker|contacts|campaigns|feedback|workflows|verify|history]`): print numbers,
 * assert nothing.
 *
 * api    — POST /v1/send (1 recipient) and POST /v1/track requests/s and p50/p99 latency (autocannon, 50 connections,
 *          a different contact per request, rate limit raised, no worker), API and bare ceiling
 *          (bench/ceiling-server.ts) each in its own process, in alternating rounds, the ratios printed; then /v1/send
 *          with 10 recipients (bench/api.ts).
 * worker — emails/s drained against the SES emulator with the limiter raised (1, 2 and 4 worker processes), and the
 *          limiter's accuracy at 14/s with 2 worker processes (arrival times at SES).
 * contacts — a 1,000,000-row CSV import, /v1/track and contact list/search latency at that size
 *          (bench/contacts.ts; BENCH_CONTACTS sets the size).
 * campaigns — segment preview latency (data.* and event.* filters) and a campaign's fan-out to 1,000,000
 *          contacts: time to all recipients queued, send-queue size, worker peak memory, stats and cancel latency
 *          (bench/campaigns.ts; BENCH_CAMPAIGN_CONTACTS sets the size).
 *
 * feedback — SNS notifications/s at POST /webhooks/ses, signature check included, fresh and redelivered
 *          (bench/feedback.ts; BENCH_FEEDBACK_EVENTS sets the count).
 * workflows — executions started per second from a burst of trigger events through /v1/track, the lag from an
 *          event to its first step, and /v1/track latency with and without a workflow on the event
 *          (bench/workflows.ts; BENCH_WORKFLOW_EVENTS sets the count).
 * verify — POST /v1/verify requests/s with a warm DNS cache and with cold DNS on a loopback DNS server
 *          (bench/verify.ts; BENCH_VERIFY_REQUESTS sets the count).
 * history — the reads and writes that must stay flat as history grows: contacts page, GET /emails/{id}, campaign
 *          stats, segment previews with event.* filters, /v1/track, and dropping a month of history, at 1M and 10M
 *          emails and events, with the ratio; bytes per row of the history tables and the connections per process
 *          (bench/history.ts; BENCH_HISTORY_ROWS sets the first size, BENCH_HISTORY_GROWTH the factor). Not part
 *          of the run without a name (it fills tens of millions of rows).
 *
 * Uses a database of its own (`BENCH_DATABASE`, default `mailroom_bench_<pid>`: created, and dropped at the end, so
 * two runs on one machine never share one; BENCH_KEEP_DATABASE=1 keeps it, e.g. to EXPLAIN on it afterwards) and
 * queue prefix; Postgres and Redis must answer.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { createRedis } from '@mailroom/queues/connection';
import { createSendQueue, createWebhookQueue } from '@mailroom/queues/create';
import { loadConfig, type Config } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/db/queries/projects';
import { createDatabase, type Database } from '@mailroom/db/client';
import { acceptSend } from '@mailroom/sending/accept';
import { dropDatabase, freshDatabase, startSesStack } from '../test/support/services';
import { benchApi } from './api';
import { benchContacts } from './contacts';
import { benchCampaigns } from './campaigns';
import { benchFeedback } from './feedback';
import { benchWorkflows } from './workflows';
import { benchVerify } from './verify';
import { benchHistory } from './history';
import type { RecordedSend } from '../test/support/ses-recorder';

const ROOT = path.resolve(__dirname, '..');
const ADMIN_DB_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const results: Record<string, unknown> = {};

/** Runs an entry point in its own process; `nodeFlags` e.g. `--cpu-prof` (BENCH_PROFILE=dir profiles the drain). */
function spawnApp(file: string, env: Record<string, string>, nodeFlags: string[] = []): ChildProcess {
  return spawn(process.execPath, [...nodeFlags, '--import', 'tsx', path.join(ROOT, file)], {
    cwd: ROOT,
    env: { ...process.env, ...env, TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json') },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

const stop = (p: ChildProcess) => new Promise<void>((resolve) => (p.exitCode !== null ? resolve() : (p.once('exit', () => resolve()), p.kill('SIGTERM'))));

function table(title: string, rows: Record<string, string | number>[]): void {
  console.log(`\n${title}`);
  console.table(rows);
}

async function project(database: Database) {
  const p = await createProject(database.db, 'bench');
  const domain = `bench-${Date.now()}.example.com`;
  await addDomain(database.db, p.id, domain, true);
  return { ...p, domain };
}

async function enqueue(config: Config, database: Database, count: number, domain: string, projectId: string, tag: string): Promise<string[]> {
  const redis = createRedis(config, 'producer');
  await new Promise((r) => redis.once('ready', r));
  const sendQueue = createSendQueue(config, redis);
  const webhookQueue = createWebhookQueue(config, redis);
  const log = createLogger(config, 'bench');
  const ids: string[] = [];
  for (let i = 0; i < count; i += 100) {
    const to = Array.from({ length: Math.min(100, count - i) }, (_, j) => `${tag}${i + j}@bench.test`);
    const jobs: (() => Promise<void>)[] = [];
    const r = await acceptSend({ config, db: database.db, sendQueue, webhookQueue, log }, projectId, { to, from: `w@${domain}`, subject: 'Hi {{name}}', body: '<p>Hello {{name}}</p>', data: { name: 'Ann' } }, (fn) => jobs.push(fn));
    for (const job of jobs) await job();
    ids.push(...r.emails.map((e) => e.email));
  }
  await sendQueue.close();
  await webhookQueue.close();
  redis.disconnect();
  return ids;
}

async function sentCount(database: Database, ids: string[]): Promise<number> {
  const r = await database.db.execute<{ n: number }>(sql`select count(*)::int as n from emails where id = any(${`{${ids.join(',')}}`}::uuid[]) and status = 'sent'`);
  return (r.rows[0]).n;
}

async function benchWorker(baseEnv: Record<string, string>, database: Database, sesEndpoint: string): Promise<void> {
  const p = await project(database);
  const rows: Record<string, string | number>[] = [];

  // Throughput with the limiter raised out of the way, for 1, 2 and 4 worker processes (the ratio shows how well
  // the work spreads; on this 2-core machine the processes share the cores with Postgres, Redis and the emulator).
  const total = Number(process.env.BENCH_EMAILS ?? 3000);
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  let single = 0;
  for (const processes of [1, 2, 4]) {
    const fastEnv = { ...baseEnv, QUEUE_PREFIX: `{bench-fast${processes}-${Date.now()}}`, SES_MAX_SEND_RATE: '10000', SES_RATE_SAFETY_MS: '0', WORKER_CONCURRENCY: '32', WORKER_HEALTH_PORT: '0' };
    const ids = await enqueue(loadConfig(fastEnv), database, total, p.domain, p.id, `fast${processes}`);
    const started = performance.now();
    const workers = Array.from({ length: processes }, (_, i) => spawnApp('apps/worker/src/main.ts', fastEnv, i === 0 ? profile : []));
    let sent = 0;
    while ((sent = await sentCount(database, ids)) < total) await new Promise((r) => setTimeout(r, 200));
    const seconds = (performance.now() - started) / 1000;
    await Promise.all(workers.map(stop));
    const rate = sent / seconds;
    if (processes === 1) single = rate;
    rows.push({
      measure: `drain ${total} emails, limiter raised, ${processes} worker process${processes > 1 ? 'es' : ''} (incl. start-up)`,
      value: `${rate.toFixed(0)} emails/s (${seconds.toFixed(1)} s)${processes > 1 ? `, ${(rate / single).toFixed(2)}× one process` : ''}`,
    });
  }

  // Limiter accuracy at 14/s with two processes.
  const n = 140;
  const rateEnv = { ...baseEnv, QUEUE_PREFIX: `{bench-rate-${Date.now()}}`, SES_MAX_SEND_RATE: '14', WORKER_HEALTH_PORT: '0' };
  const rateIds = await enqueue(loadConfig(rateEnv), database, n, p.domain, p.id, 'rate');
  const workers = [spawnApp('apps/worker/src/main.ts', rateEnv), spawnApp('apps/worker/src/main.ts', rateEnv)];
  while ((await sentCount(database, rateIds)) < n) await new Promise((r) => setTimeout(r, 200));
  await Promise.all(workers.map(stop));
  const recorded = (await (await fetch(`${sesEndpoint}/__recorded`, { method: 'POST', body: JSON.stringify({ toPrefix: 'rate' }) })).json()) as RecordedSend[];
  const times = recorded.map((s) => s.at).sort((a, b) => a - b);
  let busiest = 0;
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= 1000) j++;
    busiest = Math.max(busiest, i - j + 1);
  }
  const tightest = Math.min(...times.slice(14).map((t, i) => t - times[i]));
  const rate = (times.length - 1) / ((times[times.length - 1] - times[0]) / 1000);
  rows.push({ measure: `limiter at 14/s, 2 worker processes, ${n} emails: achieved rate`, value: `${rate.toFixed(2)} emails/s` });
  rows.push({ measure: 'limiter: busiest one-second window (must be ≤ 14)', value: busiest });
  rows.push({ measure: 'limiter: tightest span of 15 consecutive sends (must be ≥ 1000 ms)', value: `${tightest.toFixed(1)} ms` });
  table('Worker', rows);
  results.worker = rows;
}

async function main(): Promise<void> {
  const which = process.argv[2];
  if (which && !['api', 'worker', 'contacts', 'campaigns', 'feedback', 'workflows', 'verify', 'history'].includes(which)) {
    throw new Error(`unknown benchmark ${which}: api, worker, contacts, campaigns, feedback, workflows, verify or history`);
  }
  const dbName = process.env.BENCH_DATABASE ?? `mailroom_bench_${process.pid}`;
  const dbUrl = await freshDatabase(ADMIN_DB_URL, dbName);
  const ses = await startSesStack();
  const env = {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: dbUrl,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    SES_ENDPOINT: ses.endpoint,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    QUEUE_PREFIX: `{bench-${Date.now()}}`,
    DB_POOL_SIZE: '20',
  };
  const config = loadConfig(env);
  const database = createDatabase({ url: dbUrl, poolSize: 20, applicationName: 'bench' });
  try {
    if (!which || which === 'api') results.api = await benchApi(env, await project(database), spawnApp, stop);
    if (!which || which === 'worker') await benchWorker(env, database, ses.endpoint);
    if (!which || which === 'contacts') results.contacts = await benchContacts(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'campaigns') results.campaigns = await benchCampaigns(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'feedback') results.feedback = await benchFeedback(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'workflows') results.workflows = await benchWorkflows(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'verify') results.verify = await benchVerify(env, config, database, await project(database), spawnApp, stop);
    if (which === 'history') results.history = await benchHistory(env, database, await project(database), spawnApp, stop);
  } finally {
    await database.close();
    ses.stop();
    if (process.env.BENCH_KEEP_DATABASE !== '1') await dropDatabase(ADMIN_DB_URL, dbName).catch(() => undefined);
  }
  mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(path.join(ROOT, 'bench/results/latest.json'), JSON.stringify({ at: new Date().toISOString(), results }, null, 2));
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(err);
    process.exit(1);
  },
);
