/**
 * Applies the generated migrations in `packages/db/drizzle`. One function used by deploys (`npm run migrate`),
 * `npm run dev` and the tests. Concurrent callers serialise on a Postgres advisory lock.
 *
 * @module
 */
import path from 'node:path';
import os from 'node:os';
import { copyFile, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { Client } from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate as drizzleMigrate } from 'drizzle-orm/node-postgres/migrator';

/** Folder of the generated SQL migrations and their journal. */
export const MIGRATIONS_FOLDER = path.join(__dirname, '..', 'drizzle');

// Arbitrary constant: the advisory lock key reserved for migrations.
const MIGRATION_LOCK = 7_341_882_001;

/**
 * Brings the database at `databaseUrl` up to the latest schema, or only up to the migration tagged `options.until`
 * (e.g. `0017_counter_deltas`; tests and benchmarks fill a database on an older schema and then migrate the rest).
 *
 * @throws the driver's error when Postgres is unreachable or a migration fails (that migration is rolled back);
 *   an Error when `options.until` names no migration.
 */
export async function migrate(databaseUrl: string, options: { until?: string } = {}): Promise<void> {
  const folder = options.until ? await migrationsUntil(options.until) : MIGRATIONS_FOLDER;
  const client = new Client({ connectionString: databaseUrl, application_name: 'mailroom-migrate' });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await drizzleMigrate(drizzle(client), { migrationsFolder: folder });
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await client.end();
    if (folder !== MIGRATIONS_FOLDER) await rm(folder, { recursive: true, force: true });
  }
}

/** A temporary copy of the migrations folder whose journal ends at the migration tagged `tag`. */
async function migrationsUntil(tag: string): Promise<string> {
  const journal = JSON.parse(await readFile(path.join(MIGRATIONS_FOLDER, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
  const last = journal.entries.findIndex((e) => e.tag === tag);
  if (last < 0) throw new Error(`no migration is tagged ${tag}`);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mailroom-migrations-'));
  await mkdir(path.join(dir, 'meta'));
  const entries = journal.entries.slice(0, last + 1);
  await writeFile(path.join(dir, 'meta', '_journal.json'), JSON.stringify({ ...journal, entries }));
  for (const e of entries) await copyFile(path.join(MIGRATIONS_FOLDER, `${e.tag}.sql`), path.join(dir, `${e.tag}.sql`));
  return dir;
}

/**
 * Creates the database named in `databaseUrl` if it does not exist (connecting to the `postgres` database of the
 * same server). Used by `npm run dev` and `npm run migrate` on a fresh machine.
 */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const target = new URL(databaseUrl);
  const name = decodeURIComponent(target.pathname.replace(/^\//, ''));
  if (!name) return;
  const admin = new URL(databaseUrl);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    const { rowCount } = await client.query('select 1 from pg_database where datname = $1', [name]);
    if (!rowCount)
      await client.query(`create database "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err; // created meanwhile by another process
      });
  } finally {
    await client.end();
  }
}
