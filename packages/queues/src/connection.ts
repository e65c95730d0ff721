/**
 * The Redis connections BullMQ, the rate limiters and the send-rate gate use, and the options every Queue and
 * Worker of a process shares.
 *
 * @module
 */
import type { QueueOptions } from 'bullmq';
import IORedis, { type Redis, type RedisOptions } from 'ioredis';
import type { PlatformConfig } from '@mailroom/platform/config';

/**
 * A Redis connection for BullMQ, the rate limiter and the send-rate gate: a single server (`REDIS_URL`) or a
 * Redis Cluster (`REDIS_CLUSTER_NODES`; every key carries the `QUEUE_PREFIX` hash tag, so each queue's keys and
 * Lua scripts stay in one slot, as BullMQ requires).
 *
 * - `worker`: `maxRetriesPerRequest: null`, as BullMQ workers require (blocking commands wait out outages).
 * - `producer`: fails fast (no offline queue, one retry), so an API request never hangs on a Redis outage:
 *   the email row is already committed and the reconciler enqueues it later.
 *
 * A cluster client is returned as the `Redis` type: it answers the same commands (ioredis `Cluster`), and BullMQ
 * and rate-limiter-flexible detect it.
 *
 * @param options.autoPipelining - ioredis `enableAutoPipelining`: the commands issued in one turn of the event loop
 *   leave in one socket write (each still its own command, in order). For a connection of many small concurrent
 *   callers (the send path's rate gate and kept SES outcomes); not for BullMQ's, whose blocking commands would
 *   hold back the ones pipelined with them.
 */
export function createRedis(
  config: Pick<PlatformConfig, 'redisUrl' | 'redisClusterNodes'>,
  role: 'worker' | 'producer',
  { autoPipelining = false }: { autoPipelining?: boolean } = {},
): Redis {
  const options: RedisOptions = {
    ...(role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: false }
      : { maxRetriesPerRequest: 1, enableOfflineQueue: false, connectTimeout: 2_000 }),
    ...(autoPipelining ? { enableAutoPipelining: true } : {}),
  };
  let redis: Redis;
  if (config.redisClusterNodes.length > 0) {
    const url = new URL(config.redisUrl);
    const nodeOptions: RedisOptions = {
      ...options,
      ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
      ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
      ...(url.protocol === 'rediss:' ? { tls: {} } : {}),
    };
    const nodes = config.redisClusterNodes.map((n) => {
      const [host, port] = n.split(':');
      return { host: host, port: Number(port) };
    });
    redis = new IORedis.Cluster(nodes, {
      redisOptions: nodeOptions,
      enableOfflineQueue: role === 'worker',
      enableReadyCheck: true,
      ...(autoPipelining ? { enableAutoPipelining: true } : {}),
      ...(role === 'worker' ? {} : { clusterRetryStrategy: (times: number) => Math.min(times * 200, 2_000) }),
    }) as unknown as Redis;
  } else {
    redis = new IORedis(config.redisUrl, options);
  }
  // Connection errors are retried by ioredis; without a listener they would be unhandled 'error' events.
  redis.on('error', () => undefined);
  return redis;
}

/** Options shared by every Queue/Worker of this process: the connection and the (hash-tagged) key prefix. */
export function queueOptions(config: Pick<PlatformConfig, 'queuePrefix'>, connection: Redis): QueueOptions {
  return { connection, prefix: config.queuePrefix };
}
