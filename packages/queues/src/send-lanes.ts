/**
 * Fair share between projects inside the transactional and workflow lanes of the send queue.
 *
 * BullMQ takes jobs of one priority first come, first served, so one project's burst of `/v1/send` (say 10,000
 * emails: twelve minutes at 14/s) would hold every other project's password resets behind it. So each project's
 * emails per lane are counted per minute (one Redis counter per project, lane and minute), and beyond
 * `SEND_FAIR_SHARE_PER_MINUTE` a project's mail moves one priority step down per tenfold, at most
 * {@link MAX_DEMOTION} steps: transactional 1 → 2 (from 1× the share), 3 (10×), 4 (100×); workflow 5 → 6, 7, 8. It
 * stays ahead of the next lane (workflow 5, campaign 10), and a project within its share always goes first. The
 * campaign lane is shared differently (its depth, `@mailroom/campaigns/lane`).
 *
 * With several delivery connections (`SES_CONNECTIONS`) the share is counted per connection: each connection has
 * its own rate, so a project's mail bound to one connection does not use up its share on another. A request that
 * names a connection other than `default` has its own counter (`…:lane:<lane>:<project>:<minute>:<connection>`);
 * the default connection's (and, with one connection, every) counter is the one it always was.
 *
 * Within a project the order can change only at a minute boundary (a new minute starts at the lane's own
 * priority again); transactional emails are independent messages, and nothing waits longer than the burst would
 * have made it wait anyway.
 *
 * @module
 */
import { RedisScript } from './redis-script';
import type { Cluster, Redis } from 'ioredis';
import type { PlatformConfig } from '@mailroom/platform/config';
import { systemClock, type Clock } from '@mailroom/platform/clock';
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

/**
 * For each counter `KEYS[i]`: adds `ARGV[i]` to it, (re)sets its expiry to `ARGV[#KEYS + 1]` ms; answers the new
 * totals, in the keys' order.
 */
const COUNT_SCRIPT = `local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('INCRBY', KEYS[i], ARGV[i])
  redis.call('PEXPIRE', KEYS[i], ARGV[#KEYS + 1])
end
return out`;
const COUNT = new RedisScript(COUNT_SCRIPT);

/** Runs the count script (`EVALSHA`, loaded on `NOSCRIPT`). */
function evalCount(redis: Redis | Cluster, keys: string[], counts: number[]): Promise<unknown> {
  return COUNT.run(redis, keys, [...counts, 120_000]);
}

/** How many emails of which project a caller enqueues in a lane. */
export interface LaneRequest {
  projectId: string;
  count: number;
  /**
   * The delivery connection the emails are bound to (`SES_CONNECTIONS` name): its own fair-share count. Unset or
   * `default`: the default connection's count.
   */
  connection?: string;
}

/** The counter of a project (and connection) in a lane this minute. */
function laneKey(
  prefix: string,
  lane: SharedLane,
  projectId: string,
  connection: string | undefined,
  minute: number,
): string {
  const base = `${prefix}:lane:${lane}:${projectId}:${minute}`;
  return connection && connection !== 'default' ? `${base}:${connection}` : base;
}

/**
 * Counts `count` emails of `projectId` in `lane` for this minute and returns their priorities, in order. Without
 * a connection, or when Redis cannot count (it is down: the enqueue that follows fails too, and the reconciler
 * re-enqueues at the lane's priority), every email gets the lane's own priority; this never throws.
 *
 * @param redis - any connection to the queue's Redis.
 * @param clock - what "this minute" is read from (tests set it).
 */
export async function lanePriorities(
  redis: Redis | Cluster | undefined,
  config: Pick<PlatformConfig, 'queuePrefix'> & Pick<QueueConfig, 'sendFairSharePerMinute'>,
  lane: SharedLane,
  projectId: string,
  count: number,
  clock: Clock = systemClock,
): Promise<number[]> {
  const [priorities] = await lanePrioritiesOf(redis, config, lane, [{ projectId, count }], clock);
  return priorities;
}

/**
 * {@link lanePriorities} for several callers at once, in one script call whatever the number of projects: each
 * request gets the priorities it would have got had the requests been counted one after the other in the order
 * given (a project's later request goes on where its earlier one stopped). Never throws (as `lanePriorities`).
 *
 * All counters of one call are in one Redis Cluster slot: every key starts with the queue prefix, whose hash tag
 * (`{mailroom}`) is required with a cluster.
 *
 * @param clock - what "this minute" is read from (tests set it).
 * @returns one array per request, `requests[i].count` priorities long (empty for a count ≤ 0).
 */
export async function lanePrioritiesOf(
  redis: Redis | Cluster | undefined,
  config: Pick<PlatformConfig, 'queuePrefix'> & Pick<QueueConfig, 'sendFairSharePerMinute'>,
  lane: SharedLane,
  requests: readonly LaneRequest[],
  clock: Clock = systemClock,
): Promise<number[][]> {
  const own = (count: number) => Array.from({ length: Math.max(0, count) }, () => SendPriority[lane]);
  const minute = Math.floor(clock.now() / 60_000);
  // Emails per counter (project, and connection), summed over its requests, in order of first appearance.
  const perKey = new Map<string, number>();
  const keyOf = (r: LaneRequest) => laneKey(config.queuePrefix, lane, r.projectId, r.connection, minute);
  for (const r of requests) if (r.count > 0) perKey.set(keyOf(r), (perKey.get(keyOf(r)) ?? 0) + r.count);
  if (!redis || perKey.size === 0) return requests.map((r) => own(r.count));
  const keys = [...perKey.keys()];
  let totals: unknown;
  try {
    // One script, not MULTI/INCRBY/PEXPIRE/EXEC: as atomic, and an ioredis transaction copies every script
    // defined on the connection (BullMQ's), which showed in the API's profile under `/v1/send` load.
    totals = await evalCount(
      redis,
      keys,
      keys.map((k) => perKey.get(k)!),
    );
  } catch {
    return requests.map((r) => own(r.count));
  }
  if (!Array.isArray(totals) || totals.length !== keys.length) return requests.map((r) => own(r.count));
  // Where each counter stood before this call; each request takes the next `count` of it.
  const next = new Map(keys.map((k, i) => [k, Number(totals[i]) - perKey.get(k)!]));
  return requests.map((r) => {
    if (r.count <= 0) return [];
    const k = keyOf(r);
    const before = next.get(k)!;
    next.set(k, before + r.count);
    return Array.from({ length: r.count }, (_, i) => demotedPriority(lane, before + i, config.sendFairSharePerMinute));
  });
}
