/**
 * Chaos: Postgres connections terminated every 300 ms (`pg_terminate_backend`, what a failover, a pgbouncer restart
 * or an idle-in-transaction timeout does) while `/v1/send` is under load. The API and the worker run as processes
 * of their own, built from the same entry points as production, against a database of this test's own.
 *
 * Survived means: both processes still running, every request answered 202 or 503 (never 500), every accepted
 * email delivered, none delivered twice, the workflow inbox's LISTEN connection back, and a send after the storm
 * delivered at once. Also here: a process that cannot bind its port exits non-zero naming the port.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { inArray } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { emails } from '@mailroom/db/schema/emails';
import request from 'supertest';
import { loadConfig } from '@mailroom/config/config';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { SesTransport, type MailTransport } from '@mailroom/sending/ses/transport';
import {
  createTestProject,
  exited,
  isolatedDatabase,
  recipient,
  sesSendsTo,
  sentEmailId,
  spawnWorker,
  startTestApi,
  testConfig,
  testEnv,
  waitFor,
} from '../support/harness';
import { freePort, waitForHttp } from '../support/services';
import { toSummary } from '../support/summary';

const ROOT = path.resolve(__dirname, '../..');
const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
/** The application names of the processes under test; the test's own connections are spared. */
const VICTIMS = ['mailroom-api', 'mailroom-worker', 'mailroom-worker-send', 'mailroom-workflow-inbox'];

function spawnApi(env: Record<string, string>): ChildProcess & { output: string[] } {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'apps/api/src/server.ts')], {
    cwd: ROOT,
    env: { ...process.env, ...env, TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'), LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { output: string[] };
  child.output = [];
  const keep = (d: Buffer) => {
    child.output.push(...d.toString().split('\n').filter(Boolean));
    if (child.output.length > 300) child.output.splice(0, child.output.length - 300);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  return child;
}

/** Terminates every backend of `db` opened by the processes under test. @returns how many. */
async function terminate(admin: Client, db: string): Promise<number> {
  const r = await admin.query<{ n: string }>(
    `select count(*) filter (where pg_terminate_backend(pid)) as n from pg_stat_activity
      where datname = $1 and application_name = any($2) and pid <> pg_backend_pid()`,
    [db, VICTIMS],
  );
  return Number(r.rows[0].n);
}

describe('a Postgres connection storm during sends', () => {
  let iso: { url: string; drop: () => Promise<void> };
  let database: Database;
  let admin: Client;
  const children: Array<ChildProcess & { output: string[] }> = [];
  let api: ChildProcess & { output: string[] };
  let worker: ChildProcess & { output: string[] };
  let base: string;

  beforeAll(async () => {
    iso = await isolatedDatabase();
    database = createDatabase({ url: iso.url, poolSize: 3, applicationName: 'chaos-test' });
    admin = new Client({ connectionString: ADMIN_URL, application_name: 'chaos-terminator' });
    await admin.connect();
    const port = await freePort();
    // A short lease so that a claim whose reply was cut off is taken again within seconds, not a minute.
    const env = testEnv({
      DATABASE_URL: iso.url,
      PORT: String(port),
      SES_MAX_SEND_RATE: '200',
      WORKER_CONCURRENCY: '8',
      SEND_LEASE_MS: '8000',
      SEND_BACKOFF_MS: '100',
      SEND_MAX_ATTEMPTS: '20',
      RECONCILE_INTERVAL_MS: '2000',
      RECONCILE_AFTER_MS: '3000',
      RATE_LIMIT_PER_MINUTE: '100000',
      DB_POOL_SIZE: '8',
    });
    api = spawnApi(env);
    worker = spawnWorker(env);
    children.push(api, worker);
    base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/health/ready`, 30_000).catch((err) => {
      throw new Error(`${(err as Error).message}\n${api.output.join('\n')}`);
    });
  }, 60_000);

  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
    await admin?.end();
    await database?.close();
    await iso?.drop();
  });

  test('both processes stay up, requests get 202 or 503, every accepted email is delivered exactly once', async () => {
    const p = await createTestProject(database);
    const accepted = new Map<string, string>(); // address → email id
    const statuses = new Map<number, number>();
    const unanswered: string[] = [];
    let requests = 0;
    let terminated = 0;
    let storming = true;

    const storm = (async () => {
      while (storming) {
        terminated += await terminate(admin, new URL(iso.url).pathname.slice(1));
        await new Promise((r) => setTimeout(r, 300));
      }
    })();

    const sender = async () => {
      const deadline = Date.now() + 6_000;
      while (Date.now() < deadline) {
        const to = recipient('storm');
        requests++;
        try {
          const res = await fetch(`${base}/v1/send`, {
            method: 'POST',
            headers: { Authorization: p.auth, 'Content-Type': 'application/json' },
            body: JSON.stringify({ to, from: `s@${p.domain}`, subject: 'storm', body: '<p>storm</p>' }),
            signal: AbortSignal.timeout(15_000),
          });
          statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
          const body = (await res.json()) as { data?: { emails: Array<{ email: string }> }; error?: { code: string } };
          if (res.status === 202) accepted.set(to, body.data!.emails[0].email);
          else expect(body.error?.code).toBe('SERVICE_UNAVAILABLE');
        } catch (err) {
          unanswered.push(`${to}: ${(err as Error).message}`);
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, sender));
    storming = false;
    await storm;

    toSummary(
      `storm: ${requests} requests, statuses ${JSON.stringify([...statuses])}, ${terminated} terminated, ${accepted.size} accepted`,
    );
    // Both processes lived through it.
    expect({ api: api.exitCode, worker: worker.exitCode }).toEqual({ api: null, worker: null });
    expect(unanswered).toEqual([]);
    expect([...statuses.keys()].filter((s) => s !== 202 && s !== 503)).toEqual([]);
    expect(terminated).toBeGreaterThan(10);
    expect(accepted.size).toBeGreaterThan(0);

    // Every accepted email reaches SES; the worker and the reconciler pick up whatever the storm interrupted.
    const ids = [...accepted.values()];
    await waitFor(
      async () => {
        const rows = await database.db.select({ status: emails.status }).from(emails).where(inArray(emails.id, ids));
        return rows.length === ids.length && rows.every((r) => r.status === 'sent');
      },
      90_000,
      'every accepted email sent',
    ).catch((err) => {
      throw new Error(`${(err as Error).message}\nworker:\n${worker.output.slice(-40).join('\n')}`);
    });
    const sends = await sesSendsTo([...accepted.keys()]);
    const atSes = await Promise.all(sends.map(sentEmailId));
    const counts = new Map<string, number>();
    for (const id of atSes) counts.set(id, (counts.get(id) ?? 0) + 1);
    const lost = ids.filter((id) => !counts.has(id));
    const duplicated = [...counts.values()].filter((n) => n > 1).length;

    // Sends answered 503 whose transaction had committed (the reply to COMMIT was cut off) are delivered too:
    // the client was told to retry. Count them; an Idempotency-Key makes that retry safe.
    const all = await database.db.select({ id: emails.id }).from(emails);
    const unacknowledged = all.length - ids.length;
    toSummary(
      `chaos postgres: ${requests} requests, ${statuses.get(202) ?? 0} 202, ${statuses.get(503) ?? 0} 503, ` +
        `${[...statuses].filter(([s]) => s >= 500 && s !== 503).reduce((n, [, c]) => n + c, 0)} other 5xx; ` +
        `${terminated} connections terminated; emails accepted ${ids.length}, delivered ${ids.length - lost.length}, ` +
        `lost ${lost.length}, duplicated ${duplicated}; committed but answered 503: ${unacknowledged}`,
    );
    expect(lost).toEqual([]);
    expect(duplicated).toBe(0);

    // Recovered without a restart: the LISTEN connection is back, and a new send goes through at once.
    await waitFor(
      async () => {
        const r = await admin.query(
          `select 1 from pg_stat_activity where datname = $1 and application_name = 'mailroom-workflow-inbox'`,
          [new URL(iso.url).pathname.slice(1)],
        );
        return r.rowCount === 1;
      },
      20_000,
      'the workflow inbox listening again',
    );
    const after = recipient('after');
    const res = await fetch(`${base}/v1/send`, {
      method: 'POST',
      headers: { Authorization: p.auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ to: after, from: `s@${p.domain}`, subject: 'after', body: '<p>after</p>' }),
    });
    expect(res.status).toBe(202);
    await waitFor(async () => (await sesSendsTo([after])).length === 1, 20_000, 'the send after the storm');
  }, 180_000);
});

describe('a port that cannot be bound', () => {
  test('the API and the worker exit non-zero, naming the port', async () => {
    const taken = net.createServer();
    await new Promise<void>((r) => taken.listen(0, r));
    const port = (taken.address() as net.AddressInfo).port;
    try {
      const api = spawnApi(testEnv({ PORT: String(port) }));
      expect(await exited(api)).not.toBe(0);
      expect(api.output.join('\n')).toMatch(new RegExp(`api cannot listen on port ${port}: EADDRINUSE`));

      // Not spawnWorker: it asks for port 0, and this worker's health server must meet the taken port.
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'apps/worker/src/main.ts')], {
        cwd: ROOT,
        env: {
          ...process.env,
          ...testEnv(),
          WORKER_HEALTH_PORT: String(port),
          TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json'),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (d: Buffer) => (out += d.toString()));
      child.stderr.on('data', (d: Buffer) => (out += d.toString()));
      expect(await exited(child)).not.toBe(0);
      expect(out).toMatch(new RegExp(`worker health and metrics cannot listen on port ${port}: EADDRINUSE`));
    } finally {
      taken.close();
    }
  }, 60_000);
});

describe('Postgres lost right after SES accepted a message', () => {
  let iso: { url: string; drop: () => Promise<void> };
  let database: Database;
  let admin: Client;
  let dbName: string;
  let running: RunningWorker | undefined;

  beforeAll(async () => {
    iso = await isolatedDatabase();
    dbName = new URL(iso.url).pathname.slice(1);
    database = createDatabase({ url: iso.url, poolSize: 2, applicationName: 'chaos-test' });
    admin = new Client({ connectionString: ADMIN_URL, application_name: 'chaos-terminator' });
    await admin.connect();
  });
  afterAll(async () => {
    await running?.stop();
    await admin.query(`alter database "${dbName}" with allow_connections true`).catch(() => undefined);
    await admin?.end();
    await database?.close();
    await iso?.drop();
  });

  /**
   * Takes the database away (no new connections, the worker's terminated) the moment SES answers for a message
   * to `victim`, and gives it back `outageMs` later.
   */
  function outageAfterSes(victim: string, outageMs: number, done: { at?: number }): MailTransport {
    const ses = new SesTransport(testConfig({ SES_ENDPOINT: process.env.TEST_SES_ENDPOINT! }));
    return {
      close: () => ses.close(),
      send: async (m) => {
        const r = await ses.send(m);
        if ((m.to as readonly string[]).includes(victim) && done.at === undefined) {
          done.at = Date.now();
          await admin.query(`alter database "${dbName}" with allow_connections false`);
          await terminate(admin, dbName);
          setTimeout(() => void admin.query(`alter database "${dbName}" with allow_connections true`), outageMs);
        }
        return r;
      },
    };
  }

  async function sendOne(env: Record<string, string>, outageMs: number) {
    const p = await createTestProject(database);
    const victim = recipient('lost-write');
    const done: { at?: number } = {};
    const config = loadConfig(env);
    running = await startWorker(config, { transport: outageAfterSes(victim, outageMs, done), healthPort: null });
    const api = await startTestApi(config);
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to: victim, from: `w@${p.domain}`, subject: 'once', body: '<p>once</p>' });
    expect(res.status).toBe(202);
    const id: string = res.body.data.emails[0].email;
    await waitFor(async () => done.at, 30_000, 'SES to accept the message');
    const row = await waitFor(
      async () => {
        const [r] = await database.db
          .select({ status: emails.status, messageId: emails.messageId })
          .from(emails)
          .where(inArray(emails.id, [id]))
          .catch(() => []);
        return r?.status === 'sent' ? r : undefined;
      },
      60_000,
      'the email recorded as sent',
    );
    const atSes = await sesSendsTo([victim]);
    await api.close();
    await running.stop();
    running = undefined;
    return { row, atSes, outageMs };
  }

  test('an outage shorter than the lease: the sent write is retried, one SES send', async () => {
    const { row, atSes } = await sendOne(testEnv({ DATABASE_URL: iso.url, SEND_LEASE_MS: '20000' }), 1_500);
    expect(atSes).toHaveLength(1);
    expect(row.messageId).toBeTruthy();
  }, 90_000);

  test('an outage longer than the lease: the outcome waits in Redis, the next claim records it without sending', async () => {
    // Lease 3 s: the write gives up after about 1 s, Postgres comes back after 4 s, the row is claimed again after
    // the lease and the kept SES outcome is recorded instead of a second send.
    const { row, atSes } = await sendOne(
      testEnv({
        DATABASE_URL: iso.url,
        SEND_LEASE_MS: '3000',
        SEND_BACKOFF_MS: '200',
        RECONCILE_INTERVAL_MS: '1000',
        RECONCILE_AFTER_MS: '1000',
      }),
      4_000,
    );
    expect(atSes).toHaveLength(1);
    expect(row.messageId).toBe(atSes[0].messageId);
  }, 90_000);
});
