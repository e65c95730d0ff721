/**
 * Queue prefixes of earlier test runs, swept at the start of a run: test files make their own prefixes (so they
 * assume nothing about Redis) and their jobs stay behind, thousands of keys a run, on the machine's one Redis. A
 * prefix names the time it was made (`{t<ms in base 36>-<random>}`, {@link testQueuePrefix}); one older than
 * {@link STALE_PREFIX_MS} cannot belong to a run still going, so its keys are deleted. Prefixes of the form before
 * that (`{t<10 hex digits>}`) carry no time and are swept as stale too.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';

/** Age (ms) after which a test run's queue prefix is swept: no test run lasts this long. */
export const STALE_PREFIX_MS = 6 * 60 * 60 * 1000;

/** A unique, hash-tagged queue prefix that names when it was made: `{t<ms, base 36>-<8 hex digits>}`. */
export function testQueuePrefix(now = Date.now()): string {
  return `{t${now.toString(36)}-${randomBytes(4).toString('hex')}}`;
}

/** Whether `key` belongs to a test queue prefix made more than `maxAgeMs` before `now` (or to one of no time). */
export function isStaleTestKey(key: string, now = Date.now(), maxAgeMs = STALE_PREFIX_MS): boolean {
  if (/^\{t[0-9a-f]{10}\}/.test(key)) return true;
  const made = /^\{t([0-9a-z]{1,11})-[0-9a-f]{8}\}/.exec(key);
  if (!made) return false;
  return now - parseInt(made[1], 36) > maxAgeMs;
}

/**
 * Deletes the keys of stale test queue prefixes ({@link isStaleTestKey}); keys of any other form are never touched.
 *
 * @returns how many keys were deleted.
 */
export async function dropStaleTestQueues(redis: Redis, now = Date.now()): Promise<number> {
  let cursor = '0';
  let dropped = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', '{t*', 'COUNT', 5000);
    cursor = next;
    const stale = keys.filter((key) => isStaleTestKey(key, now));
    if (stale.length > 0) dropped += await redis.unlink(...stale);
  } while (cursor !== '0');
  return dropped;
}
