/**
 * CPU and memory accounting for the benches: the CPU time a process and the Postgres backends of one database used
 * over an interval, read from `/proc/<pid>/stat` (Linux only; elsewhere every reading is 0), and a process's resident
 * set size (`memory`), and the CPU of the host's Postgres, Redis and SES emulator processes (`servicesCpuSince`, the
 * worker benches' CPU per email of the services). The API bench divides the CPU by the requests served, so it can print CPU milliseconds per
 * request for the server and for Postgres beside req/s: on a machine whose cores are shared, that says which side a
 * gap comes from, where a sampling profile counts time spent waiting for a core as the system call that yielded it.
 *
 * @module
 */
import { readdirSync, readFileSync } from 'node:fs';
import { Client } from 'pg';

const TICK_MS = 10; // USER_HZ is 100 on Linux

/** CPU time (user + system, ms) `pid` has used so far; 0 when it is gone or /proc is not there. */
export function processCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0;
  }
}

/** The services a bench shares the host with, whose CPU the worker benches report per email. */
export type Service = 'postgres' | 'redis' | 'emulator';

/** A reading of the services' processes: each one's service and CPU time so far (ms), by pid. */
export type ServicesCpu = Map<number, { service: Service; ms: number }>;

/**
 * Reads the CPU time (ms) used so far by each of the host's Postgres processes (every one: backends of every
 * database, the bench's own included, the WAL writer, the checkpointer), its Redis and the SES emulator, from
 * `/proc` (empty where there is none). The drain's rate is bounded by the whole host's CPU, not only the worker's:
 * these say what else each email costs the machine. Compare two readings with {@link servicesCpuSince}.
 */
export function servicesCpuSnapshot(): ServicesCpu {
  const reading: ServicesCpu = new Map();
  let pids: string[] = [];
  try {
    pids = readdirSync('/proc').filter((d) => /^\d+$/.test(d));
  } catch {
    return reading;
  }
  for (const pid of pids) {
    let comm = '';
    let cmdline = '';
    try {
      comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
      if (comm === 'node') cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    } catch {
      continue;
    }
    const service: Service | undefined =
      comm === 'postgres'
        ? 'postgres'
        : comm.startsWith('redis-server')
          ? 'redis'
          : cmdline.includes('aws-ses-v2-local')
            ? 'emulator'
            : undefined;
    if (service) reading.set(Number(pid), { service, ms: processCpuMs(Number(pid)) });
  }
  return reading;
}

/**
 * CPU time (ms) each service used since `before` ({@link servicesCpuSnapshot}), summed over the processes alive now:
 * a process started since counts in full, one that exited since drops out (its share is lost, never negative: on a
 * host where other work opens and closes Postgres connections, a plain difference of sums went below zero).
 */
export function servicesCpuSince(before: ServicesCpu): Record<Service, number> {
  const sums: Record<Service, number> = { postgres: 0, redis: 0, emulator: 0 };
  for (const [pid, now] of servicesCpuSnapshot()) sums[now.service] += Math.max(0, now.ms - (before.get(pid)?.ms ?? 0));
  return sums;
}

/**
 * Peak (`VmHWM`) and current (`VmRSS`) resident set size of a process (MiB, rounded), from `/proc/<pid>/status`.
 *
 * @throws when the process is gone or there is no /proc (read it before the process exits).
 */
export function memory(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string) =>
    Number(/(\d+) kB/.exec(status.split('\n').find((l) => l.startsWith(field)) ?? '')?.[1] ?? 0);
  return { peak: Math.round(kb('VmHWM:') / 1024), now: Math.round(kb('VmRSS:') / 1024) };
}

/**
 * Reads the CPU used by the backends connected to one database. `start()` notes every backend's CPU so far;
 * `stop()` returns the ms used since (a backend that connected meanwhile counts in full).
 */
export class BackendCpu {
  private readonly client: Client;
  private before = new Map<number, number>();

  constructor(databaseUrl: string) {
    this.client = new Client({ connectionString: databaseUrl, application_name: 'bench-cpu' });
  }

  async connect(): Promise<void> {
    await this.client.connect();
  }

  private async read(): Promise<Map<number, number>> {
    const r = await this.client.query<{ pid: number }>(
      "select pid from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and application_name <> 'bench'",
    );
    return new Map(r.rows.map((row) => [row.pid, processCpuMs(row.pid)]));
  }

  async start(): Promise<void> {
    this.before = await this.read();
  }

  /** @returns CPU ms used by the database's backends since `start()`. */
  async stop(): Promise<number> {
    const now = await this.read();
    let ms = 0;
    for (const [pid, cpu] of now) ms += cpu - (this.before.get(pid) ?? 0);
    return ms;
  }

  async end(): Promise<void> {
    await this.client.end();
  }
}
