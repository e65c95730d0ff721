/** Per-project demotion inside the transactional and workflow lanes, with the per-minute count in a real Redis. */
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import { demotedPriority, lanePriorities, lanePrioritiesOf } from './send-lanes';
import { SendPriority } from './catalog';
import { TestClock } from '../../../test/support/clock';

const redisUrl = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

test("within the share the lane's own priority; then one step down per tenfold, never into the next lane", () => {
  expect(demotedPriority('transactional', 0, 100)).toBe(1);
  expect(demotedPriority('transactional', 99, 100)).toBe(1);
  expect(demotedPriority('transactional', 100, 100)).toBe(2);
  expect(demotedPriority('transactional', 999, 100)).toBe(2);
  expect(demotedPriority('transactional', 1_000, 100)).toBe(3);
  expect(demotedPriority('transactional', 10_000, 100)).toBe(4);
  expect(demotedPriority('transactional', 10_000_000, 100)).toBe(4);
  expect(demotedPriority('transactional', 10_000_000, 100)).toBeLessThan(SendPriority.workflow);
  expect(demotedPriority('workflow', 0, 100)).toBe(5);
  expect(demotedPriority('workflow', 10_000_000, 100)).toBe(8);
  expect(demotedPriority('workflow', 10_000_000, 100)).toBeLessThan(SendPriority.campaign);
});

describe('lanePriorities', () => {
  const redis = new IORedis(redisUrl);
  afterAll(() => redis.disconnect());
  const config = { queuePrefix: `{lanes-${randomBytes(4).toString('hex')}}`, sendFairSharePerMinute: 10 };

  test("counts each project apart: a burst is demoted, another project's first emails are not", async () => {
    // The count is per minute: the calls below share the clock's one.
    const clock = new TestClock();
    const burst = await lanePriorities(redis, config, 'transactional', 'project-a', 120, clock);
    expect(burst.slice(0, 10).every((p) => p === 1)).toBe(true);
    expect(burst.slice(10, 100).every((p) => p === 2)).toBe(true);
    expect(burst.slice(100).every((p) => p === 3)).toBe(true);
    expect(await lanePriorities(redis, config, 'transactional', 'project-b', 2, clock)).toEqual([1, 1]);
    // The same project goes on where its count stands; the workflow lane is counted apart.
    expect(await lanePriorities(redis, config, 'transactional', 'project-a', 1, clock)).toEqual([3]);
    expect(await lanePriorities(redis, config, 'workflow', 'project-a', 1, clock)).toEqual([5]);
    // A new minute starts at the lane's own priority again.
    clock.advance(60_000);
    expect(await lanePriorities(redis, config, 'transactional', 'project-a', 1, clock)).toEqual([1]);
  });

  test("with delivery connections, each connection counts a project's share apart; `default` is the plain count", async () => {
    const clock = new TestClock();
    const c = { ...config, queuePrefix: `{lanes-${randomBytes(4).toString('hex')}}` };
    // The project's share spent on `default` (through the plain count, as with one connection)…
    expect(await lanePriorities(redis, c, 'transactional', 'project-c', 10, clock)).toEqual(Array(10).fill(1));
    // …leaves its share on `backup` whole, and `default` named is the same count as unnamed.
    const [onBackup, onDefault, onBackupAgain] = await lanePrioritiesOf(
      redis,
      c,
      'transactional',
      [
        { projectId: 'project-c', count: 10, connection: 'backup' },
        { projectId: 'project-c', count: 1, connection: 'default' },
        { projectId: 'project-c', count: 1, connection: 'backup' },
      ],
      clock,
    );
    expect(onBackup).toEqual(Array(10).fill(1));
    expect(onDefault).toEqual([2]);
    expect(onBackupAgain).toEqual([2]);
    const minute = Math.floor(clock.now() / 60_000);
    expect(await redis.get(`${c.queuePrefix}:lane:transactional:project-c:${minute}`)).toBe('11');
    expect(await redis.get(`${c.queuePrefix}:lane:transactional:project-c:${minute}:backup`)).toBe('11');
  });

  test("without Redis (none given, or down) every email keeps the lane's priority", async () => {
    expect(await lanePriorities(undefined, config, 'transactional', 'p', 3)).toEqual([1, 1, 1]);
    const down = new IORedis('redis://127.0.0.1:1', {
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      lazyConnect: true,
    });
    down.on('error', () => undefined);
    expect(await lanePriorities(down, config, 'workflow', 'p', 2)).toEqual([5, 5]);
    down.disconnect();
  });
});
