/**
 * Benchmarks (`npm run bench [-- api|worker|contacts|campaigns|campaign-delivery|feedback|workflows|verify|history|smtp|compose|ses-bulk]`): print numbers,
 * assert nothing.
 *
 * api    — POST /v1/send (1 recipient) and POST /v1/track requests/s and p50/p99 latency (autocannon, 50 connections,
 *          a different contact per request, rate limit raised, no worker), API and bare ceiling
 *          (bench/ceiling-server.ts) each in its own process, in alternating rounds, the ratios printed; then /v1/send
 *          with 10 recipients (bench/api.ts).
 * worker — emails/s drained against the SES emulator with the limiter raised (1 and 2 worker processes) beside a
 *          bare ceiling (bench/worker-ceiling.ts) drained the same way, the ratios printed, steady and incl. start-up;
 *          the limiter's accuracy at 14/s with 2 worker processes (arrival times at SES); transactional and
 *          campaign mail (`BENCH_WORKER_MAIL`: a campaign started as the API starts one, fanned out and fed by the
 *          workers' campaign job) (bench/worker.ts).
 * contacts — a 1,000,000-row CSV import, /v1/track and contact list/search latency at that size
 *          (bench/contacts.ts; BENCH_CONTACTS sets the size).
 * campaigns — segment preview latency (data.* and event.* filters) and a campaign's fan-out to 1,000,000
 *          contacts: time to all recipients queued, send-queue size, worker peak memory, stats and cancel latency
 *          (bench/campaigns.ts; BENCH_CAMPAIGN_CONTACTS sets the size).
 * campaign-delivery — a campaign to 100,000 contacts through the API and two worker processes at a send rate of
 *          BENCH_CAMPAIGN_RATE: time from `POST /campaigns/{id}/send` to the last SendEmail at SES beside the bound
 *          recipients ÷ rate, and one message per recipient (bench/campaign-delivery.ts;
 *          BENCH_CAMPAIGN_CONTACTS sets the size). Run only when named.
 *
 * feedback — SNS notifications/s at POST /webhooks/ses, signature check included, fresh and redelivered
 *          (bench/feedback.ts; BENCH_FEEDBACK_EVENTS sets the count).
 * workflows — executions started per second from a burst of trigger events through /v1/track, the lag from an
 *          event to its first step, and /v1/track latency with and without a workflow on the event
 *          (bench/workflows.ts; BENCH_WORKFLOW_EVENTS sets the count).
 * verify — POST /v1/verify requests/s with a warm DNS cache and with cold DNS on a loopback DNS server
 *          (bench/verify.ts; BENCH_VERIFY_REQUESTS sets the count).
 * partition-migration — migration 0018 (time partitioning) timed on 1,000,000 emails (and as many timeline rows and
 *          events) beside a plain copy of the same rows with the same indexes (bench/partition-migration.ts;
 *          BENCH_PARTITION_ROWS sets the size). Run only when named.
 * smtp   — the SMTP relay beside POST /v1/send in the same run: 1-recipient messages over 50 concurrent sessions
 *          (a pipelining client and nodemailer's; STARTTLS, and the local plain port) against 50 HTTP connections,
 *          emails/s, p99, the ratio to HTTP, client and server CPU per email (bench/smtp.ts; BENCH_SECONDS,
 *          BENCH_ROUNDS). Run only when named.
 * history — the reads and writes that must stay flat as history grows: contacts page, GET /emails/{id}, campaign
 *          stats, segment previews with event.* filters, /v1/track, and dropping a month of history, at 1M and 10M
 *          emails and events, with the ratio; bytes per row of the history tables and the connections per process
 *          (bench/history.ts; BENCH_HISTORY_ROWS sets the first size, BENCH_HISTORY_GROWTH the factor). Run only
 *          when named (it fills tens of millions of rows).
 * compose — the worker's composeMessage (render, headers, MIME) per email in one process, no services: CPU µs and
 *          bytes allocated per email for campaign-like and transactional emails, the MIME builder beside nodemailer's
 *          streamed build (the reference) in alternating rounds (bench/compose.ts; BENCH_COMPOSE_EMAILS,
 *          BENCH_COMPOSE_ROUNDS). Run only when named.
 * ses-bulk — campaign mail through SES v2 SendBulkEmail (an SES template, 50 entries a call) beside today's path
 *          (composeMessage and one raw SendEmail each), against the SES emulator: CPU µs per email of the sending
 *          process and of the emulator (bench/ses-bulk.ts; BENCH_BULK_EMAILS, BENCH_BULK_ROUNDS). Run only when named.
 * replicas — GET /contacts (page, search), POST /segments/preview and GET /reputation requests/s and p50/p99 with no
 *          read replica and with one (a throwaway primary and a streaming replica of it, made for the run), in
 *          alternating rounds, with the share of reads each API process sent to the replica (bench/replicas.ts;
 *          BENCH_REPLICA_CONTACTS, BENCH_REPLICA_SECONDS, BENCH_REPLICA_ROUNDS). Run only when named.
 *
 * BENCH_LOG_DIR=dir writes the log (stdout) of every app process and worker ceiling a benchmark starts (not another
 * checkout's worker, `BENCH_WORKER_B_DIR`) to a file of its own in `dir`.
 *
 * An app process (the API, the worker) runs with the Node flags of its `npm run start:*` script (the worker's
 * `--max-semi-space-size=32`), whether from the build (BENCH_COMPILED=1) or through tsx; BENCH_APP_NODE_FLAGS adds
 * flags after them for every app process of the run (`--max-semi-space-size=16`: Node 20's default again).
 *
 * Uses a database of its own (`BENCH_DATABASE`, default `mailroom_bench_<pid>`: created, and dropped at the end, so
 * two runs on one machine never share one) and queue prefix; Postgres and Redis must answer. With
 * BENCH_KEEP_DATABASE=1 (and a BENCH_DATABASE name) an existing database is kept (only migrated) and not dropped at
 * the end, so a later run can reuse what an earlier one seeded (`campaigns` reuses its 1,000,000 contacts) or EXPLAIN
 * on it afterwards.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { sql } from 'drizzle-orm';
import { Redis } from 'ioredis';
import { loadConfig } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { createDatabase, type Database } from '@mailroom/db/client';
import { migrate } from '@mailroom/db/migrate';
import { dropDatabase, freshDatabase, startSesStack } from '../test/support/services';
import { benchApi } from './api';
import { benchWorker } from './worker';
import { benchContacts } from './contacts';
import { benchCampaigns } from './campaigns';
import { benchCampaignDelivery } from './campaign-delivery';
import { benchFeedback } from './feedback';
import { benchWorkflows } from './workflows';
import { benchVerify } from './verify';
import { benchPartitionMigration } from './partition-migration';
import { benchHistory } from './history';
import { benchSmtp } from './smtp';
import { benchReplicas } from './replicas';
import { benchCompose } from './compose';
import { benchSesBulk } from './ses-bulk';
import { benchQueuePrefix, benchQueuePrefixes } from './queue-prefix';

const ROOT = path.resolve(__dirname, '..');
const ADMIN_DB_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const results: Record<string, unknown> = {};

/** Processes started by {@link spawnApp} (names their log files). */
let spawned = 0;

/**
 * The Node flags the `start:*` script of `package.json` that runs an app's entry point (`apps/<app>/src/<file>.ts`,
 * built to `apps/<app>/dist/<file>.js`) passes before the file: `node --max-semi-space-size=32
 * apps/worker/dist/main.js` gives `['--max-semi-space-size=32']`. None for a file no script runs.
 */
function startScriptNodeFlags(file: string): string[] {
  const built = file.replace('/src/', '/dist/').replace(/\.ts$/, '.js');
  const scripts = (
    JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  ).scripts;
  for (const [name, command] of Object.entries(scripts)) {
    const words = command.trim().split(/\s+/);
    if (name.startsWith('start:') && words[0] === 'node' && words[words.length - 1] === built)
      return words.slice(1, -1);
  }
  return [];
}

/**
 * Deletes the Redis keys of the queue prefixes this run made (`benchQueuePrefix`): the jobs the API bench enqueues
 * with no worker, and the finished jobs of the drains, would otherwise stay in Redis from run to run (hundreds of
 * MiB after a few sessions). Keys of any other prefix, another run's included, are left alone.
 */
async function dropBenchQueues(url: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  try {
    for (const prefix of benchQueuePrefixes()) {
      // The prefixes are letters, digits, `-` and the braces of the hash tag: nothing a MATCH pattern reads.
      if (!/^\{bench-[\w-]+\}$/.test(prefix)) throw new Error(`unexpected bench queue prefix ${prefix}`);
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 5000);
        cursor = next;
        if (keys.length > 0) await redis.unlink(...keys);
      } while (cursor !== '0');
    }
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs an entry point in its own process; `nodeFlags` e.g. `--cpu-prof` (BENCH_PROFILE=dir profiles the drain).
 * An app's entry point (`apps/<app>/src/<file>.ts`) gets the Node flags its `npm run start:*` script gives it
 * ({@link startScriptNodeFlags}), then those of `BENCH_APP_NODE_FLAGS` (every app process of the run), then
 * `nodeFlags` (a later V8 flag wins: `BENCH_APP_NODE_FLAGS=--max-semi-space-size=16` undoes the worker script's).
 * With BENCH_COMPILED=1 it runs as that script runs it in production, from the build (`apps/<app>/dist/<file>.js`,
 * plain `node`; run `npm run build` first); the bench's own processes (the ceilings) always run through tsx.
 */
function spawnApp(file: string, env: Record<string, string>, nodeFlags: string[] = []): ChildProcess {
  const app = /^apps\/[^/]+\/src\/.+\.ts$/.test(file);
  const compiled = process.env.BENCH_COMPILED === '1' && app;
  const args = compiled
    ? [path.join(ROOT, file.replace('/src/', '/dist/').replace(/\.ts$/, '.js'))]
    : ['--import', 'tsx', path.join(ROOT, file)];
  if (app)
    nodeFlags = [
      ...startScriptNodeFlags(file),
      ...(process.env.BENCH_APP_NODE_FLAGS ?? '').split(' ').filter(Boolean),
      ...nodeFlags,
    ];
  // BENCH_LOG_DIR: each process's log (stdout) to a file of its own there, to read what a slow drain did.
  const logDir = process.env.BENCH_LOG_DIR;
  if (logDir) mkdirSync(logDir, { recursive: true });
  const stdout = logDir
    ? openSync(path.join(logDir, `${path.basename(file, '.ts')}-${Date.now()}-${++spawned}.log`), 'w')
    : 'ignore';
  const child = spawn(process.execPath, [...nodeFlags, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env, TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json') },
    stdio: ['ignore', stdout, 'inherit'],
  });
  // The child holds its own copy of the file.
  if (typeof stdout === 'number') closeSync(stdout);
  return child;
}

const stop = (p: ChildProcess) =>
  new Promise<void>((resolve) =>
    p.exitCode !== null ? resolve() : (p.once('exit', () => resolve()), p.kill('SIGTERM')),
  );

function table(title: string, rows: Record<string, string | number>[]): void {
  console.log(`\n${title}`);
  console.table(rows);
}

let projects = 0;
async function project(database: Database) {
  const p = await createProject(database.db, `bench-${++projects}`);
  const domain = `bench-${Date.now()}-${projects}.example.com`;
  await addDomain(database.db, p.id, domain, true);
  return { ...p, domain };
}

/** BENCH_KEEP_DATABASE: the named database as it is (created when missing), migrated to the latest schema. */
async function keptDatabase(name: string): Promise<string> {
  const url = new URL(ADMIN_DB_URL);
  url.pathname = `/${name}`;
  const admin = createDatabase({ url: ADMIN_DB_URL, poolSize: 1, applicationName: 'bench' });
  const found = await admin.db.execute(sql`select 1 from pg_database where datname = ${name}`);
  await admin.close();
  if (found.rows.length === 0) return freshDatabase(ADMIN_DB_URL, name);
  await migrate(url.toString());
  return url.toString();
}

async function main(): Promise<void> {
  const which = process.argv[2];
  // In-process, no Postgres or Redis (ses-bulk starts the SES emulator); run only when named.
  if (which === 'compose' || which === 'ses-bulk') {
    if (which === 'compose') results.compose = await benchCompose();
    else results.sesBulk = await benchSesBulk();
    mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
    writeFileSync(
      path.join(ROOT, `bench/results/${which}.json`),
      JSON.stringify({ at: new Date().toISOString(), results }, null, 2),
    );
    return;
  }
  // On a database of its own on the schema before 0017; run only when named (it fills 2.2M rows).
  if (which === 'partition-migration') {
    results.partitionMigration = await benchPartitionMigration(ADMIN_DB_URL);
    mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
    writeFileSync(
      path.join(ROOT, 'bench/results/partition-migration.json'),
      JSON.stringify({ at: new Date().toISOString(), results }, null, 2),
    );
    return;
  }
  if (
    which &&
    ![
      'api',
      'worker',
      'contacts',
      'campaigns',
      'campaign-delivery',
      'feedback',
      'workflows',
      'verify',
      'history',
      'smtp',
      'replicas',
    ].includes(which)
  ) {
    throw new Error(
      `unknown benchmark ${which}: api, worker, contacts, campaigns, campaign-delivery, feedback, workflows, verify, history, smtp, replicas, compose, ses-bulk or partition-migration`,
    );
  }
  const dbName = process.env.BENCH_DATABASE ?? `mailroom_bench_${process.pid}`;
  const keep = process.env.BENCH_KEEP_DATABASE === '1' && process.env.BENCH_DATABASE !== undefined;
  const dbUrl = keep ? await keptDatabase(dbName) : await freshDatabase(ADMIN_DB_URL, dbName);
  const ses = await startSesStack();
  const env = {
    NODE_ENV: 'production',
    LOG_LEVEL: 'warn',
    DATABASE_URL: dbUrl,
    REDIS_URL: process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379',
    SES_ENDPOINT: ses.endpoint,
    AWS_ACCESS_KEY_ID: 'local',
    AWS_SECRET_ACCESS_KEY: 'local',
    QUEUE_PREFIX: benchQueuePrefix('run'),
    DB_POOL_SIZE: '20',
  };
  const config = loadConfig(env);
  const database = createDatabase({ url: dbUrl, poolSize: 20, applicationName: 'bench' });
  try {
    if (!which || which === 'api') {
      const many: Awaited<ReturnType<typeof project>>[] = [];
      for (let i = 0; i < 20; i++) many.push(await project(database));
      results.api = await benchApi(env, many, spawnApp, stop);
    }
    if (!which || which === 'worker') {
      results.worker = await benchWorker(env, database, ses, await project(database), spawnApp);
      table('Worker', results.worker as Record<string, string | number>[]);
    }
    if (!which || which === 'contacts')
      results.contacts = await benchContacts(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'campaigns')
      results.campaigns = await benchCampaigns(env, config, database, await project(database), spawnApp, stop);
    if (which === 'campaign-delivery') {
      results.campaignDelivery = await benchCampaignDelivery(env, database, ses, spawnApp, stop);
      table('Campaign delivery', results.campaignDelivery as Record<string, string | number>[]);
    }
    if (!which || which === 'feedback')
      results.feedback = await benchFeedback(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'workflows')
      results.workflows = await benchWorkflows(env, config, database, await project(database), spawnApp, stop);
    if (!which || which === 'verify')
      results.verify = await benchVerify(env, config, database, await project(database), spawnApp, stop);
    if (which === 'smtp') results.smtp = await benchSmtp(env, database, await project(database), spawnApp, stop);
    if (which === 'history')
      results.history = await benchHistory(env, database, await project(database), spawnApp, stop);
    // On a primary and replica of its own (the shared cluster is never a replication source); run only when named.
    if (which === 'replicas') results.replicas = await benchReplicas(env, spawnApp, stop);
  } finally {
    await database.close();
    ses.stop();
    if (!keep) await dropDatabase(ADMIN_DB_URL, dbName).catch(() => undefined);
    await dropBenchQueues(env.REDIS_URL).catch((err: unknown) => console.error('bench queues kept:', err));
  }
  mkdirSync(path.join(ROOT, 'bench/results'), { recursive: true });
  writeFileSync(
    path.join(ROOT, 'bench/results/latest.json'),
    JSON.stringify({ at: new Date().toISOString(), results }, null, 2),
  );
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(err);
    process.exit(1);
  },
);
