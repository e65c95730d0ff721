/**
 * A Lua script run by its SHA-1 digest (`EVALSHA`: the text is not sent with every call) and loaded with `EVAL`
 * the first time a server answers `NOSCRIPT` (a new or restarted Redis, a cluster node that never ran it).
 * Redis runs a script atomically; on a Redis Cluster all of a call's keys must share one hash slot (a `{hash tag}`).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';

/** One Lua script, run on any connection by {@link RedisScript.run}. */
export class RedisScript {
  /** The script's SHA-1 digest (hex), as `EVALSHA` names it. */
  readonly sha: string;

  constructor(readonly text: string) {
    this.sha = createHash('sha1').update(text).digest('hex');
  }

  /**
   * Runs the script with `keys` (`KEYS`) and `args` (`ARGV`).
   *
   * @returns the script's reply.
   * @throws the Redis error (a script error, or the connection's), other than `NOSCRIPT`, which loads the script.
   */
  async run(redis: Redis | Cluster, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.text, keys.length, ...keys, ...args);
    }
  }
}
