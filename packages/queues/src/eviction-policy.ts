/**
 * Redis's `maxmemory-policy`, read and judged: BullMQ keeps every job, lock and queue structure in Redis, and a
 * policy other than `noeviction` lets Redis delete them under memory pressure (BullMQ's "Going to production"
 * guide requires `noeviction`). Nothing accepted is lost for good (an email is a Postgres row first and the
 * reconciler re-enqueues it), but evicted jobs are late, and evicted locks or rate-gate keys can break the
 * guarantees they hold.
 *
 * The worker logs an error at start when the policy evicts; the API's and the worker's readiness report it in
 * their bodies (without failing: see `docs/self-hosting/monitoring.md`); the worker exports it as
 * `mailroom_redis_maxmemory_policy{policy}`.
 *
 * @module
 */
import type { Cluster, Redis } from 'ioredis';
import { errorMessage } from '@mailroom/platform/errors';

/** What was found: every node `noeviction` (`ok`), some node evicting (`evicts`), or unreadable (`unknown`). */
export interface EvictionPolicy {
  status: 'ok' | 'evicts' | 'unknown';
  /** The policies found (one per node read), e.g. `['allkeys-lru']`; empty when unknown. */
  policies: string[];
  /** One sentence for logs and readiness bodies. */
  message: string;
}

/**
 * Reads `maxmemory-policy` with `CONFIG GET` from the server, or from every master of a Redis Cluster.
 *
 * Never throws: a refused `CONFIG` (managed services often rename or forbid it), an unreachable Redis or no answer
 * within `timeoutMs` gives `unknown` with the reason.
 */
export async function readEvictionPolicy(redis: Redis, timeoutMs = 3_000): Promise<EvictionPolicy> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    return await Promise.race([read(redis), timeout]);
  } catch (err) {
    return {
      status: 'unknown',
      policies: [],
      message: `Redis maxmemory-policy could not be read (${errorMessage(err)}); make sure it is noeviction`,
    };
  } finally {
    clearTimeout(timer);
  }
}

async function read(redis: Redis): Promise<EvictionPolicy> {
  const cluster = (redis as unknown as Partial<Cluster>).isCluster ? (redis as unknown as Cluster) : undefined;
  const nodes: Redis[] = cluster ? cluster.nodes('master') : [redis];
  const policies = await Promise.all(
    nodes.map(async (node) => {
      const reply = (await node.config('GET', 'maxmemory-policy')) as string[];
      if (typeof reply[1] !== 'string') throw new Error('CONFIG GET maxmemory-policy returned nothing');
      return reply[1];
    }),
  );
  const evicting = [...new Set(policies.filter((p) => p !== 'noeviction'))];
  if (evicting.length === 0) return { status: 'ok', policies, message: 'maxmemory-policy is noeviction' };
  return {
    status: 'evicts',
    policies,
    message:
      `Redis maxmemory-policy is ${evicting.join(', ')}, not noeviction: under memory pressure Redis may delete BullMQ's ` +
      'jobs and locks (emails are then late until the reconciler re-enqueues them). Set maxmemory-policy noeviction.',
  };
}

/**
 * {@link readEvictionPolicy} cached for `ttlMs` (a readiness probe may ask every few seconds): a reading of
 * `ok` or `evicts` is kept, an `unknown` one is read again next time.
 */
export class EvictionPolicyProbe {
  private cached: { at: number; value: EvictionPolicy } | undefined;
  private inflight: Promise<EvictionPolicy> | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly ttlMs = 60_000,
  ) {}

  /** The latest reading, read again when older than the TTL; concurrent callers share one read. */
  async current(): Promise<EvictionPolicy> {
    if (this.cached && Date.now() - this.cached.at < this.ttlMs) return this.cached.value;
    this.inflight ??= readEvictionPolicy(this.redis).finally(() => (this.inflight = undefined));
    const value = await this.inflight;
    if (value.status !== 'unknown') this.cached = { at: Date.now(), value };
    return value;
  }

  /** The last reading kept (none yet, or only unknowns: undefined), without reading. */
  get last(): EvictionPolicy | undefined {
    return this.cached?.value;
  }
}
