/**
 * Starts what tests and benchmarks run against: a fresh Postgres database (migrated), the SES v2 emulator as a
 * child process and the recording proxy in front of it (its own process, so its timestamps are not delayed by
 * the caller's work).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { Client } from 'pg';
import { migrate } from '../../packages/db/src/migrate';

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

export async function waitForHttp(url: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${ms} ms`);
}

/** Creates (or re-creates) database `name` on the server of `adminUrl` and migrates it. @returns its URL. */
export async function freshDatabase(adminUrl: string, name: string, until?: string): Promise<string> {
  const admin = new Client({ connectionString: adminUrl });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(
      `Postgres is not answering at ${adminUrl} (${(err as Error).message}); start it or set TEST_POSTGRES_URL`,
    );
  }
  await admin.query(`drop database if exists "${name}" with (force)`);
  await admin.query(`create database "${name}"`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  await migrate(url.toString(), { until });
  return url.toString();
}

/** Drops a database made by {@link freshDatabase}. */
export async function dropDatabase(adminUrl: string, name: string): Promise<void> {
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`drop database if exists "${name}" with (force)`);
  await admin.end();
}

/** The SES emulator and the recorder in front of it. */
export interface SesStack {
  /** Where SES clients should point (the recorder). */
  endpoint: string;
  /** The emulator itself. */
  emulator: string;
  processes: ChildProcess[];
  stop(): void;
}

export async function startSesStack(): Promise<SesStack> {
  const sesPort = await freePort();
  const cli = path.join(path.dirname(require.resolve('aws-ses-v2-local/package.json')), 'dist', 'cli.js');
  const emulatorProcess = spawn(process.execPath, [cli, '--host', '127.0.0.1', '--port', String(sesPort)], {
    stdio: 'ignore',
  });
  const emulator = `http://127.0.0.1:${sesPort}`;
  await waitForHttp(`${emulator}/health-check`, 15_000);
  const recorderProcess = spawn(
    process.execPath,
    ['--import', 'tsx', path.join(__dirname, 'ses-recorder.ts'), emulator],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  const endpoint = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('SES recorder did not start')), 15_000);
    recorderProcess.stdout.once('data', (d: Buffer) => {
      clearTimeout(t);
      resolve(d.toString().trim());
    });
  });
  const processes = [emulatorProcess, recorderProcess];
  return { endpoint, emulator, processes, stop: () => processes.forEach((p) => p.kill()) };
}
