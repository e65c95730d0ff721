/**
 * The other checkout's side of `BENCH_CAMPAIGNS_B_DIR` (bench/campaigns.ts), run as its own process with that
 * checkout's tsconfig: migrates the database at `argv[3]` with the migrations of the checkout at `argv[2]`, then
 * answers on stdout (one JSON line) with a project of that checkout's schema, made by its own code: the project
 * named `argv[4]` when one exists (a new key is issued for it, `reused: true`), else a new one (named `argv[4] (seeding)` until the bench renames it once seeded) with a verified
 * sending domain `argv[5]` (`reused: false`). The other checkout's schema may differ from this one's, so nothing of
 * this checkout's `@mailroom/db` touches that database.
 *
 * @module
 */
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Client } from 'pg';

async function main(): Promise<void> {
  const [dir, url, name, domain] = process.argv.slice(2);
  // Imported from a CommonJS file, a module's exports may come as `default`.
  const from = async <T>(file: string): Promise<T> => {
    const mod = (await import(pathToFileURL(path.join(dir, 'packages/db/src', file)).href)) as T & { default?: T };
    return mod.default ?? mod;
  };
  const { migrate } = await from<{ migrate: (url: string) => Promise<void> }>('migrate.ts');
  const { createDatabase } = await from<{
    createDatabase: (o: { url: string; poolSize: number; applicationName: string }) => {
      db: unknown;
      close: () => Promise<void>;
    };
  }>('client.ts');
  const { createProject, addDomain, rotateKeys } = await from<{
    createProject: (db: unknown, name: string) => Promise<{ id: string; secretKey: string }>;
    addDomain: (db: unknown, projectId: string, domain: string, verified: boolean) => Promise<unknown>;
    rotateKeys: (db: unknown, projectId: string, graceHours: number) => Promise<{ secretKey: string }>;
  }>('queries/projects.ts');
  await migrate(url);
  const client = new Client({ connectionString: url, application_name: 'bench-b-setup' });
  await client.connect();
  const found = (
    await client.query<{ id: string; domain: string }>(
      'select p.id, d.domain from projects p join domains d on d.project_id = p.id where p.name = $1 limit 1',
      [name],
    )
  ).rows[0];
  await client.end();
  const database = createDatabase({ url, poolSize: 1, applicationName: 'bench-b-setup' });
  try {
    if (found) {
      const keys = await rotateKeys(database.db, found.id, 0);
      console.log(JSON.stringify({ id: found.id, secretKey: keys.secretKey, domain: found.domain, reused: true }));
    } else {
      const p = await createProject(database.db, `${name} (seeding)`);
      await addDomain(database.db, p.id, domain, true);
      console.log(JSON.stringify({ id: p.id, secretKey: p.secretKey, domain, reused: false }));
    }
  } finally {
    await database.close();
  }
}

main().then(
  () => process.exit(0),
  (err: Error) => {
    console.error(err);
    process.exit(1);
  },
);
