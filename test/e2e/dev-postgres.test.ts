/**
 * `npm run dev` on a fresh Debian Postgres: peer authentication on the Unix socket, scram-sha-256 over TCP, no
 * trust anywhere. scripts/dev-postgres.mjs (what dev.mjs runs before migrating) must make the development URL's role
 * log in by itself (through the socket, as the `postgres` OS user), never overwrite a password a role already has,
 * and print the commands to run when it cannot act. The server is a throwaway cluster (initdb in a temporary
 * directory, its own port), started and stopped here: the machine's shared Postgres is never touched.
 */
import { spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdtempSync, readdirSync, rmSync, chmodSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { ensureDatabase, migrate } from '@mailroom/db/migrate';
import { toSummary } from '../support/summary';

const ROOT = path.resolve(__dirname, '..', '..');
const SCRIPT = path.join(ROOT, 'scripts', 'dev-postgres.mjs');

/** Debian's newest server binaries, if installed. */
function binDir(): string | undefined {
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, 'bin', 'initdb')))
    .sort((a, b) => Number(a) - Number(b));
  return versions.length ? path.join(base, versions[versions.length - 1], 'bin') : undefined;
}

function postgresUid(): { uid: number; gid: number } | undefined {
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  return uid.status === 0 && gid.status === 0 ? { uid: Number(uid.stdout), gid: Number(gid.stdout) } : undefined;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

const bin = binDir();
const owner = postgresUid();
const root = process.getuid?.() === 0;
const runnable = Boolean(bin && owner && root);
if (!runnable) {
  toSummary(
    "NOT RUN: the fresh-Debian-Postgres test needs Debian's server binaries (/usr/lib/postgresql/<version>/bin, " +
      'apt-get install postgresql), a `postgres` OS user and root (to run initdb as that user).',
  );
}

let dir = '';
let port = 0;
const asPostgres = (cmd: string, args: string[]) =>
  spawnSync('runuser', ['-u', 'postgres', '--', cmd, ...args], { encoding: 'utf8', cwd: '/' });

beforeAll(async () => {
  if (!runnable) return;
  dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-fresh-pg-'));
  chmodSync(dir, 0o755);
  chownSync(dir, owner!.uid, owner!.gid);
  port = await freePort();
  // Debian's defaults for a new cluster: peer on the socket, scram-sha-256 over TCP.
  const init = asPostgres(path.join(bin!, 'initdb'), [
    '-D',
    path.join(dir, 'data'),
    '-U',
    'postgres',
    '--auth-local=peer',
    '--auth-host=scram-sha-256',
    '-E',
    'UTF8',
    '--no-sync',
  ]);
  expect(init.stderr).not.toMatch(/FATAL|initdb: error/);
  expect(init.status).toBe(0);
  const start = asPostgres(path.join(bin!, 'pg_ctl'), [
    '-D',
    path.join(dir, 'data'),
    '-l',
    path.join(dir, 'log'),
    '-w',
    '-t',
    '60',
    '-o',
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c shared_buffers=16MB -c max_connections=20`,
    'start',
  ]);
  expect(start.status).toBe(0);
}, 120_000);

afterAll(() => {
  if (!runnable || !dir) return;
  asPostgres(path.join(bin!, 'pg_ctl'), ['-D', path.join(dir, 'data'), '-m', 'immediate', '-w', 'stop']);
  rmSync(dir, { recursive: true, force: true });
});

const url = (user: string, password: string) => `postgres://${user}:${password}@127.0.0.1:${port}/mailroom_dev`;
const run = (u: string, asUser?: string) => {
  const args = [SCRIPT, '--url', u, '--socket-dir', dir];
  return asUser
    ? spawnSync('runuser', ['-u', asUser, '--', process.execPath, ...args], {
        encoding: 'utf8',
        cwd: '/',
        timeout: 60_000,
      })
    : spawnSync(process.execPath, args, { encoding: 'utf8', timeout: 60_000 });
};
async function logsIn(u: string): Promise<boolean> {
  const admin = new URL(u);
  admin.pathname = '/postgres';
  const c = new Client({ connectionString: admin.toString() });
  try {
    await c.connect();
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => undefined);
  }
}

describe('a fresh Debian Postgres (peer on the socket, scram over TCP)', () => {
  test("a new role: created through the socket with the URL's password; it can create, migrate and own the database", async () => {
    if (!runnable) return; // said above: NOT RUN
    const u = url('mailroom_dev', 'dev-pass');
    expect(await logsIn(u)).toBe(false);
    const r = run(u);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(r.stdout).toContain('role "mailroom_dev" can now log in');
    expect(await logsIn(u)).toBe(true);
    // What dev.mjs does next: create the database and migrate, as that role (the extensions are trusted ones).
    await ensureDatabase(u);
    await migrate(u);
    // A second run has nothing to do.
    const again = run(u);
    expect({ status: again.status, out: again.stdout.trim() }).toEqual({ status: 0, out: 'ok' });
  }, 180_000);

  test('the superuser without a password (the compose URL postgres:postgres): given the password', async () => {
    if (!runnable) return; // said above: NOT RUN
    const u = url('postgres', 'postgres');
    expect(await logsIn(u)).toBe(false);
    const r = run(u);
    expect(r.status).toBe(0);
    expect(await logsIn(u)).toBe(true);
  }, 60_000);

  test('a role that already has another password is never changed: exit 1 with the commands to run', async () => {
    if (!runnable) return; // said above: NOT RUN
    const u = url('mailroom_dev', 'not-the-password');
    const r = run(u);
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('already has a password');
    expect(r.stderr).toContain(`sudo -u postgres psql -p ${port} -c`);
    expect(await logsIn(url('mailroom_dev', 'dev-pass'))).toBe(true);
  }, 60_000);

  test('without a way to become the postgres OS user (not root, no sudo): exit 1 with the exact commands', async () => {
    if (!runnable) return; // said above: NOT RUN
    const u = url('someone_else', 'pw');
    const r = run(u, 'nobody');
    expect(r.status).toBe(1);
    expect(r.stderr).toContain('password authentication failed for user "someone_else"');
    expect(r.stderr).toContain(
      `sudo -u postgres psql -p ${port} -c "CREATE ROLE \\"someone_else\\" LOGIN CREATEDB PASSWORD 'pw';"`,
    );
    expect(await logsIn(u)).toBe(false);
  }, 60_000);
});
