/**
 * The maintenance processor's lock against a real Redis: a pass releases only its own lock (one that outlived its
 * lock leaves the next pass's alone), a job that comes while a coalescing pass runs makes it run once more, and a
 * plain task's second job is skipped.
 */
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import type { Job } from 'bullmq';
import { createLogger } from '@mailroom/platform/logger';
import { testConfig } from '../../../../test/support/harness';
import { maintenanceProcessor, type MaintenanceTask } from './maintenance';

const config = testConfig();
const redis = new IORedis(config.redisUrl);
const logger = createLogger({ logLevel: 'silent', logPretty: false }, 'maintenance-test');
afterAll(() => redis.disconnect());

/** A gate a pass waits on until the test opens it. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

async function until(check: () => Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 10));
  }
}

function setup(task: Omit<MaintenanceTask, 'name' | 'intervalMs'>) {
  const queuePrefix = `{mnt-${randomBytes(4).toString('hex')}}`;
  const full: MaintenanceTask = { name: 'pass', intervalMs: 0, ...task };
  const run = maintenanceProcessor({ config: { queuePrefix }, redis, logger }, [full]);
  const job = (id: string) => ({ name: 'pass', id }) as Job;
  return { run, job, lockKey: `${queuePrefix}:maintenance:pass:lock` };
}

test('a pass that outlived its lock does not release the next pass’s lock', async () => {
  const gates = [gate(), gate()];
  let calls = 0;
  const { run, job, lockKey } = setup({ lockMs: 150, release: true, run: () => gates[calls++].opened });
  const first = run(job('a'));
  await until(async () => calls === 1);
  // The first pass's lock expires while it still runs; a second pass takes the lock.
  await until(async () => (await redis.exists(lockKey)) === 0);
  const second = run(job('b'));
  await until(async () => calls === 2);
  await redis.pexpire(lockKey, 60_000);
  const secondToken = await redis.get(lockKey);
  gates[0].open();
  await first;
  expect(await redis.get(lockKey)).toBe(secondToken);
  gates[1].open();
  await second;
  expect(await redis.exists(lockKey)).toBe(0);
});

test('a job that comes while a coalescing pass runs makes it run once more, then the lock is released', async () => {
  const first = gate();
  const starts: number[] = [];
  const { run, job, lockKey } = setup({
    lockMs: 60_000,
    release: true,
    coalesce: true,
    run: async () => {
      starts.push(Date.now());
      if (starts.length === 1) await first.opened;
      return { pass: starts.length };
    },
  });
  const running = run(job('a'));
  await until(async () => starts.length === 1);
  const asked = Date.now();
  await expect(run(job('b'))).resolves.toEqual({ coalesced: expect.any(String) });
  first.open();
  await expect(running).resolves.toEqual({ pass: 2 });
  expect(starts).toHaveLength(2);
  expect(starts[1]).toBeGreaterThanOrEqual(asked);
  expect(await redis.exists(lockKey, `${lockKey}:rerun`)).toBe(0);
  // With nothing asked for meanwhile, a pass runs once.
  await expect(run(job('c'))).resolves.toEqual({ pass: 3 });
});

test('a plain task’s job that finds the lock held is skipped; a failed pass releases its lock and fails', async () => {
  const first = gate();
  let calls = 0;
  const { run, job, lockKey } = setup({
    lockMs: 60_000,
    release: true,
    run: async () => {
      calls += 1;
      await first.opened;
      throw new Error('pass broke');
    },
  });
  const running = run(job('a'));
  await until(async () => calls === 1);
  await expect(run(job('b'))).resolves.toEqual({ skipped: 'another pass holds the lock' });
  first.open();
  await expect(running).rejects.toThrow('pass broke');
  expect(calls).toBe(1);
  expect(await redis.exists(lockKey)).toBe(0);
});
