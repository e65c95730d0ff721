/**
 * The send path on a three-node Redis Cluster started on loopback (Debian's redis-server in cluster mode): the
 * API enqueues, a worker sends through the rate gate, the reconciler and timers take their locks, all on the
 * cluster; every queue key carries the QUEUE_PREFIX hash tag, so it lives in one slot. Redis's maxmemory-policy is
 * read from every master.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inArray } from 'drizzle-orm';
import { loadConfig } from '@mailroom/config/config';
import { emails } from '@mailroom/db/schema/emails';
import { readEvictionPolicy } from '@mailroom/queues/eviction-policy';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import {
  client,
  createTestProject,
  exited,
  isolatedDatabase,
  recipient,
  sesSendsTo,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
} from '../support/harness';

const nodes: ChildProcess[] = [];
let dir: string;
let ports: number[];
let iso: { url: string; drop: () => Promise<void> };
let api: TestApi;
let worker: RunningWorker;

const cli = (...args: string[]) => spawnSync('redis-cli', args, { encoding: 'utf8', timeout: 20_000 });

beforeAll(async () => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'mailroom-cluster-'));
  // Cluster bus ports are port + 10000; pick a base unlikely to be taken and spaced by this process id.
  const base = 17_000 + (process.pid % 500) * 3;
  ports = [base, base + 1, base + 2];
  for (const port of ports) {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
      ],
      { stdio: 'ignore' },
    );
    nodes.push(child);
  }
  await waitFor(
    async () => ports.every((p) => cli('-p', String(p), 'ping').stdout.trim() === 'PONG'),
    10_000,
    'cluster nodes up',
  );
  const created = cli(
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  );
  if (created.status !== 0) throw new Error(`redis-cli --cluster create failed: ${created.stdout} ${created.stderr}`);
  await waitFor(
    async () => ports.every((p) => cli('-p', String(p), 'cluster', 'info').stdout.includes('cluster_state:ok')),
    20_000,
    'cluster state ok',
  );

  iso = await isolatedDatabase();
  const config = loadConfig(
    testEnv({
      DATABASE_URL: iso.url,
      REDIS_CLUSTER_NODES: ports.map((p) => `127.0.0.1:${p}`).join(','),
      SES_MAX_SEND_RATE: '50',
      RECONCILE_INTERVAL_MS: '500',
    }),
  );
  api = await startTestApi(config);
  worker = await startWorker(config, { healthPort: null });
}, 60_000);

afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await iso?.drop();
  for (const n of nodes) n.kill('SIGKILL');
  await Promise.all(nodes.map(exited));
  rmSync(dir, { recursive: true, force: true });
});

test('emails accepted by the API are sent by a worker, with every queue key in one cluster slot', async () => {
  const p = await createTestProject(api.database);
  const to = Array.from({ length: 20 }, () => recipient('cluster'));
  const res = await client(api.app, p).post('/v1/send', { to, from: `c@${p.domain}`, subject: 'c', body: '<p>c</p>' });
  expect(res.status).toBe(202);
  const ids: string[] = res.body.data.emails.map((e: { email: string }) => e.email);
  await waitFor(
    async () => {
      const rows = await api.database.db.select({ status: emails.status }).from(emails).where(inArray(emails.id, ids));
      return rows.every((r) => r.status === 'sent') || undefined;
    },
    30_000,
    'all 20 sent',
  );
  expect(await sesSendsTo(to)).toHaveLength(20);
  // The queue's keys: all on one node (one slot), none elsewhere.
  const prefix = api.config.queuePrefix;
  const holders = ports.filter(
    (port) => cli('-p', String(port), '--scan', '--pattern', `${prefix}:send:*`).stdout.trim().length > 0,
  );
  expect(holders).toHaveLength(1);
  const slot = Number(cli('-p', String(ports[0]), 'cluster', 'keyslot', `${prefix}:send:meta`).stdout.trim());
  expect(
    Number(cli('-p', String(holders[0]), 'cluster', 'countkeysinslot', String(slot)).stdout.trim()),
  ).toBeGreaterThan(0);
}, 60_000);

test("Redis's maxmemory-policy is read from every master: one evicting node is enough to report it", async () => {
  expect(await readEvictionPolicy(api.redis)).toEqual(
    expect.objectContaining({ status: 'ok', policies: ['noeviction', 'noeviction', 'noeviction'] }),
  );
  expect(cli('-p', String(ports[1]), 'config', 'set', 'maxmemory-policy', 'volatile-lru').stdout.trim()).toBe('OK');
  try {
    const policy = await readEvictionPolicy(api.redis);
    expect(policy.status).toBe('evicts');
    expect([...policy.policies].sort()).toEqual(['noeviction', 'noeviction', 'volatile-lru']);
    expect(policy.message).toMatch(/maxmemory-policy is volatile-lru, not noeviction/);
  } finally {
    cli('-p', String(ports[1]), 'config', 'set', 'maxmemory-policy', 'noeviction');
  }
});
