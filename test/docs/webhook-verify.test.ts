/**
 * The signature verification snippets of docs/guides/webhooks.md (Node and Python) verify a real delivery: an API
 * and a worker run, an endpoint on a local receiver is subscribed to `contact.suppressed`, a suppression is added,
 * and the delivery the worker signs and sends is handed to each snippet as received (headers and raw body). Each
 * must accept it, and refuse it with one byte of the body changed, with another secret, and with its timestamp
 * ten minutes old.
 *
 * Runs on a database of its own: the worker's reconciler adopts every pending row of its database.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { loadConfig } from '@mailroom/config/config';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { client, createTestProject, isolatedDatabase, startTestApi, testEnv, waitFor, type TestApi } from '../support/harness';
import { startReceiver, type ReceivedWebhook, type Receiver } from '../support/receiver';
import { snippet } from './snippets';

const DOC = 'docs/guides/webhooks.md';

/** What each harness reads on stdin. */
interface Case {
  secret: string;
  headers: Record<string, string>;
  body: string;
}

const NODE_HARNESS = `
let input = '';
process.stdin.on('data', (c) => (input += c));
process.stdin.on('end', () => {
  const c = JSON.parse(input);
  process.stdout.write(String(verifyWebhook(c.secret, c.headers, c.body)));
});
`;

const PYTHON_HARNESS = `

import json as _json
import sys as _sys

_case = _json.loads(_sys.stdin.read())
_sys.stdout.write("true" if verify_webhook(_case["secret"], _case["headers"], _case["body"].encode("utf-8")) is True else "false")
`;

/** python3's path, or undefined when the machine has none. */
function findPython(): string | undefined {
  const r = spawnSync('python3', ['--version'], { encoding: 'utf8' });
  return r.status === 0 ? 'python3' : undefined;
}

let iso: { url: string; drop: () => Promise<void> };
let api: TestApi;
let worker: RunningWorker;
let receiver: Receiver;
let dir: string;
let secret: string;
let delivery: ReceivedWebhook;

beforeAll(async () => {
  iso = await isolatedDatabase();
  const config = loadConfig(testEnv({ DATABASE_URL: iso.url, WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' }));
  api = await startTestApi(config);
  worker = await startWorker(config, { healthPort: null });
  receiver = await startReceiver();
  dir = mkdtempSync(path.join(tmpdir(), 'mailroom-snippets-'));

  const p = await createTestProject(api.database);
  const as = client(api.app, p);
  const endpoint = await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['contact.suppressed'] });
  expect(endpoint.status).toBe(201);
  secret = endpoint.body.data.secret;
  expect((await as.post('/suppressions', { email: 'signed-delivery@snippets.test' })).status).toBeLessThan(300);
  delivery = await waitFor(async () => receiver.received.find((r) => r.status === 200), 20_000, 'a webhook delivery');
});

afterAll(async () => {
  await receiver?.close();
  await worker?.stop();
  await api?.close();
  await iso?.drop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The delivery as a snippet sees it: lower-case header names, the raw body. */
function received(): Case {
  const headers: Record<string, string> = {};
  for (const name of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) headers[name] = String(delivery.headers[name]);
  return { secret, headers, body: delivery.body };
}

/** The same delivery with the last character of the body's `email` value changed. */
function tampered(): Case {
  const c = received();
  const body = c.body.replace('snippets.test', 'snippets.tesu');
  expect(body).not.toBe(c.body);
  return { ...c, body };
}

/** The same delivery, correctly signed, but ten minutes old (a replay). */
function replayed(): Case {
  const c = received();
  const ts = String(Math.floor(Date.now() / 1000) - 600);
  const signature = execFileSync(process.execPath, ['-e', `
    const crypto = require('node:crypto');
    const key = Buffer.from(process.argv[1].replace(/^whsec_/, ''), 'base64');
    process.stdout.write('v1,' + crypto.createHmac('sha256', key).update(process.argv[2]).digest('base64'));
  `, c.secret, `${c.headers['webhook-id']}.${ts}.${c.body}`], { encoding: 'utf8' });
  return { ...c, headers: { ...c.headers, 'webhook-timestamp': ts, 'webhook-signature': signature } };
}

const otherSecret = (): Case => ({ ...received(), secret: 'whsec_' + Buffer.alloc(32, 7).toString('base64') });

/** Runs a snippet with its harness on one case. @returns what it printed (`true` or `false`). */
function run(command: string, file: string, c: Case): string {
  const r = spawnSync(command, [file], { input: JSON.stringify(c), encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`${command} ${file} exited ${r.status}: ${r.stderr}`);
  return r.stdout.trim();
}

test('the delivery is a real one: signed headers and a contact.suppressed body', () => {
  expect(delivery.headers['webhook-signature']).toMatch(/^v1,/);
  expect(JSON.parse(delivery.body)).toMatchObject({ type: 'contact.suppressed', data: { email: 'signed-delivery@snippets.test', reason: 'manual' } });
});

test('the Node snippet verifies the delivery and refuses a changed body, another secret and a replay', () => {
  const file = path.join(dir, 'verify.js');
  writeFileSync(file, snippet(DOC, 'verify-node') + '\n' + NODE_HARNESS);
  expect(run(process.execPath, file, received())).toBe('true');
  expect(run(process.execPath, file, tampered())).toBe('false');
  expect(run(process.execPath, file, otherSecret())).toBe('false');
  expect(run(process.execPath, file, replayed())).toBe('false');
});

test('the Python snippet verifies the delivery and refuses a changed body, another secret and a replay', () => {
  const python = findPython();
  if (!python) throw new Error('python3 is missing: install it (apt-get install python3) to run the Python snippet of ' + DOC);
  const file = path.join(dir, 'verify.py');
  writeFileSync(file, snippet(DOC, 'verify-python') + '\n' + PYTHON_HARNESS);
  expect(run(python, file, received())).toBe('true');
  expect(run(python, file, tampered())).toBe('false');
  expect(run(python, file, otherSecret())).toBe('false');
  expect(run(python, file, replayed())).toBe('false');
});
