/**
 * Applies the generated migrations in `packages/db/drizzle`. One function used by deploys (`npm run migrate`),
 * `npm run dev` and the tests. Concurrent callers serialise on a Postgres advisory lock.
 *
 * @module
 */
import path from 'node:path';
import { Client } from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { migrate as drizzleMigrate } from 'drizzle-orm/node-postgres/migrator';

/** Folder of the generated SQL migrations and their journal. */
export const MIGRATIONS_FOLDER = path.join(__dirname, '..', 'drizzle');

// Arbitrary constant: the advisory lock key reserved for migrations.
const MIGRATION_LOCK = 7_341_882_001;

/**
 * Brings the database at `databaseUrl` up to the latest schema.
 *
 * @throws the driver's error when Postgres is unreachable or a migration fails (that migration is rolled back).
 */
export async function migrate(databaseUrl: string): Promise<void> {
  const client = new Client({ connectionString: databaseUrl, application_name: 'mailroom-migrate' });
  await client.connect();
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await drizzleMigrate(drizzle(client), { migrationsFolder: MIGRATIONS_FOLDER });
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await client.end();
  }
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
    if (!rowCount) await client.query(`create database "${name.replace(/"/g, '""')}"`).catch((err: { code?: string }) => {
      if (err.code !== '42P04') throw err; // created meanwhile by another process
    });
  } finally {
    await client.end();
  }
}
