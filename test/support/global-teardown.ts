import type { ChildProcess } from 'node:child_process';
import { Client } from 'pg';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as Record<string, unknown>).__mailroom as
    | { emulator: ChildProcess; recorderProcess: ChildProcess; dbName: string }
    | undefined;
  if (!state) return;
  state.emulator.kill();
  state.recorderProcess.kill();
  const admin = new Client({ connectionString: process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  await admin.query(`drop database if exists "${state.dbName}" with (force)`);
  await admin.end();
}
