/**
 * Read replicas (`npm run bench -- replicas`): the API's read-heavy endpoints, requests/s, mean and p99 latency, with
 * no replica and with one streaming replica (`DATABASE_REPLICA_URLS`), in the same run, on the same data.
 *
 * A throwaway primary and a real replica of it (test/support/pg-replica.ts: `initdb`, `pg_basebackup -R`, each on a
 * free port; the shared cluster is not touched), BENCH_REPLICA_CONTACTS (default 20,000) contacts in one project.
 * Two API processes: `primary only` and `with replica` (the same code; only `DATABASE_REPLICA_URLS` differs), each
 * loaded in turn, endpoint by endpoint, for BENCH_REPLICA_SECONDS (default 5) with 10 connections, in
 * BENCH_REPLICA_ROUNDS (default 2) alternating rounds (means of the rounds printed), with the CPU the primary's and
 * the replica's Postgres backends spent per request (bench/cpu.ts). The share of reads each process sent to
 * the replica is read from its `/metrics` (`mailroom_db_reads_total`). Everything runs on one machine: the replica
 * competes with the primary and the API for the same cores, so this measures routing overhead and correctness under
 * load, not added capacity (docs/self-hosting/read-replicas.md says when a replica adds capacity).
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { createDatabase } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { freePort, waitForHttp } from '../test/support/services';
import { startReplicaPair } from '../test/support/pg-replica';
import { BackendCpu } from './cpu';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;

const ADMIN_TOKEN = 'bench-admin-token-0123456789';

/** The loads: the routes the replica serves (lists, search, stats, preview). */
const LOADS: { name: string; method: 'GET' | 'POST'; path: string; body?: unknown }[] = [
  { name: 'GET /contacts (first page)', method: 'GET', path: '/contacts?limit=50' },
  { name: 'GET /contacts?search=', method: 'GET', path: '/contacts?search=user12&limit=50' },
  {
    name: 'POST /segments/preview',
    method: 'POST',
    path: '/segments/preview',
    body: { filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }], sampleSize: 10 },
  },
  { name: 'GET /reputation', method: 'GET', path: '/reputation' },
];

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

async function seed(url: string, contacts: number): Promise<{ secretKey: string }> {
  const database = createDatabase({ url, poolSize: 1, applicationName: 'bench' });
  try {
    const project = await createProject(database.db, 'bench-replicas');
    await database.pool.query(
      `insert into contacts (id, project_id, email, email_key, subscribed, data)
       select gen_random_uuid(), $1, 'user' || i || '@example' || (i % 50) || '.com', 'user' || i || '@example' || (i % 50) || '.com',
         i % 10 <> 0, jsonb_build_object('plan', case when i % 7 = 0 then 'pro' else 'free' end, 'seats', i % 20)
       from generate_series(1, $2::int) i`,
      [project.id, contacts],
    );
    await database.pool.query('analyze');
    return { secretKey: project.secretKey };
  } finally {
    await database.close();
  }
}

async function readsTo(port: number): Promise<{ replica: number; primary: number }> {
  const text = await (
    await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })
  ).text();
  const sum = (connection: string) =>
    [
      ...text.matchAll(new RegExp(`^mailroom_db_reads_total\\{connection="${connection}"[^}]*\\} (\\S+)$`, 'gm')),
    ].reduce((n, m) => n + Number(m[1]), 0);
  return { replica: sum('replica'), primary: sum('primary') };
}

/**
 * Runs the replica bench. `env`: the run's base environment (Redis, queue prefix, SES endpoint); its
 * `DATABASE_URL` is replaced by the throwaway primary's. @returns the printed rows.
 */
export async function benchReplicas(
  env: Record<string, string>,
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
) {
  const contacts = Number(process.env.BENCH_REPLICA_CONTACTS ?? 20_000);
  const seconds = Number(process.env.BENCH_REPLICA_SECONDS ?? 5);
  const rounds = Number(process.env.BENCH_REPLICA_ROUNDS ?? 2);
  const pair = await startReplicaPair('mailroom_bench_replicas');
  const servers: { name: string; port: number; process: ChildProcess }[] = [];
  try {
    const { secretKey } = await seed(pair.primaryUrl, contacts);
    const [{ lsn }] = await pair.onPrimary<{ lsn: string }>('select pg_current_wal_insert_lsn()::text as lsn');
    for (let caughtUp = false; !caughtUp; await new Promise((r) => setTimeout(r, 200))) {
      caughtUp = (
        await pair.onReplica<{ ok: boolean }>('select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn])
      )[0].ok;
    }
    const base = {
      ...env,
      DATABASE_URL: pair.primaryUrl,
      DB_POOL_SIZE: '10',
      RATE_LIMIT_PER_MINUTE: '10000000',
      ADMIN_TOKEN,
      LOG_LEVEL: 'warn',
    };
    for (const [name, extra] of [
      ['primary only', {}],
      ['with replica', { DATABASE_REPLICA_URLS: pair.replicaUrl }],
    ] as const) {
      const port = await freePort();
      servers.push({
        name,
        port,
        process: spawnApp('apps/api/src/server.ts', { ...base, ...extra, PORT: String(port) }),
      });
      await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 60_000);
    }
    // The replica's first check must have found it usable before the load starts.
    const withReplica = servers[1];
    for (let ok = false; !ok; await new Promise((r) => setTimeout(r, 200))) {
      await fetch(`http://127.0.0.1:${withReplica.port}/contacts?limit=1`, {
        headers: { authorization: `Bearer ${secretKey}` },
      });
      ok = (await readsTo(withReplica.port)).replica > 0;
    }

    const samples = new Map<
      string,
      { rps: number[]; mean: number[]; p99: number[]; primaryCpu: number[]; replicaCpu: number[]; errors: number }
    >();
    const cpu = { primary: new BackendCpu(pair.primaryUrl), replica: new BackendCpu(pair.replicaUrl) };
    await Promise.all([cpu.primary.connect(), cpu.replica.connect()]);
    for (let round = 0; round < rounds; round++) {
      for (const l of LOADS) {
        const order = round % 2 === 0 ? servers : [...servers].reverse();
        for (const s of order) {
          await Promise.all([cpu.primary.start(), cpu.replica.start()]);
          const r = await autocannon({
            url: `http://127.0.0.1:${s.port}${l.path}`,
            method: l.method,
            connections: 10,
            duration: seconds,
            headers: { authorization: `Bearer ${secretKey}`, 'content-type': 'application/json' },
            body: l.body === undefined ? undefined : JSON.stringify(l.body),
          });
          const [primaryCpu, replicaCpu] = await Promise.all([cpu.primary.stop(), cpu.replica.stop()]);
          const key = `${l.name}\t${s.name}`;
          const m = samples.get(key) ?? { rps: [], mean: [], p99: [], primaryCpu: [], replicaCpu: [], errors: 0 };
          m.primaryCpu.push(primaryCpu / Math.max(1, r.requests.total));
          m.replicaCpu.push(replicaCpu / Math.max(1, r.requests.total));
          m.rps.push(r.requests.total / seconds);
          m.mean.push(r.latency.average);
          m.p99.push(r.latency.p99);
          m.errors += r.non2xx + r.errors;
          samples.set(key, m);
        }
      }
    }
    const rows = [];
    for (const l of LOADS) {
      const [a, b] = servers.map((s) => samples.get(`${l.name}\t${s.name}`)!);
      rows.push({
        endpoint: l.name,
        'req/s: primary only': Math.round(mean(a.rps)),
        'req/s: with replica': Math.round(mean(b.rps)),
        ratio: Number((mean(b.rps) / mean(a.rps)).toFixed(2)),
        'mean ms': `${mean(a.mean).toFixed(1)} / ${mean(b.mean).toFixed(1)}`,
        'p99 ms': `${Math.round(mean(a.p99))} / ${Math.round(mean(b.p99))}`,
        'primary PG CPU ms/req': `${mean(a.primaryCpu).toFixed(2)} / ${mean(b.primaryCpu).toFixed(2)}`,
        'replica PG CPU ms/req': `${mean(a.replicaCpu).toFixed(2)} / ${mean(b.replicaCpu).toFixed(2)}`,
        'non-2xx': a.errors + b.errors,
      });
    }
    await Promise.all([cpu.primary.end(), cpu.replica.end()]);
    const routed = await Promise.all(servers.map(async (s) => ({ process: s.name, ...(await readsTo(s.port)) })));
    console.log(
      `\nRead replicas (${contacts} contacts, 10 connections, ${seconds} s x ${rounds} rounds, means of the rounds; pairs are primary only / with replica; one machine)`,
    );
    console.table(rows);
    console.log('reads routed (mailroom_db_reads_total):');
    console.table(routed);
    return { rows, routed };
  } finally {
    await Promise.all(servers.map((s) => stop(s.process)));
    pair.close();
  }
}
