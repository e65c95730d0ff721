/**
 * The container setup, checked as files, and validated by `docker compose config` (or `docker-compose config`)
 * where either is installed: one image for api, worker and migrate,
 * built from the Dockerfile's runtime stage as a non-root user with production dependencies only; a health check on
 * every long-running service; a worker that can be scaled (`--scale worker=3`: no host port, no container name).
 *
 * And the production overlay (deploy/compose.production.yml): Caddy the only service publishing ports, Redis with
 * noeviction and AOF, Postgres with the sizing settings, every required variable listed in deploy/.env.example and
 * read by the configuration. (Caddy in front of a real API: test/deploy/tls.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '@mailroom/config/config';
import { composeCommand } from '../support/provision';
import { acceptedVariables } from '../support/config-variables';
import { toSummary } from '../support/summary';

const ROOT = path.resolve(__dirname, '..', '..');
const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<
    string,
    {
      build?: { target?: string };
      image?: string;
      healthcheck?: { test: string[] };
      ports?: string[];
      container_name?: string;
      command?: string[];
      depends_on?: Record<string, { condition: string }>;
      environment?: Record<string, string>;
    }
  >;
};
const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

test('one image from the runtime stage for api, worker and migrate', () => {
  for (const name of ['api', 'worker', 'migrate']) {
    const s = compose.services[name];
    expect({ name, target: s.build?.target, image: s.image }).toEqual({
      name,
      target: 'runtime',
      image: 'mailroom:local',
    });
  }
  expect(compose.services.api.command).toEqual(['node', 'apps/api/dist/server.js']);
  // The container runs the worker as `npm run start:worker` does, V8 flags included.
  const scripts = (
    JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }
  ).scripts;
  expect(compose.services.worker.command).toEqual(scripts['start:worker'].split(' '));
  expect(compose.services.worker.command).toEqual(['node', '--max-semi-space-size=32', 'apps/worker/dist/main.js']);
  expect(compose.services.migrate.command).toEqual(['node', 'packages/db/dist/migrate-cli.js']);
});

test('the runtime stage runs as a non-root user with production dependencies only', () => {
  const runtime = dockerfile.slice(dockerfile.indexOf('AS runtime'), dockerfile.indexOf('AS ses'));
  expect(runtime).toMatch(/npm install --omit=dev/);
  expect(runtime).toMatch(/^USER node$/m);
});

test('every long-running service has a health check; the worker scales (no host port, no fixed name)', () => {
  for (const [name, s] of Object.entries(compose.services)) {
    if (name === 'migrate') continue;
    expect({ name, healthcheck: Array.isArray(s.healthcheck?.test) }).toEqual({ name, healthcheck: true });
  }
  expect(compose.services.worker.ports).toBeUndefined();
  expect(compose.services.worker.container_name).toBeUndefined();
  expect(compose.services.worker.depends_on?.migrate?.condition).toBe('service_completed_successfully');
});

test('docker compose config accepts the file (the compose plugin, or docker-compose, whichever is installed)', () => {
  const file = path.join(ROOT, 'docker-compose.yml');
  // Test setup installs Debian's docker-compose when neither runs (provision.ts); where it could not, say so.
  const compose = composeCommand();
  if (!compose) {
    toSummary(
      'NOT RUN: `docker compose config` — neither `docker compose` (the plugin) nor `docker-compose` is installed, ' +
        'so docker-compose.yml was checked by parsing only. Install one (Debian: apt-get install docker-compose).',
    );
  }
  const result = compose
    ? spawnSync(compose[0], [...compose.slice(1), '-f', file, 'config', '--quiet'], { encoding: 'utf8' })
    : undefined;
  // With neither installed, the parse above is the check.
  expect(result?.status ?? 0).toBe(0);
});

describe('`docker compose up -d postgres redis` then `npm run dev`', () => {
  const devScript = readFileSync(path.join(ROOT, 'scripts', 'dev.mjs'), 'utf8');
  const devDefault = (name: string) =>
    new RegExp(`${name}: process\\.env\\.${name} \\?\\? '([^']+)'`).exec(devScript)?.[1];

  test('Postgres and Redis are published on 127.0.0.1 only, on their usual ports', () => {
    expect(compose.services.postgres.ports).toEqual(['127.0.0.1:5432:5432']);
    expect(compose.services.redis.ports).toEqual(['127.0.0.1:6379:6379']);
  });

  test("dev's default URLs are compose's, seen from the host", () => {
    const app = compose.services.api.environment!;
    const pg = compose.services.postgres.environment!;
    const devDb = new URL(devDefault('DATABASE_URL')!);
    const composeDb = new URL(app.DATABASE_URL);
    expect({ user: devDb.username, password: devDb.password, db: devDb.pathname, host: devDb.host }).toEqual({
      user: pg.POSTGRES_USER ?? 'postgres',
      password: pg.POSTGRES_PASSWORD,
      db: `/${pg.POSTGRES_DB}`,
      host: '127.0.0.1:5432',
    });
    expect({ user: composeDb.username, password: composeDb.password, db: composeDb.pathname }).toEqual({
      user: devDb.username,
      password: devDb.password,
      db: devDb.pathname,
    });
    expect(devDefault('REDIS_URL')).toBe('redis://127.0.0.1:6379');
    expect(new URL(app.REDIS_URL).port).toBe('6379');
  });
});

describe('the ADMIN_TOKEN placeholder compose ships', () => {
  const placeholder = /\$\{ADMIN_TOKEN:-([^}]+)\}/.exec(
    readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'),
  )?.[1];

  test('is refused in production, naming the variable', () => {
    expect(placeholder).toBeDefined();
    expect(compose.services.api.environment!.NODE_ENV).toBe('production');
    expect(() => loadConfig({ NODE_ENV: 'production', ADMIN_TOKEN: placeholder })).toThrow(
      /ADMIN_TOKEN is a placeholder/,
    );
  });

  test('the API process refuses to start with it: exit 1, the message names ADMIN_TOKEN', () => {
    const tsx = path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
    const r = spawnSync(process.execPath, [tsx, '--tsconfig', 'tsconfig.json', 'apps/api/src/server.ts'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      // Port 1 would need root to listen on: the process must stop before listening.
      env: {
        PATH: process.env.PATH,
        NODE_ENV: 'production',
        ADMIN_TOKEN: placeholder,
        PORT: '1',
        DATABASE_URL: 'postgres://x@127.0.0.1:1/none',
      },
    });
    expect({ status: r.status, stderr: r.stderr }).toEqual({
      status: 1,
      stderr: expect.stringContaining('Invalid configuration: ADMIN_TOKEN is a placeholder'),
    });
  });
});

// --- deploy/compose.production.yml ---

type Service = {
  ports?: string[];
  command?: string[];
  environment?: Record<string, string>;
  profiles?: string[];
  depends_on?: Record<string, unknown>;
  image?: string;
  volumes?: string[];
};
const OVERLAY = path.join(ROOT, 'deploy', 'compose.production.yml');
const overlayText = readFileSync(OVERLAY, 'utf8');
// Compose's !reset and !override tags are not YAML's: read as plain values ([] and the mapping), which is what they set.
const overlay = parse(overlayText, { merge: true, logLevel: 'error' }) as { services: Record<string, Service> };
const envExample = readFileSync(path.join(ROOT, 'deploy', '.env.example'), 'utf8');
const exampleValues = new Map([...envExample.matchAll(/^([A-Z][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1], m[2]]));

/** A service of the base file with the overlay applied as Compose merges it (mappings by key; tagged values replace). */
function merged(name: string): Service & { environment: Record<string, string> } {
  const b = compose.services[name] as Service;
  const o = overlay.services[name] ?? {};
  return { ...b, ...o, environment: { ...(b.environment ?? {}), ...(o.environment ?? {}) } };
}

test('production: only Caddy publishes ports; the emulator is left to a profile', () => {
  expect(overlay.services.caddy.ports).toEqual(['80:80', '443:443', '443:443/udp']);
  expect(overlay.services.caddy.volumes).toContain('./deploy/caddy/Caddyfile:/etc/caddy/Caddyfile:ro');
  expect(Array.isArray((overlay.services.caddy as { healthcheck?: { test: string[] } }).healthcheck?.test)).toBe(true);
  for (const name of ['api', 'postgres', 'redis', 'ses']) {
    // `ports: !reset []` in the overlay: whatever the base file publishes (a developer's 127.0.0.1 ports) is dropped.
    expect({
      name,
      reset: new RegExp(`^  ${name}:\\n(?:    .*\\n)*?    ports: !reset \\[\\]$`, 'm').test(overlayText),
    }).toEqual({ name, reset: true });
  }
  expect(overlay.services.ses.profiles).toEqual(['emulator']);
  expect(Object.keys(overlay.services.worker.depends_on ?? {}).sort()).toEqual(['migrate', 'redis']);
});

test('production: Redis with noeviction and AOF; Postgres with the sizing settings', () => {
  const redis = overlay.services.redis.command!.join(' ');
  expect(redis).toMatch(/--maxmemory-policy noeviction/);
  expect(redis).toMatch(/--appendonly yes/);
  const pg = overlay.services.postgres.command!.join(' ');
  for (const setting of [
    'shared_buffers=',
    'effective_cache_size=',
    'work_mem=32MB',
    'maintenance_work_mem=',
    'max_wal_size=8GB',
    'checkpoint_timeout=15min',
    'random_page_cost=1.1',
    'autovacuum_vacuum_cost_limit=2000',
    'autovacuum_max_workers=4',
    'jit=off',
    'max_connections=',
  ]) {
    expect(pg).toContain(`-c ${setting}`);
  }
});

test('production: every required variable is in deploy/.env.example, every listed one is used, the app environment parses', () => {
  const caddyfile = readFileSync(path.join(ROOT, 'deploy', 'caddy', 'Caddyfile'), 'utf8');
  const required = [...new Set([...overlayText.matchAll(/\$\{([A-Z][A-Z0-9_]*):\?/g)].map((m) => m[1]))];
  expect(required.length).toBeGreaterThan(5);
  expect(required.filter((v) => !exampleValues.has(v))).toEqual([]);
  expect(
    [...exampleValues.keys()].filter((v) => !overlayText.includes(`\${${v}`) && !caddyfile.includes(`{$${v}`)),
  ).toEqual([]);

  // Interpolate as compose would, with the example's values and stand-ins for the secrets it leaves blank.
  const values = new Map(exampleValues);
  for (const [k, v] of values)
    if (v === '')
      values.set(
        k,
        k.includes('TOKEN') || k.includes('PASSWORD')
          ? randomBytes(24).toString('hex')
          : k.startsWith('AWS_')
            ? 'stand-in'
            : '',
      );
  const interpolate = (v: string) =>
    String(v).replace(/\$\{([A-Z0-9_]+)(?::[-?][^}]*)?\}/g, (_m, name: string) => values.get(name) ?? '');
  const accepted = acceptedVariables();
  for (const name of ['api', 'worker', 'migrate']) {
    const env = Object.fromEntries(Object.entries(merged(name).environment).map(([k, v]) => [k, interpolate(v)]));
    expect({ name, unknown: Object.keys(env).filter((k) => !accepted.has(k)) }).toEqual({ name, unknown: [] });
    const config = loadConfig(env);
    expect({ name, publicUrl: config.publicUrl, ses: config.sesEndpoint ?? 'real SES' }).toEqual({
      name,
      publicUrl: `https://${values.get('MAILROOM_DOMAIN')}`,
      ses: 'real SES',
    });
  }
});

test('docker compose config accepts docker-compose.yml with deploy/compose.production.yml', () => {
  const compose = composeCommand();
  if (!compose) {
    toSummary(
      'NOT RUN: `docker compose config` on the production overlay: no Compose is installed; it was checked by parsing only.',
    );
    return;
  }
  const version = spawnSync(compose[0], [...compose.slice(1), 'version', '--short'], { encoding: 'utf8' })
    .stdout.trim()
    .replace(/^v/, '');
  const [major, minor] = version.split('.').map(Number);
  // !reset and !override came with Compose 2.24: an older one (Debian bookworm's docker-compose 1.29) gets a copy
  // without them, which still checks every field against its schema, but merges ports instead of resetting them.
  const tagsKnown = major > 2 || (major === 2 && minor >= 24);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-compose-'));
  try {
    const envFile = path.join(dir, '.env');
    writeFileSync(
      envFile,
      [...exampleValues].map(([k, v]) => `${k}=${v || 'stand-in-value-0123456789abcdef'}`).join('\n'),
    );
    let overlayFile = OVERLAY;
    if (!tagsKnown) {
      toSummary(
        `PARTLY RUN: Compose ${version} predates !reset/!override (2.24): validated a copy of the overlay without those tags.`,
      );
      overlayFile = path.join(ROOT, 'deploy', `.compose.production.untagged-${process.pid}.yml`);
      writeFileSync(overlayFile, overlayText.replace(/ !(reset|override)\b/g, ''));
    }
    try {
      const result = spawnSync(
        compose[0],
        [
          ...compose.slice(1),
          '--env-file',
          envFile,
          '-f',
          path.join(ROOT, 'docker-compose.yml'),
          '-f',
          overlayFile,
          'config',
          '--quiet',
        ],
        { cwd: ROOT, encoding: 'utf8' },
      );
      expect({ status: result.status, stderr: result.stderr }).toEqual({ status: 0, stderr: expect.any(String) });
    } finally {
      if (overlayFile !== OVERLAY) rmSync(overlayFile, { force: true });
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
