/**
 * What `npm test` needs from the machine, found or provisioned by the test command itself (so the README's two
 * commands work on a fresh machine exactly as in CI):
 * - Postgres and Redis answering on loopback: started from Debian's packages when installed but stopped, and
 *   installed first when missing (as root, with apt-get);
 * - the `redis-server` and `redis-cli` binaries (the Redis Cluster and Redis outage tests start servers of their
 *   own) and Debian's `chromium` (the queue dashboard's browser test), installed the same way;
 * - `docker compose` or `docker-compose` (the deploy test validates docker-compose.yml with it): Debian's
 *   docker-compose is installed when neither runs; where it cannot be, setup says so and the deploy test says
 *   again that it checked the file by parsing only;
 * - the deployment tools of `test/deploy/`: `kubectl` (its built-in kustomize renders deploy/kubernetes; Debian's
 *   `kubernetes-client` where none is installed), `promtool` (Debian's `prometheus`: checks and unit-tests the
 *   alert rules) and Debian's `caddy` (the TLS front in deploy/caddy, run in front of a test API).
 *
 * Where nothing can be installed (not root, no apt-get), it fails at once with what to install, instead of
 * letting tests fail one by one.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';

function log(msg: string): void {
  process.stderr.write(`test setup: ${msg}\n`);
}

/** The absolute path of `cmd` on PATH, or undefined. */
export function which(cmd: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    const p = `${dir}/${cmd}`;
    try {
      fs.accessSync(p, fs.constants.X_OK);
      return p;
    } catch {
      /* not here */
    }
  }
  return undefined;
}

let aptUpdated = false;

/**
 * Installs Debian packages when this process may (root with apt-get). @throws naming the packages otherwise.
 *
 * @param options.recommends - also install the packages' recommendations (default true; `prometheus` recommends
 *   exporters the tests do not need).
 */
function aptInstall(packages: string[], why: string, { recommends = true }: { recommends?: boolean } = {}): void {
  const canInstall = process.getuid?.() === 0 && which('apt-get');
  if (!canInstall) {
    throw new Error(
      `${why}: install Debian's ${packages.join(' ')} (apt-get install ${packages.join(' ')}), then run the tests again`,
    );
  }
  log(`${why}; installing Debian's ${packages.join(', ')} (once)`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  if (!aptUpdated) {
    execFileSync('apt-get', ['update', '-qq'], { stdio: 'ignore', env });
    aptUpdated = true;
  }
  execFileSync('apt-get', ['install', '-y', '-qq', ...(recommends ? [] : ['--no-install-recommends']), ...packages], {
    stdio: 'ignore',
    env,
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function waitUntil(check: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (check()) return true;
    await sleep(500);
  }
  return check();
}

const pgUp = () => spawnSync('pg_isready', ['-h', '127.0.0.1', '-p', '5432', '-q']).status === 0;
const redisUp = () =>
  spawnSync('redis-cli', ['-h', '127.0.0.1', '-p', '6379', 'ping'], { encoding: 'utf8' }).stdout?.trim() === 'PONG';

/**
 * Makes sure Postgres answers on 127.0.0.1:5432 and Redis on 127.0.0.1:6379 (only when the tests use those
 * defaults: `TEST_POSTGRES_URL` / `TEST_REDIS_URL` pointing elsewhere are taken as given).
 *
 * @returns the admin URL to use for Postgres (a fresh Debian cluster gets the password `postgres` over TCP).
 */
export async function ensureServices(adminUrl: string, redisUrl: string): Promise<string> {
  let url = adminUrl;
  if (!process.env.TEST_POSTGRES_URL) {
    if (!which('pg_isready')) aptInstall(['postgresql', 'postgresql-client'], 'Postgres is not installed');
    if (!pgUp()) {
      const versions = fs.existsSync('/etc/postgresql') ? fs.readdirSync('/etc/postgresql').sort() : [];
      if (versions.length === 0) aptInstall(['postgresql'], 'no Postgres cluster exists');
      const version = fs.readdirSync('/etc/postgresql').sort().pop()!;
      log(`Postgres is not answering; starting cluster ${version}/main`);
      spawnSync('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'start'], { stdio: 'ignore' });
      if (!(await waitUntil(pgUp, 30_000)))
        throw new Error('Postgres did not start on 127.0.0.1:5432; start it or set TEST_POSTGRES_URL');
    }
    // A fresh Debian cluster trusts only the local socket: give postgres a password for TCP, as CI does.
    const trust = spawnSync('psql', [adminUrl, '-qtAc', 'select 1'], { encoding: 'utf8' });
    if (trust.status !== 0 && process.getuid?.() === 0) {
      spawnSync('su', ['postgres', '-c', `psql -qc "alter user postgres password 'postgres'"`], { stdio: 'ignore' });
      const withPassword = new URL(adminUrl);
      withPassword.password = 'postgres';
      url = withPassword.toString();
      process.env.TEST_POSTGRES_URL = url;
    }
  }
  if (!process.env.TEST_REDIS_URL && redisUrl === 'redis://127.0.0.1:6379') {
    if (!which('redis-server') || !which('redis-cli')) aptInstall(['redis-server'], 'redis-server is not installed');
    if (!redisUp()) {
      log('Redis is not answering; starting redis-server on 127.0.0.1:6379');
      spawnSync(
        'redis-server',
        [
          '--daemonize',
          'yes',
          '--bind',
          '127.0.0.1',
          '--port',
          '6379',
          '--save',
          '',
          '--appendonly',
          'no',
          '--logfile',
          '/tmp/mailroom-test-redis.log',
        ],
        { stdio: 'ignore' },
      );
      if (!(await waitUntil(redisUp, 30_000)))
        throw new Error('Redis did not start on 127.0.0.1:6379; start it or set TEST_REDIS_URL');
    }
  }
  return url;
}

/**
 * The command that runs Compose: `docker compose` (the plugin) or `docker-compose`, whichever answers `version`;
 * undefined when neither does.
 */
export function composeCommand(): string[] | undefined {
  if (spawnSync('docker', ['compose', 'version'], { stdio: 'ignore' }).status === 0) return ['docker', 'compose'];
  if (spawnSync('docker-compose', ['version'], { stdio: 'ignore' }).status === 0) return ['docker-compose'];
  return undefined;
}

/**
 * Finds (or installs) the binaries some tests drive: `redis-server` and `redis-cli` on PATH, and Chromium
 * (`CHROMIUM_PATH`, else `chromium` on PATH), and Compose when it can (see {@link composeCommand}). Sets
 * `CHROMIUM_PATH` for the test workers.
 */
export function ensureTools(): void {
  if (!which('redis-server') || !which('redis-cli'))
    aptInstall(['redis-server'], 'the Redis Cluster and outage tests need redis-server and redis-cli');
  ensureDeployTools();
  if (!composeCommand()) {
    // One assertion of one test needs it, and the file is also checked by parsing: no reason to stop the run.
    try {
      aptInstall(['docker-compose'], 'the deploy test validates docker-compose.yml with docker compose');
    } catch (err) {
      log(
        `${(err as Error).message}. Until then test/api/deploy.test.ts checks docker-compose.yml by parsing only (it says so when it runs)`,
      );
    }
  }
  const chromium = process.env.CHROMIUM_PATH ?? which('chromium') ?? which('chromium-browser');
  if (chromium && fs.existsSync(chromium)) {
    process.env.CHROMIUM_PATH = chromium;
    return;
  }
  aptInstall(['chromium'], 'the queue dashboard test drives a headless chromium');
  process.env.CHROMIUM_PATH = which('chromium')!;
}

/**
 * The binaries of `test/deploy/`: `kubectl` (Debian's `kubernetes-client` when none is on PATH: its kustomize
 * renders deploy/kubernetes offline), `promtool` (Debian's `prometheus`) and `caddy` (Debian's `caddy`). Nothing
 * they install is started: Debian's maintainer scripts start services only where systemd runs, and the tests
 * start their own Caddy on a free loopback port.
 */
export function ensureDeployTools(): void {
  if (!which('kubectl')) {
    aptInstall(['kubernetes-client'], 'the Kubernetes test renders deploy/kubernetes with kubectl kustomize', {
      recommends: false,
    });
  }
  if (!which('promtool'))
    aptInstall(['prometheus'], 'the monitoring test checks and unit-tests the alert rules with promtool', {
      recommends: false,
    });
  if (!which('caddy')) aptInstall(['caddy'], 'the TLS test runs Caddy in front of the API', { recommends: false });
}
