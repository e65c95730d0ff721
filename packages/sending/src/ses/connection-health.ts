/**
 * The health of each delivery connection, shared by every worker of the deployment in Redis: one hash per
 * connection, `<QUEUE_PREFIX>:ses-connection:<name>` with `since` (first failure of the current run of failures),
 * `last` (latest failure) and `unhealthy` (when it was marked so), all in ms of the Redis server's clock.
 *
 * - A failed SES call (5xx, unreachable or timed out, throttled: {@link isConnectionFailure}) extends the run; a run
 *   begins afresh when the previous failure is older than the window. A run that has lasted `SES_FAILOVER_WINDOW_MS`
 *   marks the connection unhealthy.
 * - A successful call (or a probe that SES answered) ends the run and the unhealthy mark: the hash is deleted.
 * - Each process reads the marks at most every {@link READ_EVERY_MS} (one `HGET` per connection), so a send asks
 *   Redis nothing on the way; a process that cannot read Redis keeps its last view.
 *
 * @module
 */
import type { Redis, Cluster } from 'ioredis';
import { RedisScript } from '@mailroom/queues/redis-script';
import type { SendErrorClass } from './transport';

/** How long (ms) a process reuses its view of the marks. */
export const READ_EVERY_MS = 250;

/**
 * `KEYS[1]` the hash; `ARGV[1]` the window (ms), `ARGV[2]` the hash's expiry (ms).
 * @returns 1 when the connection is (now) unhealthy, else 0.
 */
const FAILED = new RedisScript(`local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[1])
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
local since = tonumber(redis.call('HGET', KEYS[1], 'since') or '0')
if last == 0 or now - last > window then since = now end
redis.call('HSET', KEYS[1], 'since', since, 'last', now)
local unhealthy = redis.call('HGET', KEYS[1], 'unhealthy')
if not unhealthy and now - since >= window then
  redis.call('HSET', KEYS[1], 'unhealthy', now)
  unhealthy = now
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if unhealthy then return 1 end
return 0`);

/** The Redis key of connection `name`'s health hash: `<QUEUE_PREFIX>:ses-connection:<name>`. */
export function connectionHealthKey(prefix: string, name: string): string {
  return `${prefix}:ses-connection:${name}`;
}

/**
 * Account-level stops SES decided (sending paused for the account's reputation, the account suspended): not an
 * incident to route around. The account's mail waits, as with one connection, until the operator resolves them.
 */
const ENFORCEMENT = ['SendingPausedException', 'AccountSuspendedException'];

/**
 * Whether an SES answer counts against its connection's health: the account or region failing (5xx, unreachable or
 * timed out, throttled), not the message, and not an enforcement stop ({@link ENFORCEMENT}).
 */
export function isConnectionFailure(c: SendErrorClass): boolean {
  if (c.kind === 'throttled' && ENFORCEMENT.some((name) => c.reason.startsWith(`${name}:`))) return false;
  return c.kind === 'transient' || c.kind === 'unreachable' || c.kind === 'throttled';
}

/** What the process knows of one connection. */
interface View {
  readAt: number;
  unhealthy: boolean;
  /** A run of failures is under way (so a success has something to end). */
  failing: boolean;
  reading?: Promise<void>;
}

/** See the module notes. */
export class ConnectionHealth {
  private readonly views = new Map<string, View>();

  /**
   * @param redis - any connection.
   * @param prefix - `QUEUE_PREFIX`.
   * @param windowMs - `SES_FAILOVER_WINDOW_MS`.
   */
  constructor(
    private readonly redis: Redis | Cluster,
    private readonly prefix: string,
    private readonly windowMs: number,
  ) {}

  /** The Redis key of connection `name`'s hash. */
  key(name: string): string {
    return connectionHealthKey(this.prefix, name);
  }

  /**
   * Whether `name` is healthy in this process's view (refreshed in the background when older than
   * {@link READ_EVERY_MS}; the first ask of a connection waits for its read). Never throws: unknown is healthy.
   */
  async healthy(name: string): Promise<boolean> {
    const v = this.view(name);
    if (Date.now() - v.readAt > READ_EVERY_MS) {
      const reading = this.read(name, v);
      if (v.readAt === 0) await reading;
    }
    return !v.unhealthy;
  }

  /** The cached view only (no Redis call): for metrics. */
  known(name: string): { healthy: boolean; failing: boolean } {
    const v = this.view(name);
    return { healthy: !v.unhealthy, failing: v.failing };
  }

  /**
   * Records a failed SES call of `name`. Never throws (a Redis error leaves the marks as they were).
   * @returns whether the connection is unhealthy now.
   */
  async failed(name: string): Promise<boolean> {
    const v = this.view(name);
    v.failing = true;
    try {
      const unhealthy =
        Number(
          await FAILED.run(this.redis, [this.key(name)], [this.windowMs, Math.max(this.windowMs * 10, 3_600_000)]),
        ) === 1;
      v.unhealthy = unhealthy;
      v.readAt = Date.now();
      return unhealthy;
    } catch {
      return v.unhealthy;
    }
  }

  /**
   * Records that `name`'s SES answered: ends a run of failures and the unhealthy mark, when this process knows of
   * one (otherwise no Redis call). Never throws.
   */
  async succeeded(name: string): Promise<void> {
    const v = this.view(name);
    if (!v.failing && !v.unhealthy) return;
    try {
      await this.redis.del(this.key(name));
      v.failing = false;
      v.unhealthy = false;
      v.readAt = Date.now();
    } catch {
      // The next success tries again.
    }
  }

  private view(name: string): View {
    let v = this.views.get(name);
    if (!v) this.views.set(name, (v = { readAt: 0, unhealthy: false, failing: false }));
    return v;
  }

  private read(name: string, v: View): Promise<void> {
    v.reading ??= this.redis
      .hmget(this.key(name), 'since', 'unhealthy')
      .then(([since, unhealthy]) => {
        v.failing = since !== null;
        v.unhealthy = unhealthy !== null;
        v.readAt = Date.now();
      })
      .catch(() => {
        // Redis unreachable: keep the last view, ask again at the next send.
        if (v.readAt === 0) v.readAt = 1;
      })
      .finally(() => (v.reading = undefined));
    return v.reading;
  }
}
