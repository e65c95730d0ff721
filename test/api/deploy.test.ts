/**
 * The container setup, checked as files, and validated by `docker compose config` (or `docker-compose config`)
 * where either is installed: one image for api, worker and migrate,
 * built from the Dockerfile's runtime stage as a non-root user with production dependencies only; a health check on
 * every long-running service; a worker that can be scaled (`--scale worker=3`: no host port, no container name).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';
import { loadConfig } from '@mailroom/config/config';
import { composeCommand } from '../support/provision';

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
    expect({ name, target: s.build?.target, image: s.image }).toEqual({ name, target: 'runtime', image: 'mailroom:local' });
  }
  expect(compose.services.api.command).toEqual(['node', 'apps/api/dist/server.js']);
  // The container runs the worker as `npm run start:worker` does, V8 flags included.
  const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
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
    console.warn(
      'NOT RUN: `docker compose config` — neither `docker compose` (the plugin) nor `docker-compose` is installed, ' +
        "so docker-compose.yml was checked by parsing only. Install one (Debian: apt-get install docker-compose).",
    );
  }
  const result = compose ? spawnSync(compose[0], [...compose.slice(1), '-f', file, 'config', '--quiet'], { encoding: 'utf8' }) : undefined;
  // With neither installed, the parse above is the check.
  expect(result?.status ?? 0).toBe(0);
});

describe('`docker compose up -d postgres redis` then `npm run dev`', () => {
  const devScript = readFileSync(path.join(ROOT, 'scripts', 'dev.mjs'), 'utf8');
  const devDefault = (name: string) => new RegExp(`${name}: process\\.env\\.${name} \\?\\? '([^']+)'`).exec(devScript)?.[1];

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
    expect({ user: composeDb.username, password: composeDb.password, db: composeDb.pathname }).toEqual({ user: devDb.username, password: devDb.password, db: devDb.pathname });
    expect(devDefault('REDIS_URL')).toBe('redis://127.0.0.1:6379');
    expect(new URL(app.REDIS_URL).port).toBe('6379');
  });
});

describe('the ADMIN_TOKEN placeholder compose ships', () => {
  const placeholder = /\$\{ADMIN_TOKEN:-([^}]+)\}/.exec(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'))?.[1];

  test('is refused in production, naming the variable', () => {
    expect(placeholder).toBeDefined();
    expect(compose.services.api.environment!.NODE_ENV).toBe('production');
    expect(() => loadConfig({ NODE_ENV: 'production', ADMIN_TOKEN: placeholder })).toThrow(/ADMIN_TOKEN is a placeholder/);
  });

  test('the API process refuses to start with it: exit 1, the message names ADMIN_TOKEN', () => {
    const tsx = path.join(ROOT, 'node_modules', 'tsx', 'dist', 'cli.mjs');
    const r = spawnSync(process.execPath, [tsx, '--tsconfig', 'tsconfig.json', 'apps/api/src/server.ts'], {
      cwd: ROOT,
      encoding: 'utf8',
      timeout: 60_000,
      // Port 1 would need root to listen on: the process must stop before listening.
      env: { PATH: process.env.PATH, NODE_ENV: 'production', ADMIN_TOKEN: placeholder, PORT: '1', DATABASE_URL: 'postgres://x@127.0.0.1:1/none' },
    });
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 1, stderr: expect.stringContaining('Invalid configuration: ADMIN_TOKEN is a placeholder') });
  });
});
