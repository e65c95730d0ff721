/**
 * A throwaway Postgres primary and a real streaming replica of it, each on a free port in a temporary directory,
 * for the read-replica tests and benchmark. The shared test cluster is never touched: the primary is made by
 * `initdb`, the replica by `pg_basebackup -R` from it. Postgres refuses to run as root, so as root the binaries run
 * as the `postgres` user (`runuser`). `close()` stops both servers and deletes the directory.
 */
import { spawnSync } from 'node:child_process';
import { appendFileSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Client } from 'pg';
import { freePort, freshDatabase } from './services';

/** The highest installed PostgreSQL's `bin` directory (Debian layout, else `pg_config --bindir`). */
export function postgresBinDir(): string {
  const root = '/usr/lib/postgresql';
  if (existsSync(root)) {
    const versions = readdirSync(root)
      .filter((v) => existsSync(path.join(root, v, 'bin', 'initdb')))
      .sort((a, b) => Number(b) - Number(a));
    if (versions[0]) return path.join(root, versions[0], 'bin');
  }
  const out = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' });
  if (out.status === 0 && existsSync(path.join(out.stdout.trim(), 'initdb'))) return out.stdout.trim();
  throw new Error(
    'read-replica tests need the PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup): none found under /usr/lib/postgresql or by pg_config',
  );
}

/** A primary and its streaming replica. */
export interface ReplicaPair {
  dir: string;
  primaryPort: number;
  replicaPort: number;
  /** URL of `database` on the primary. */
  primaryUrl: string;
  /** URL of `database` on the replica. */
  replicaUrl: string;
  /** Runs one statement on the replica as the superuser (a connection of its own). */
  onReplica: <T = Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;
  /** Runs one statement on the primary as the superuser (a connection of its own). */
  onPrimary: <T = Record<string, unknown>>(text: string, values?: unknown[]) => Promise<T[]>;
  stopReplica: () => void;
  startReplica: () => void;
  /** Stops both servers and deletes the directory; safe to call twice. */
  close: () => void;
}

const asRoot = process.getuid?.() === 0;

function run(bin: string, args: string[], what: string): void {
  const argv = asRoot ? ['runuser', '-u', 'postgres', '--', bin, ...args] : [bin, ...args];
  const out = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', timeout: 300_000 });
  if (out.status !== 0)
    throw new Error(`${what} failed (${out.status ?? out.signal}): ${out.stderr || out.stdout || out.error?.message}`);
}

async function query<T>(url: string, text: string, values?: unknown[]): Promise<T[]> {
  const client = new Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  await client.connect();
  try {
    return (await client.query(text, values)).rows as T[];
  } finally {
    await client.end();
  }
}

/**
 * Makes the pair: `initdb` a primary (trust authentication on 127.0.0.1, replication allowed, `pg_stat_statements`
 * preloaded, no fsync), create and migrate `database` on it with `pg_stat_statements` installed, `pg_basebackup -R`
 * a replica and start it on another port. Resolves once the replica is in recovery and answers.
 */
export async function startReplicaPair(database = 'mailroom_replicas'): Promise<ReplicaPair> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-replicas-'));
  if (asRoot) {
    const pg = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    if (pg.status !== 0) throw new Error('read-replica tests run as root need a `postgres` user to run the servers as');
    chownSync(dir, Number(pg.stdout.trim()), Number(gid.stdout.trim()));
  }
  const primaryDir = path.join(dir, 'primary');
  const replicaDir = path.join(dir, 'replica');
  const [primaryPort, replicaPort] = [await freePort(), await freePort()];
  let started: string[] = [];
  const stop = (dataDir: string) => {
    if (!existsSync(path.join(dataDir, 'postmaster.pid'))) return;
    try {
      run(path.join(bin, 'pg_ctl'), ['-D', dataDir, '-m', 'immediate', '-w', '-t', '60', 'stop'], 'pg_ctl stop');
    } catch {
      // Already stopped.
    }
  };
  const close = () => {
    for (const d of started) stop(d);
    started = [];
    rmSync(dir, { recursive: true, force: true });
  };
  const start = (dataDir: string, log: string) => {
    run(
      path.join(bin, 'pg_ctl'),
      ['-D', dataDir, '-l', log, '-w', '-t', '180', 'start'],
      `pg_ctl start ${path.basename(dataDir)}`,
    );
    if (!started.includes(dataDir)) started.push(dataDir);
  };
  try {
    run(
      path.join(bin, 'initdb'),
      ['-D', primaryDir, '-U', 'postgres', '-A', 'trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
      'initdb',
    );
    const settings = [
      `port = ${primaryPort}`,
      `listen_addresses = '127.0.0.1'`,
      `unix_socket_directories = '${dir}'`,
      'fsync = off',
      'synchronous_commit = off',
      'shared_buffers = 32MB',
      'max_connections = 60',
      'wal_level = replica',
      'max_wal_senders = 4',
      'hot_standby = on',
      'jit = off',
      `shared_preload_libraries = 'pg_stat_statements'`,
      `pg_stat_statements.track = 'all'`,
    ];
    appendFileSync(path.join(primaryDir, 'postgresql.conf'), `\n${settings.join('\n')}\n`);
    start(primaryDir, path.join(dir, 'primary.log'));
    const admin = `postgres://postgres@127.0.0.1:${primaryPort}/postgres`;
    const primaryUrl = await freshDatabase(admin, database);
    await query(primaryUrl, 'create extension if not exists pg_stat_statements');
    run(
      path.join(bin, 'pg_basebackup'),
      [
        '-D',
        replicaDir,
        '-R',
        '-X',
        'stream',
        '-c',
        'fast',
        '-h',
        '127.0.0.1',
        '-p',
        String(primaryPort),
        '-U',
        'postgres',
      ],
      'pg_basebackup',
    );
    appendFileSync(path.join(replicaDir, 'postgresql.conf'), `\nport = ${replicaPort}\n`);
    start(replicaDir, path.join(dir, 'replica.log'));
    const replicaUrl = primaryUrl.replace(`:${primaryPort}/`, `:${replicaPort}/`);
    const [row] = await query<{ r: boolean }>(replicaUrl, 'select pg_is_in_recovery() as r');
    if (!row?.r) throw new Error('the replica is not in recovery');
    return {
      dir,
      primaryPort,
      replicaPort,
      primaryUrl,
      replicaUrl,
      onReplica: (text, values) => query(replicaUrl, text, values),
      onPrimary: (text, values) => query(primaryUrl, text, values),
      stopReplica: () => stop(replicaDir),
      startReplica: () => start(replicaDir, path.join(dir, 'replica.log')),
      close,
    };
  } catch (err) {
    close();
    throw err;
  }
}
