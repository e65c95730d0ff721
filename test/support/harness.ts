/**
 * Test helpers: configuration against the per-run services, an in-process API, projects, the SES record.
 */
import { randomBytes } from 'node:crypto';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { simpleParser, type ParsedMail } from 'mailparser';
import request from 'supertest';
import type { Express } from 'express';
import type { Redis } from 'ioredis';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues, type Queues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { loadConfig, type Config } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createApp, type App } from '../../apps/api/src/app';
import { dropDatabase, freshDatabase } from './services';
import { testQueuePrefix } from './stale-queues';
import type { RecordedSend } from './ses-recorder';
import type { Clock } from '@mailroom/platform/clock';

export const ADMIN_TOKEN = 'test-admin-token-0123456789';

/** A unique, hash-tagged queue prefix that names when it was made (swept by a later run: `stale-queues.ts`). */
export function uniquePrefix(): string {
  return testQueuePrefix();
}

/** Environment for a process under test (the API, a worker). */
export function testEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    NODE_ENV: 'test',
    DATABASE_URL: process.env.TEST_DATABASE_URL!,
    REDIS_URL: process.env.TEST_REDIS_URL!,
    SES_ENDPOINT: process.env.TEST_SES_ENDPOINT!,
    SES_REGION: 'us-east-1',
    ADMIN_TOKEN,
    DB_POOL_SIZE: '5',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    QUEUE_PREFIX: uniquePrefix(),
    SEND_BACKOFF_MS: '200',
    WORKER_LOCK_MS: '5000',
    SEND_LEASE_MS: '5000',
    RECONCILE_INTERVAL_MS: '60000',
    // Every file shares one database: a worker's pass on finding its (new) queue prefix empty would adopt them all.
    RECONCILE_ON_REDIS_LOSS: 'false',
    ...overrides,
  };
}

/** Parsed configuration for in-process use. */
export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig(testEnv(overrides));
}

/** An in-process API with its own connections; `close()` releases them. */
export interface TestApi extends App {
  config: Config;
  database: Database;
  redis: Redis;
  /** Every queue of the catalog, on `redis`. */
  queues: Queues;
  close(): Promise<void>;
}

/** Builds the API app for supertest; `clock` is what its send routes' fair-share minute is read from. */
export async function startTestApi(config: Config, options: { clock?: Clock } = {}): Promise<TestApi> {
  const database = createDatabase({
    url: config.databaseUrl,
    poolSize: config.dbPoolSize,
    applicationName: 'test-api',
  });
  const redis = createRedis(config, 'producer');
  await waitReady(redis);
  const queues = createQueues(config, redis);
  const logger = createLogger(config, 'api');
  const app = createApp({ config, database, redis, queues, logger, clock: options.clock });
  return {
    ...app,
    config,
    database,
    redis,
    queues,
    close: async () => {
      await queues.closeAll();
      redis.disconnect();
      await database.close();
    },
  };
}

/** Resolves when a fail-fast Redis connection is ready. */
export async function waitReady(redis: Redis): Promise<void> {
  if (redis.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('redis not ready')), 5000);
    redis.once('ready', () => {
      clearTimeout(t);
      resolve();
    });
  });
}

/** A project with keys and a verified sending domain of its own. */
export interface TestProject {
  id: string;
  publicKey: string;
  secretKey: string;
  domain: string;
  /** `Authorization` header value of the secret key. */
  auth: string;
}

/** Creates a project with a verified, unique sending domain. */
export async function createTestProject(database: Database): Promise<TestProject> {
  const p = await createProject(database.db, `test ${randomBytes(3).toString('hex')}`);
  const domain = `d${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(database.db, p.id, domain, true);
  return { id: p.id, publicKey: p.publicKey, secretKey: p.secretKey, domain, auth: `Bearer ${p.secretKey}` };
}

/** A unique recipient address at the reserved `.test` TLD. */
export function recipient(tag = 'r'): string {
  return `${tag}.${randomBytes(5).toString('hex')}@inbox.test`;
}

/** SES sends to any of `addresses` (any status), as recorded by the proxy in front of the emulator. */
export async function sesRecordedTo(addresses: string[]): Promise<RecordedSend[]> {
  const res = await fetch(`${process.env.TEST_SES_ENDPOINT}/__recorded`, {
    method: 'POST',
    body: JSON.stringify({ to: addresses }),
  });
  return (await res.json()) as RecordedSend[];
}

/** Accepted (200) SES sends to any of `addresses`. */
export async function sesSendsTo(addresses: string[]): Promise<RecordedSend[]> {
  return (await sesRecordedTo(addresses)).filter((s) => s.status === 200);
}

/** Parses a recorded raw message. */
export function parseMail(send: RecordedSend): Promise<ParsedMail> {
  return simpleParser(send.raw);
}

/**
 * The email id a recorded send carried: its `email_id` message tag, which every send carries (a message sent in a
 * `SendBulkEmail` call has SES's own Message-ID), else the local part of its Message-ID (`<email id@domain>`).
 */
export async function sentEmailId(send: RecordedSend): Promise<string> {
  const tagged = send.tags.find((t) => t.Name === 'email_id')?.Value;
  return tagged ?? (await parseMail(send)).messageId!.replace(/^<|@.*$/g, '');
}

/** The email id of each accepted SES send to `addresses` (an email sent twice is there twice). */
export async function sesEmailIds(addresses: string[]): Promise<string[]> {
  return Promise.all((await sesSendsTo(addresses)).map(sentEmailId));
}

/**
 * Makes the proxy answer the next `times` sends whose raw MIME contains `match` with a recorded SES error. In a
 * `SendBulkEmail` call the matching entry alone fails (its status), or with `scope: 'call'` the whole call.
 */
export async function sesFault(fault: {
  match: string;
  status: number;
  type: string;
  message: string;
  times: number;
  scope?: 'entry' | 'call';
}): Promise<void> {
  await fetch(`${process.env.TEST_SES_ENDPOINT}/__faults`, {
    method: 'POST',
    body: JSON.stringify({
      match: fault.match,
      status: fault.status,
      times: fault.times,
      scope: fault.scope,
      // The shape SES v2 (restJson1) returns, as recorded from the service: type header + JSON message.
      headers: { 'x-amzn-errortype': `${fault.type}:http://internal.amazon.com/coral/com.amazonaws.sesv2/` },
      body: JSON.stringify({ message: fault.message }),
    }),
  });
}

/** Polls `check` until it returns a truthy value. */
export async function waitFor<T>(
  check: () => Promise<T | undefined | false | null>,
  timeoutMs = 20_000,
  what = 'condition',
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Deletes every Redis key under a queue prefix (what a Redis flush does to this test's queues), at one instant: the
 * keys are collected first (SCAN over the shared server's whole keyspace takes many round trips) and deleted by one
 * command. Deleting while scanning let a running worker see the prefix half gone, write its data marker and a job,
 * and have the rest of the scan delete the job but not the marker: a state no real flush leaves.
 */
export async function deletePrefix(redis: Redis, prefix: string): Promise<number> {
  const keys = new Set<string>();
  let cursor = '0';
  do {
    const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
    cursor = next;
    for (const k of found) keys.add(k);
  } while (cursor !== '0');
  return keys.size > 0 ? redis.del(...keys) : 0;
}

const ROOT = path.resolve(__dirname, '..', '..');

/**
 * Starts a worker as a separate OS process, with `env`. Node runs it directly with tsx's loader (not the tsx
 * CLI, which would run the worker in a child of its own), so a signal sent to the returned process reaches the
 * worker itself. Output goes to the test's output when TEST_LOG_LEVEL is set.
 */
export function spawnWorker(env: Record<string, string>): ChildProcess & { output: string[] } {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'apps/worker/src/main.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      ...env,
      WORKER_HEALTH_PORT: '0',
      TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'),
      LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'info',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { output: string[] };
  // Keep what it printed (start-up line with its effective settings, errors) for failure messages.
  child.output = [];
  const keep = (d: Buffer) => {
    child.output.push(
      ...d
        .toString()
        .split('\n')
        .filter((l) => l && !l.includes('"email sent"')),
    );
    if (child.output.length > 200) child.output.splice(0, child.output.length - 200);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return child;
}

/** Waits for a child process to exit. */
export function exited(child: ChildProcess): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(child.exitCode);
  return new Promise((resolve) => child.once('exit', (code) => resolve(code)));
}

/**
 * Registers `beforeAll`/`afterAll` that start an in-process API (fresh queue prefix) with one project, and
 * returns accessors for them.
 */
export function useApiWithProject(
  envOverrides: Record<string, string> = {},
  options: { clock?: Clock } = {},
): {
  readonly api: TestApi;
  readonly p: TestProject;
} {
  let api: TestApi | undefined;
  let p: TestProject | undefined;
  beforeAll(async () => {
    api = await startTestApi(testConfig(envOverrides), options);
    p = await createTestProject(api.database);
  });
  afterAll(async () => {
    await api?.close();
  });
  return {
    get api() {
      return api!;
    },
    get p() {
      return p!;
    },
  };
}

/**
 * Registers `beforeAll`/`afterAll` that start an in-process API on a database of the file's own
 * ({@link isolatedDatabase}) and drop it afterwards; returns an accessor for the API.
 */
export function useIsolatedApi(envOverrides: Record<string, string> = {}): { readonly api: TestApi } {
  let iso: { url: string; drop: () => Promise<void> } | undefined;
  let api: TestApi | undefined;
  beforeAll(async () => {
    iso = await isolatedDatabase();
    api = await startTestApi(loadConfig(testEnv({ ...envOverrides, DATABASE_URL: iso.url })));
  });
  afterAll(async () => {
    await api?.close();
    await iso?.drop();
  });
  return {
    get api() {
      return api!;
    },
  };
}

/**
 * A migrated database of the caller's own, for tests whose worker runs the reconciler eagerly: the reconciler
 * adopts every pending email of its database, so on the shared test database it would take other files' mail.
 * `until` stops at that migration (e.g. `0017_counter_deltas`: a database on an older schema, to test the next one).
 */
export async function isolatedDatabase(until?: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const admin = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const name = `mailroom_test_iso_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const url = await freshDatabase(admin, name, until);
  return { url, drop: () => dropDatabase(admin, name) };
}

/** supertest calls to `app` authenticated with the project's secret key. */
export function client(app: Express, project: TestProject) {
  return {
    post: (path: string, body: object) => request(app).post(path).set('Authorization', project.auth).send(body),
    get: (path: string) => request(app).get(path).set('Authorization', project.auth),
    patch: (path: string, body: object) => request(app).patch(path).set('Authorization', project.auth).send(body),
    put: (path: string, body: object) => request(app).put(path).set('Authorization', project.auth).send(body),
    del: (path: string) => request(app).delete(path).set('Authorization', project.auth),
  };
}
