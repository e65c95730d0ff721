#!/usr/bin/env node
// Makes sure the development DATABASE_URL can log in (used by `npm run dev`; runnable alone:
// `node scripts/dev-postgres.mjs [--url postgres://…] [--socket-dir DIR]`).
//
// A fresh Debian/Ubuntu Postgres trusts no one over TCP (scram-sha-256 in pg_hba.conf) and lets only the
// `postgres` OS user in through the Unix socket (peer). When the URL's role cannot log in and the server is on this
// machine, this connects through the socket as the `postgres` OS user (runuser as root, else `sudo -n`) and creates
// the URL's role with its password (LOGIN CREATEDB: it creates the database and owns it; the extensions the
// migrations create are trusted ones), or gives an existing role without a password the URL's password. It never
// changes a password a role already has. When it cannot, it prints the exact commands to run instead.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '::1', '[::1]']);
// 28P01 invalid_password; 28000 invalid_authorization_specification (no pg_hba.conf entry, unknown role).
const AUTH_FAILURES = new Set(['28P01', '28000']);

/** Tries to log in with `url` (to the `postgres` database, which always exists). @returns undefined, or the error. */
async function tryLogin(url) {
  const require = createRequire(import.meta.url);
  const { Client } = require('pg');
  const admin = new URL(url);
  admin.pathname = '/postgres';
  const client = new Client({ connectionString: admin.toString(), connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
    await client.end();
    return undefined;
  } catch (err) {
    await client.end().catch(() => undefined);
    return err;
  }
}

const quoteIdent = (s) => `"${s.replace(/"/g, '""')}"`;
const quoteLiteral = (s) => `'${s.replace(/'/g, "''")}'`;

/** The SQL that creates the role or sets the password of a role that has none (never overwriting one). */
export function roleSql(user, password) {
  return `DO $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = ${quoteLiteral(user)}) THEN
    CREATE ROLE ${quoteIdent(user)} LOGIN CREATEDB PASSWORD ${quoteLiteral(password)};
  ELSIF (SELECT rolpassword IS NULL FROM pg_authid WHERE rolname = ${quoteLiteral(user)}) THEN
    ALTER ROLE ${quoteIdent(user)} LOGIN PASSWORD ${quoteLiteral(password)};
  ELSE
    RAISE EXCEPTION 'role % already has a password, and it is not the one in DATABASE_URL', ${quoteLiteral(user)};
  END IF;
END $$;`;
}

/** `psql` on PATH, else the newest of Debian's /usr/lib/postgresql/<version>/bin/psql. */
function psqlPath() {
  if (spawnSync('sh', ['-c', 'command -v psql'], { stdio: 'ignore' }).status === 0) return 'psql';
  const base = '/usr/lib/postgresql';
  if (!existsSync(base)) return undefined;
  const versions = readdirSync(base)
    .filter((v) => existsSync(path.join(base, v, 'bin', 'psql')))
    .sort((a, b) => Number(a) - Number(b));
  return versions.length ? path.join(base, versions[versions.length - 1], 'bin', 'psql') : undefined;
}

/** How to run a command as the `postgres` OS user without a password: runuser as root, else `sudo -n`. */
function asPostgresUser() {
  if (spawnSync('id', ['-u', 'postgres'], { stdio: 'ignore' }).status !== 0) return undefined;
  if (process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v runuser'], { stdio: 'ignore' }).status === 0)
    return ['runuser', '-u', 'postgres', '--'];
  if (spawnSync('sudo', ['-n', '-u', 'postgres', 'true'], { stdio: 'ignore' }).status === 0)
    return ['sudo', '-n', '-u', 'postgres'];
  return undefined;
}

/** The commands a developer can run by hand. */
function instructions(u, user, password) {
  const sql = `CREATE ROLE ${quoteIdent(user)} LOGIN CREATEDB PASSWORD ${quoteLiteral(password || 'CHOOSE-ONE')};`;
  return [
    `Postgres at ${u.host} refused the login of DATABASE_URL (role "${user}"). On a Debian/Ubuntu Postgres, create the role with the password of the URL:`,
    '',
    `  sudo -u postgres psql -p ${u.port || 5432} -c ${JSON.stringify(sql)}`,
    '',
    `(or, if the role exists: sudo -u postgres psql -p ${u.port || 5432} -c ${JSON.stringify(`ALTER ROLE ${quoteIdent(user)} PASSWORD ${quoteLiteral(password || 'CHOOSE-ONE')};`)})`,
    'or point DATABASE_URL at a role that can log in, e.g. DATABASE_URL=postgres://USER:PASSWORD@127.0.0.1:5432/mailroom npm run dev',
  ].join('\n');
}

/**
 * Makes sure `url` can log in, creating its role through the local socket when it cannot.
 *
 * @param {string} url - the development DATABASE_URL.
 * @param {{ socketDir?: string, log?: (line: string) => void }} [opts] - `socketDir`: the server's Unix socket
 *   directory (default: psql's own, /var/run/postgresql on Debian).
 * @returns {Promise<{ ok: true, changed: boolean } | { ok: false, message: string }>}
 */
export async function ensurePostgresLogin(url, opts = {}) {
  const log = opts.log ?? ((line) => console.log(line));
  const first = await tryLogin(url);
  if (!first) return { ok: true, changed: false };
  const u = new URL(url);
  const user = decodeURIComponent(u.username) || 'postgres';
  const password = decodeURIComponent(u.password);
  if (!AUTH_FAILURES.has(first.code)) return { ok: false, message: `Postgres at ${u.host}: ${first.message}` };
  if (!LOCAL_HOSTS.has(u.hostname))
    return { ok: false, message: `Postgres at ${u.host} refused DATABASE_URL's login: ${first.message}` };
  if (!password) {
    return {
      ok: false,
      message: `Postgres at ${u.host} refused role "${user}" without a password: ${first.message}\nPut a password in DATABASE_URL; then:\n\n${instructions(u, user, password)}`,
    };
  }
  const psql = psqlPath();
  const runAs = asPostgresUser();
  if (!psql || !runAs) return { ok: false, message: `${first.message}\n\n${instructions(u, user, password)}` };
  const args = [
    ...runAs,
    psql,
    '-X',
    '-q',
    '-v',
    'ON_ERROR_STOP=1',
    '-p',
    String(u.port || 5432),
    ...(opts.socketDir ? ['-h', opts.socketDir] : []),
    '-d',
    'postgres',
  ];
  const r = spawnSync(args[0], args.slice(1), { input: roleSql(user, password), encoding: 'utf8', cwd: '/' });
  if (r.status !== 0) {
    return {
      ok: false,
      message: `${first.message}\nCreating the role through the socket failed: ${(r.stderr || r.error?.message || '').trim()}\n\n${instructions(u, user, password)}`,
    };
  }
  const again = await tryLogin(url);
  if (again) return { ok: false, message: `${again.message}\n\n${instructions(u, user, password)}` };
  log(
    `Postgres: role "${user}" can now log in with DATABASE_URL's password (set through the local socket as the postgres OS user).`,
  );
  return { ok: true, changed: true };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const arg = (name) => {
    const i = process.argv.indexOf(name);
    return i > 0 ? process.argv[i + 1] : undefined;
  };
  const url = arg('--url') ?? process.env.DATABASE_URL ?? 'postgres://postgres:postgres@127.0.0.1:5432/mailroom';
  const result = await ensurePostgresLogin(url, { socketDir: arg('--socket-dir') });
  if (!result.ok) {
    console.error(result.message);
    process.exit(1);
  }
  console.log(result.changed ? 'changed' : 'ok');
}
