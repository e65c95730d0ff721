/**
 * Once per test run: a fresh database (created and migrated here, dropped in teardown), the SES emulator as a
 * child process, and the recording proxy in front of it. Tests assume nothing else about the services: each
 * test file uses its own queue prefix and each test its own project.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { Client } from 'pg';
import IORedis from 'ioredis';
import { migrate } from '../../packages/db/src/migrate';

const ADMIN_DB_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });
}

async function waitForHttp(url: string, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} did not answer within ${ms} ms`);
}

export default async function globalSetup(): Promise<void> {
  const admin = new Client({ connectionString: ADMIN_DB_URL });
  try {
    await admin.connect();
  } catch (err) {
    throw new Error(`Postgres is not answering at ${ADMIN_DB_URL} (${(err as Error).message}); start it or set TEST_POSTGRES_URL`);
  }
  const dbName = `mailroom_test_${Date.now()}_${randomBytes(3).toString('hex')}`;
  await admin.query(`create database "${dbName}"`);
  await admin.end();
  const dbUrl = new URL(ADMIN_DB_URL);
  dbUrl.pathname = `/${dbName}`;
  await migrate(dbUrl.toString());

  const redis = new IORedis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`Redis is not answering at ${REDIS_URL} (${(err as Error).message}); start it or set TEST_REDIS_URL`);
  } finally {
    redis.disconnect();
  }

  const sesPort = await freePort();
  const cli = path.join(path.dirname(require.resolve('aws-ses-v2-local/package.json')), 'dist', 'cli.js');
  const emulator: ChildProcess = spawn(process.execPath, [cli, '--host', '127.0.0.1', '--port', String(sesPort)], { stdio: 'ignore' });
  const emulatorUrl = `http://127.0.0.1:${sesPort}`;
  await waitForHttp(`${emulatorUrl}/health-check`, 15_000);
  const recorderProcess = spawn(
    process.execPath,
    [require.resolve('tsx/cli'), path.join(__dirname, 'ses-recorder.ts'), emulatorUrl],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const recorderUrl = await new Promise<string>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error('SES recorder did not start')), 15_000);
    recorderProcess.stdout!.once('data', (d: Buffer) => {
      clearTimeout(t);
      resolve(d.toString().trim());
    });
  });

  process.env.TEST_DATABASE_URL = dbUrl.toString();
  process.env.TEST_DATABASE_NAME = dbName;
  process.env.TEST_REDIS_URL = REDIS_URL;
  process.env.TEST_SES_ENDPOINT = recorderUrl;
  process.env.TEST_SES_EMULATOR = emulatorUrl;
  (globalThis as Record<string, unknown>).__mailroom = { emulator, recorderProcess, dbName };
}
