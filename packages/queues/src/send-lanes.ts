/**
 * Fair share between projects inside the transactional and workflow lanes of the send queue.
 *
 * BullMQ takes jobs of one priority first come, first served, so one project's burst of `/v1/send` (say 10,000
 * emails: twelve minutes at 14/s) would hold every other project's password resets behind it. So each project's
 * emails per lane are counted per minute (one Redis counter per project, lane and minute), and beyond
 * `SEND_FAIR_SHARE_PER_MINUTE` a project's mail moves one priority step down per tenfold, at most
 * {@link MAX_DEMOTION} steps: transactional 1 → 2 (from 1× the share), 3 (10×), 4 (100×); workflow 5 → 6, 7, 8. It
 * stays ahead of the next lane (workflow 5, campaign 10), and a project within its share always goes first. The
 * campaign lane is shared differently (its depth, `@mailroom/audiences/campaigns/lane`).
 *
 * Within a project the order can change only at a minute boundary (a new minute starts at the lane's own
 * priority again); transactional emails are independent messages, and nothing waits longer than the burst would
 * have made it wait anyway.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from './config';
import { SendPriority } from './catalog';

/** Most priority steps a project's mail moves down inside its lane. */
export const MAX_DEMOTION = 3;

/** The lanes shared this way. */
export type SharedLane = 'transactional' | 'workflow';

/**
 * The priority of one email: the lane's own while the project has enqueued fewer than `perMinute` this minute,
 * then one step down per tenfold (`perMinute` → +1, `10 × perMinute` → +2, `100 × perMinute` → +3).
 *
 * @param before - emails the project enqueued in this lane this minute before this one.
 */
export function demotedPriority(lane: SharedLane, before: number, perMinute: number): number {
  const base = SendPriority[lane];
  if (before < perMinute) return base;
  return base + Math.min(MAX_DEMOTION, Math.floor(Math.log10(before / perMinute)) + 1);
}

/** Adds ARGV[1] to the minute's counter KEYS[1], (re)sets its expiry to ARGV[2] ms, answers the new total. */
const COUNT_SCRIPT = "local n = redis.call('INCRBY', KEYS[1], ARGV[1]); redis.call('PEXPIRE', KEYS[1], ARGV[2]); return n";
const COUNT_SHA = createHash('sha1').update(COUNT_SCRIPT).digest('hex');

/** Runs the count script by its digest (`EVALSHA`), loading it with `EVAL` when the server does not have it yet. */
async function evalCount(redis: Redis | Cluster, key: string, count: number): Promise<unknown> {
  try {
    return await redis.evalsha(COUNT_SHA, 1, key, count, 120_000);
  } catch (err) {
    if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
    return redis.eval(COUNT_SCRIPT, 1, key, count, 120_000);
  }
}

/**
 * Counts `count` emails of `projectId` in `lane` for this minute and returns their priorities, in order. Without
 * a connection, or when Redis cannot count (it is down: the enqueue that follows fails too, and the reconciler
 * re-enqueues at the lane's priority), every email gets the lane's own priority; this never throws.
 *
 * @param redis - any connection to the queue's Redis.
 */
export async function lanePriorities(
  redis: Redis | Cluster | undefined,
  config: Pick<PlatformConfig, 'queuePrefix'> & Pick<QueueConfig, 'sendFairSharePerMinute'>,
  lane: SharedLane,
  projectId: string,
  count: number,
): Promise<number[]> {
  if (count <= 0) return [];
  if (!redis) return Array.from({ length: count }, () => SendPriority[lane]);
  const minute = Math.floor(Date.now() / 60_000);
  const key = `${config.queuePrefix}:lane:${lane}:${projectId}:${minute}`;
  let total: number;
  try {
    // One script, not MULTI/INCRBY/PEXPIRE/EXEC: as atomic, and an ioredis transaction copies every script
    // defined on the connection (BullMQ's), which showed in the API's profile under `/v1/send` load.
    total = Number(await evalCount(redis, key, count));
  } catch {
    return Array.from({ length: count }, () => SendPriority[lane]);
  }
  const before = total - count;
  return Array.from({ length: count }, (_, i) => demotedPriority(lane, before + i, config.sendFairSharePerMinute));
}
