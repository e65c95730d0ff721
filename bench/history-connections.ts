/**
 * The connection budget, counted for docs/self-hosting/sizing.md: one API process and one worker process (default
 * `DB_POOL_SIZE`), each in its own process; the TCP connections each holds to Postgres (:5432) and Redis (:6379)
 * are read from `/proc/<pid>/fd` and `/proc/net/tcp` (exact per process, whatever else shares the servers), idle and
 * at the peak of a load: `/v1/track` at 50 connections on the API while the worker drains 1,000 emails with the
 * SES limiter raised. Postgres's own view (`pg_stat_activity` by `application_name`) and Redis's client names
 * (`CLIENT LIST`) are printed beside.
 *
 * @module
 */
import autocannon from 'autocannon';
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { sql } from 'drizzle-orm';
import IORedis from 'ioredis';
import type { Database } from '@mailroom/db/client';
import { freePort, waitForHttp } from '../test/support/services';
import { benchQueuePrefix } from './queue-prefix';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;

/** Established TCP connections of process `pid` to local port `port`, with the local port of each. */
function sockets(pid: number, port: number): number[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]);
    } catch {
      // fd closed meanwhile
    }
  }
  const local: number[] = [];
  for (const file of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(file, 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 10 || f[3] !== '01') continue; // ESTABLISHED
      const remotePort = parseInt(f[2].split(':')[1], 16);
      if (remotePort === port && inodes.has(f[9])) local.push(parseInt(f[1].split(':')[1], 16));
    }
  }
  return local;
}

/** Counts the Postgres and Redis connections of an API and a worker process, idle and under load. */
export async function countConnections(
  env: Record<string, string>,
  database: Database,
  project: { secretKey: string; publicKey: string; domain: string },
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
): Promise<Record<string, string | number>[]> {
  const { DB_POOL_SIZE: _ignored, ...defaults } = env;
  const port = await freePort();
  const appEnv = {
    ...defaults,
    PORT: String(port),
    RATE_LIMIT_PER_MINUTE: '10000000',
    WORKER_HEALTH_PORT: '0',
    SES_MAX_SEND_RATE: '10000',
    SES_RATE_SAFETY_MS: '0',
    QUEUE_PREFIX: benchQueuePrefix('conn'),
  };
  const api = spawnApp('apps/api/src/server.ts', appEnv);
  const worker = spawnApp('apps/worker/src/main.ts', appEnv);
  const base = `http://127.0.0.1:${port}`;
  const redisUrl = env.REDIS_URL;
  const redis = new IORedis(redisUrl);
  const rows: Record<string, string | number>[] = [];
  try {
    await waitForHttp(`${base}/health/ready`, 30_000);
    await new Promise((r) => setTimeout(r, 3_000)); // the worker's queues, LISTEN and maintenance ticks are up
    const count = () => ({
      apiPg: sockets(api.pid!, 5432).length,
      apiRedis: sockets(api.pid!, 6379).length,
      workerPg: sockets(worker.pid!, 5432).length,
      workerRedis: sockets(worker.pid!, 6379).length,
    });
    const idle = count();
    const names = async (pid: number) => {
      const ports = new Set(sockets(pid, 6379));
      const list = String(await redis.client('LIST'));
      const byName: Record<string, number> = {};
      for (const line of list.split('\n')) {
        const addr = /addr=\S+:(\d+)/.exec(line);
        if (!addr || !ports.has(Number(addr[1]))) continue;
        const name = /name=(\S*)/.exec(line)?.[1] || '(unnamed)';
        const cmd = /cmd=(\S*)/.exec(line)?.[1] ?? '';
        // BullMQ names its connections `<prefix>:<base64 of the queue name>`.
        const queue = /:([A-Za-z0-9+/=]+)$/.exec(name)?.[1];
        const key = `${queue ? `queue ${Buffer.from(queue, 'base64').toString('utf8')}` : name} [${cmd}]`;
        byName[key] = (byName[key] ?? 0) + 1;
      }
      return Object.entries(byName)
        .map(([k, v]) => `${v}× ${k}`)
        .join('; ');
    };
    const apiNames = await names(api.pid!);
    const workerNames = await names(worker.pid!);

    // Load: the worker drains 1,000 emails while /v1/track runs at 50 connections on the API.
    const peak = { ...idle };
    const sample = setInterval(() => {
      const c = count();
      for (const k of Object.keys(c) as (keyof typeof c)[]) peak[k] = Math.max(peak[k], c[k]);
    }, 50);
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`${base}/v1/send`, {
        method: 'POST',
        headers: { authorization: `Bearer ${project.secretKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          to: Array.from({ length: 50 }, (_, j) => `conn${i * 50 + j}@bench.test`),
          from: `c@${project.domain}`,
          subject: 'Hi',
          body: '<p>Hi</p>',
        }),
      });
      if (res.status !== 202) throw new Error(`/v1/send: ${res.status} ${await res.text()}`);
    }
    let n = 0;
    await autocannon({
      url: `${base}/v1/track`,
      connections: 50,
      duration: 4,
      requests: [
        {
          method: 'POST',
          headers: { authorization: `Bearer ${project.publicKey}`, 'content-type': 'application/json' },
          setupRequest: (req) => ({
            ...req,
            body: JSON.stringify({ email: `load${n++ % 5000}@bench.test`, event: 'login' }),
          }),
        },
      ],
    });
    clearInterval(sample);
    const activity = await database.db.execute<{ application_name: string; n: number; listening: number }>(sql`
      select application_name, count(*)::int as n, count(*) filter (where query ilike 'listen%')::int as listening
      from pg_stat_activity where datname = current_database() and application_name like 'mailroom-%' group by 1 order by 1`);
    rows.push(
      {
        process: 'API',
        'Postgres idle': idle.apiPg,
        'Postgres peak': peak.apiPg,
        'Redis idle': idle.apiRedis,
        'Redis peak': peak.apiRedis,
        'Redis clients (name [last cmd])': apiNames,
      },
      {
        process: 'worker',
        'Postgres idle': idle.workerPg,
        'Postgres peak': peak.workerPg,
        'Redis idle': idle.workerRedis,
        'Redis peak': peak.workerRedis,
        'Redis clients (name [last cmd])': workerNames,
      },
    );
    console.log(
      `\nConnections per process (DB_POOL_SIZE default; peak under /v1/track at 50 connections while the worker drains 1,000 emails)`,
    );
    console.table(rows);
    console.log(
      'pg_stat_activity after the load:',
      activity.rows.map((r) => `${r.application_name} ${r.n} (LISTEN ${r.listening})`).join(', '),
    );
  } finally {
    redis.disconnect();
    await Promise.all([stop(api), stop(worker)]);
  }
  return rows;
}
