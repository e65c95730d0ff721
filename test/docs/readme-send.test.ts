/**
 * The three sends of README.md (curl, Node.js with `@plunk/node` and its `baseUrl` option, Python with `requests`)
 * work against a running API: each block is run as written, with the API's address and a sender on the test
 * project's verified domain put in place of `http://localhost:8080` and `hello@example.com`, and each must leave a
 * queued email to `ada@example.org` in the project.
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { client, useApiWithProject } from '../support/harness';
import { ROOT, snippet } from './snippets';
import { expressServerOptions } from '../../apps/api/src/http/server-classes';

const ctx = useApiWithProject();
let server: http.Server;
let url: string;
let dir: string;

beforeAll(async () => {
  server = http.createServer(expressServerOptions(ctx.api.app), ctx.api.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  dir = mkdtempSync(path.join(tmpdir(), 'mailroom-readme-'));
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A README block with this test's API address and the project's sender domain. */
function block(name: string): string {
  const code = snippet('README.md', name);
  expect(code).toContain('http://localhost:8080');
  expect(code).toContain('hello@example.com');
  return code.replaceAll('http://localhost:8080', url).replaceAll('hello@example.com', `hello@${ctx.p.domain}`);
}

/**
 * Runs a command with MAILROOM_KEY set, asynchronously (the API answering it runs in this process).
 * @returns its stdout. @throws when it fails.
 */
function run(command: string, args: string[], extraEnv: Record<string, string> = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(
      command,
      args,
      { encoding: 'utf8', timeout: 30_000, env: { ...process.env, MAILROOM_KEY: ctx.p.secretKey, ...extraEnv } },
      (error, stdout, stderr) => (error ? reject(new Error(`${command} failed: ${error.message}\n${stderr}`)) : resolve(stdout.trim())),
    );
  });
}

/** Expects the email `id` to exist in the project, queued for ada@example.org. */
async function expectQueued(id: string): Promise<void> {
  const res = await client(ctx.api.app, ctx.p).get(`/emails/${id}`);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({ id, status: 'queued' });
  expect(JSON.stringify(res.body.data)).toContain('ada@example.org');
}

test('the curl example queues an email', async () => {
  const out = await run('bash', ['-c', block('readme-curl')]);
  const answer = JSON.parse(out);
  expect(answer.success).toBe(true);
  await expectQueued(answer.data.emails[0].email);
});

test('the Node.js example (@plunk/node with baseUrl) queues an email', async () => {
  const file = path.join(dir, 'send.js');
  writeFileSync(file, block('readme-node'));
  const id = await run(process.execPath, [file], { NODE_PATH: path.join(ROOT, 'node_modules') });
  await expectQueued(id);
});

test('the Python example (requests) queues an email', async () => {
  const probe = spawnSync('python3', ['-c', 'import requests'], { encoding: 'utf8' });
  if (probe.error || probe.status !== 0) {
    throw new Error(`python3 with requests is missing (${probe.error?.message ?? probe.stderr.trim()}): apt-get install python3-requests`);
  }
  const file = path.join(dir, 'send.py');
  writeFileSync(file, block('readme-python'));
  const id = await run('python3', [file]);
  await expectQueued(id);
});
