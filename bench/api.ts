/**
 * `npm run bench -- api`: `POST /v1/send` (1 recipient) and `POST /v1/track` on the API beside the bare ceiling
 * (`bench/ceiling-server.ts`: node:http, a pg pool, the one unavoidable statement and, for send, one BullMQ add),
 * each in its own process, under the same load: autocannon, 50 connections, a different contact per request, rate
 * limit raised, no worker. The servers take turns in `BENCH_ROUNDS` rounds (default 5) of `BENCH_SECONDS / rounds`
 * each, so that both see the same noise of a shared machine; req/s is over all rounds, p50/p99 the median of the
 * rounds'. Beside them, CPU milliseconds per request of the server's process and of the bench database's Postgres
 * backends during that server's rounds (`bench/cpu.ts`, from /proc). Then `/v1/send` with 10 recipients on the API alone (`BENCH_API_TEN=0` skips it).
 *
 * `BENCH_API_ROUND_P99=1` also prints each round's p99 of each server (is a median's miss one stall or all rounds?).
 * `BENCH_API_LOADS=/v1/track,20 projects` runs only the loads whose names contain one of the comma-separated parts.
 * `BENCH_API_EXPRESS=1` adds the Express floor (`bench/express-floor-server.ts`: the ceiling's work behind Express).
 * `BENCH_PROFILE=dir` writes a `--cpu-prof` profile of the API process there. `BENCH_API_B_ENV="K=V,K2=V2"` runs
 * a second API process with these settings added, in the same rounds (to compare a setting in one run);
 * `BENCH_API_B_DIR=/path/to/other/checkout` runs that second API from another checkout (before/after a change).
 * `BENCH_API_B_NODE_FLAGS="--flag …"` runs a second API process of this checkout started with those Node flags
 * (a GC setting beside the default in one run).
 *
 * @module
 */
import autocannon from 'autocannon';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import os from 'node:os';
import { freePort, waitForHttp } from '../test/support/services';
import { BackendCpu, processCpuMs } from './cpu';

type Spawn = (file: string, env: Record<string, string>, nodeFlags?: string[]) => ChildProcess;

interface Load {
  name: string;
  path: string;
  body: (p: BenchProject) => Record<string, unknown>;
  /** How many of the bench's projects the requests rotate over (1 or all of them). */
  projects: number;
}

/** A project with a verified sending domain. */
interface BenchProject {
  id: string;
  secretKey: string;
  domain: string;
}

interface Server {
  name: string;
  port: number;
}

/**
 * One autocannon run: 50 connections, a different contact per request, the requests rotating over the first
 * `l.projects` projects (each request with that project's key; `x-project-id` tells the ceiling, which has no auth).
 */
async function load(port: number, projects: BenchProject[], l: Load, seconds: number) {
  let turn = 0;
  return autocannon({
    url: `http://127.0.0.1:${port}${l.path}`,
    connections: 50,
    duration: seconds,
    requests: [
      {
        method: 'POST',
        setupRequest: (req) => {
          const p = projects[turn++ % l.projects];
          const headers = {
            authorization: `Bearer ${p.secretKey}`,
            'content-type': 'application/json',
            'x-project-id': p.id,
          };
          return { ...req, headers, body: JSON.stringify(l.body(p)) };
        },
      },
    ],
  });
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * Runs the API bench over `projects` (each with a verified domain): every load once with all requests in the first
 * project and once spread over all of them (20 projects sending at once). @returns the printed rows.
 */
export async function benchApi(
  env: Record<string, string>,
  projects: BenchProject[],
  spawnApp: Spawn,
  stop: (p: ChildProcess) => Promise<void>,
): Promise<Record<string, string | number>[]> {
  const profile = process.env.BENCH_PROFILE ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE}`] : [];
  const apiEnv = { ...env, RATE_LIMIT_PER_MINUTE: '10000000' };
  const bEnv = process.env.BENCH_API_B_ENV
    ? Object.fromEntries(
        process.env.BENCH_API_B_ENV.split(',').map((kv) => [
          kv.slice(0, kv.indexOf('=')),
          kv.slice(kv.indexOf('=') + 1),
        ]),
      )
    : undefined;
  const bDir = process.env.BENCH_API_B_DIR;
  const servers: (Server & { process: ChildProcess })[] = [];
  const backends = new BackendCpu(env.DATABASE_URL);
  await backends.connect();
  const start = async (name: string, file: string, e: Record<string, string>, flags: string[] = []) => {
    const port = await freePort();
    servers.push({ name, port, process: spawnApp(file, { ...e, PORT: String(port) }, flags) });
    await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 30_000);
  };
  const seconds = Number(process.env.BENCH_SECONDS ?? 10);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 5);
  let n = 0;
  const many = projects.length;
  const send = (recipients: number, spread = 1): Load => ({
    name: `POST /v1/send, ${recipients} recipient${recipients > 1 ? 's' : ''}${spread > 1 ? `, ${spread} projects` : ''}`,
    path: '/v1/send',
    projects: spread,
    body: (p) => ({
      to: recipients === 1 ? `u${n++}@bench.test` : Array.from({ length: recipients }, () => `u${n++}@bench.test`),
      from: `b@${p.domain}`,
      subject: 'Hello {{name}}',
      body: '<p>Hi {{name}}</p>',
      data: { name: 'Ann' },
    }),
  });
  const track = (spread = 1): Load => ({
    name: `POST /v1/track${spread > 1 ? `, ${spread} projects` : ''}`,
    path: '/v1/track',
    projects: spread,
    body: () => ({ email: `t${n++}@bench.test`, event: 'signup', data: { plan: 'pro' } }),
  });
  const p = projects[0];
  const rows: Record<string, string | number>[] = [];
  const perRound: string[] = [];
  try {
    await start('API', 'apps/api/src/server.ts', apiEnv, profile);
    await start('ceiling', 'bench/ceiling-server.ts', { ...env, PROJECT_ID: p.id });
    if (process.env.BENCH_API_EXPRESS === '1')
      await start('Express floor', 'bench/express-floor-server.ts', { ...env, PROJECT_ID: p.id });
    if (bEnv) await start(`API ${process.env.BENCH_API_B_ENV}`, 'apps/api/src/server.ts', { ...apiEnv, ...bEnv });
    const bFlags = process.env.BENCH_API_B_NODE_FLAGS?.split(' ').filter(Boolean);
    if (bFlags?.length) await start(`API ${bFlags.join(' ')}`, 'apps/api/src/server.ts', apiEnv, bFlags);
    if (bDir) {
      const port = await freePort();
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(bDir, 'apps/api/src/server.ts')], {
        cwd: bDir,
        env: { ...process.env, ...apiEnv, PORT: String(port), TSX_TSCONFIG_PATH: path.join(bDir, 'tsconfig.json') },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      servers.push({ name: `API from ${bDir}`, port, process: child });
      await waitForHttp(`http://127.0.0.1:${port}/health/ready`, 30_000);
    }
    const only = process.env.BENCH_API_LOADS?.split(',');
    const loads = [send(1), track(), ...(many > 1 ? [send(1, many), track(many)] : [])].filter(
      (l) => !only || only.some((o) => l.name.includes(o)),
    );
    // Warm-up: JIT, pools and the auth cache of every process, on every path measured (the first round of a path
    // not yet run paid its compilation and first connections: a p99 1.5–2× the later rounds', in either server).
    for (const s of servers) for (const l of loads) await load(s.port, projects, l, 1);
    for (const l of loads) {
      const got = servers.map(() => ({
        requests: 0,
        time: 0,
        p50: [] as number[],
        p99: [] as number[],
        non2xx: 0,
        cpu: 0,
        pg: 0,
      }));
      for (let r = 0; r < rounds; r++) {
        for (const [i, s] of servers.entries()) {
          const cpu = processCpuMs(s.process.pid ?? 0);
          await backends.start();
          const run = await load(s.port, projects, l, seconds / rounds);
          got[i].pg += await backends.stop();
          got[i].cpu += processCpuMs(s.process.pid ?? 0) - cpu;
          got[i].requests += run.requests.total;
          got[i].time += run.duration;
          got[i].p50.push(run.latency.p50);
          got[i].p99.push(run.latency.p99);
          got[i].non2xx += run.non2xx;
        }
      }
      const [ceiling] = got.slice(1);
      const rate = (g: (typeof got)[number]) => g.requests / g.time;
      for (const [i, s] of servers.entries()) {
        const g = got[i];
        rows.push({
          load: l.name,
          server: s.name,
          'req/s': Math.round(rate(g)),
          'p50 ms': median(g.p50),
          'p99 ms': median(g.p99),
          'req/s ÷ ceiling': (rate(g) / rate(ceiling)).toFixed(2),
          'p99 ÷ ceiling': (median(g.p99) / median(ceiling.p99)).toFixed(2),
          'non-2xx': g.non2xx,
          'server CPU ms/req': (g.cpu / g.requests).toFixed(2),
          'Postgres CPU ms/req': (g.pg / g.requests).toFixed(2),
        });
        if (process.env.BENCH_API_ROUND_P99 === '1') perRound.push(`${l.name}, ${s.name}: p99 ${g.p99.join(' · ')} ms`);
      }
    }
    if (process.env.BENCH_API_TEN !== '0') {
      const a = await load(servers[0].port, projects, send(10), seconds);
      rows.push({
        load: `${send(10).name} (${Math.round(a.requests.average * 10)} emails/s)`,
        server: 'API',
        'req/s': Math.round(a.requests.average),
        'p50 ms': a.latency.p50,
        'p99 ms': a.latency.p99,
        'non-2xx': a.non2xx,
      });
    }
  } finally {
    await backends.end();
    await Promise.all(servers.map((s) => stop(s.process)));
  }
  console.log(
    `\nAPI beside the bare ceiling (${seconds} s each in ${rounds} alternating rounds, 50 connections, each server in its own process, this ${os.cpus().length}-core machine)`,
  );
  console.table(rows);
  if (perRound.length) console.log(`\nEach round's p99, in order:\n${perRound.join('\n')}`);
  return rows;
}
