/**
 * The test harness's own hygiene: queue prefixes of earlier runs are swept at the start of a run
 * (`test/support/stale-queues.ts`), and nothing else in Redis is touched.
 */
import IORedis from 'ioredis';
import { randomBytes } from 'node:crypto';
import { dropStaleTestQueues, isStaleTestKey, STALE_PREFIX_MS, testQueuePrefix } from '../support/stale-queues';

const HOUR = 60 * 60 * 1000;

test('a prefix is stale once older than any run, or when it names no time; other keys never are', () => {
  const now = Date.now();
  expect(isStaleTestKey(`${testQueuePrefix(now)}:send:wait`, now)).toBe(false);
  expect(isStaleTestKey(`${testQueuePrefix(now - STALE_PREFIX_MS + HOUR)}:send:1`, now)).toBe(false);
  expect(isStaleTestKey(`${testQueuePrefix(now - STALE_PREFIX_MS - HOUR)}:send:1`, now)).toBe(true);
  expect(isStaleTestKey('{t0123456789}:send:meta', now)).toBe(true);
  for (const other of ['{bench-run-1-2-3}:send:1', 'bull:send:1', '{tenant}:x', '{t0123456789abcdef}:x', 'session:t1'])
    expect(isStaleTestKey(other, now)).toBe(false);
});

test('the sweep deletes the keys of stale prefixes only', async () => {
  const redis = new IORedis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379');
  const now = Date.now();
  const stale = testQueuePrefix(now - STALE_PREFIX_MS - HOUR);
  const fresh = testQueuePrefix(now);
  const other = `stale-queues-test-${randomBytes(4).toString('hex')}`;
  try {
    await redis.mset(`${stale}:send:a`, '1', `${stale}:send:b`, '1', `${fresh}:send:a`, '1', other, '1');
    expect(await dropStaleTestQueues(redis, now)).toBeGreaterThanOrEqual(2);
    expect(await redis.exists(`${stale}:send:a`, `${stale}:send:b`)).toBe(0);
    expect(await redis.exists(`${fresh}:send:a`, other)).toBe(2);
  } finally {
    await redis.del(`${fresh}:send:a`, other);
    redis.disconnect();
  }
});
