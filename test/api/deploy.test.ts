/**
 * The container setup, checked as files (this machine's docker client has no compose plugin; when `docker compose`
 * is available the file is also validated with `docker compose config`): one image for api, worker and migrate,
 * built from the Dockerfile's runtime stage as a non-root user with production dependencies only; a health check on
 * every long-running service; a worker that can be scaled (`--scale worker=3`: no host port, no container name).
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { parse } from 'yaml';

const ROOT = path.resolve(__dirname, '..', '..');
const compose = parse(readFileSync(path.join(ROOT, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
  services: Record<string, { build?: { target?: string }; image?: string; healthcheck?: { test: string[] }; ports?: string[]; container_name?: string; command?: string[]; depends_on?: Record<string, { condition: string }> }>;
};
const dockerfile = readFileSync(path.join(ROOT, 'Dockerfile'), 'utf8');

test('one image from the runtime stage for api, worker and migrate', () => {
  for (const name of ['api', 'worker', 'migrate']) {
    const s = compose.services[name]!;
    expect({ name, target: s.build?.target, image: s.image }).toEqual({ name, target: 'runtime', image: 'mailroom:local' });
  }
  expect(compose.services.api!.command).toEqual(['node', 'apps/api/dist/server.js']);
  expect(compose.services.worker!.command).toEqual(['node', 'apps/worker/dist/main.js']);
  expect(compose.services.migrate!.command).toEqual(['node', 'packages/db/dist/migrate-cli.js']);
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
  expect(compose.services.worker!.ports).toBeUndefined();
  expect(compose.services.worker!.container_name).toBeUndefined();
  expect(compose.services.worker!.depends_on?.migrate?.condition).toBe('service_completed_successfully');
});

test('docker compose config accepts the file wherever the compose plugin exists', () => {
  const version = spawnSync('docker', ['compose', 'version'], { encoding: 'utf8' });
  const available = version.status === 0;
  const result = available ? spawnSync('docker', ['compose', '-f', path.join(ROOT, 'docker-compose.yml'), 'config', '--quiet'], { encoding: 'utf8' }) : undefined;
  // Without the plugin there is nothing more to check than the parse above.
  expect(available ? result!.status : 0).toBe(0);
});
