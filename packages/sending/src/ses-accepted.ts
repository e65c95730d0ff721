/**
 * Once SES has accepted a message, its outcome is never thrown away. The `sent` write may take only what is left
 * of the claim's lease (`SEND_LEASE_MS` less 2 s) and is retried while Postgres is unreachable (backoff from
 * 100 ms to 2 s). As soon as one attempt fails, or before one that has less than 1 s of lease left, the outcome
 * is kept in Redis (`<prefix>:ses-accepted:<email id>`, 7 days; removed once the write succeeds). Whoever claims
 * the row again after the lease finds it there ({@link readAccepted}) and records `sent` without calling SES.
 * What remains: a process hard-killed between SES's request and the first write (or Postgres and Redis both
 * unreachable then) leaves each message in that window uncertain, and it is sent again, with the same Message-ID,
 * after the lease: at most the sends the process had in flight, `WORKER_CONCURRENCY` (docs/architecture.md#delivery-guarantees).
 *
 * @module
 */
import type { Redis, Cluster } from 'ioredis';
import { isUnavailableError } from '@mailroom/platform/errors';
import { RedisScript } from '@mailroom/queues/redis-script';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { SendingConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';

/** What SES answered for a message: kept in Redis when its `sent` write fails. */
export interface AcceptedBySes {
  messageId: string;
  renderedSubject: string;
  /** The delivery connection that took it (recorded on the row with `sent`). */
  connection?: string;
}

/** How long (s) an SES outcome waits in Redis for its row to be claimed again. */
const ACCEPTED_TTL_S = 7 * 86_400;
/** Time (ms) left on the lease when the `sent` write stops retrying, so no other worker can claim meanwhile. */
const LEASE_MARGIN_MS = 2_000;
/** How long (ms) keeping an SES outcome in Redis may take before it is given up (Redis may be down too). */
const KEEP_TIMEOUT_MS = 2_000;

/** The Redis key of an email's kept SES outcome: `<QUEUE_PREFIX>:ses-accepted:<email id>`. */
export function acceptedKey(config: Pick<PlatformConfig, 'queuePrefix'>, emailId: string): string {
  return `${config.queuePrefix}:ses-accepted:${emailId}`;
}

/**
 * The SES outcome kept for an email whose `sent` write failed, or undefined when there is none (or it cannot be
 * read: then the message is sent again).
 *
 * @throws the Redis error when Redis cannot be asked.
 */
export async function readAccepted(redis: Redis | Cluster, key: string): Promise<AcceptedBySes | undefined> {
  return parseAccepted(await redis.get(key));
}

/** What recording an accepted send needs. */
export interface RecordSentDeps {
  config: Pick<SendingConfig, 'sendLeaseMs'>;
  redis: Redis | Cluster;
}

/**
 * Records that SES accepted a message: runs `write` (the `sent` finish) until it succeeds or the claim's lease
 * nearly runs out (`claimedAt + SEND_LEASE_MS - 2 s`), keeping the outcome in Redis under `key` meanwhile when
 * it is at risk (see the module notes), and removing it again once the write has succeeded.
 *
 * @param claimedAt - when the claim's lease began (epoch ms).
 * @param keepFirst - keep the outcome in Redis before the first write: the write will wait behind others (a
 *   running batch of finishes), so a crash during that wait must not lose it (the reclaim then records it).
 * @returns what `write` returned (false: the claim was lost before the outcome was recorded).
 * @throws the write's last error, once the lease is nearly over or at once for an error that is not a lost
 *   connection (logged; the outcome is kept in Redis if Redis took it, so the job's retry records it).
 */
export async function recordAccepted(
  deps: RecordSentDeps,
  key: string,
  accepted: AcceptedBySes,
  claimedAt: number,
  write: () => Promise<boolean>,
  log: Logger,
  keepFirst = false,
): Promise<boolean> {
  const { messageId } = accepted;
  // Kept in Redis before any write that could outlive the lease, and as soon as one write fails: whoever
  // claims the row after the lease then records it instead of sending again.
  let kept = false;
  const keep = async (why: string, expected = false): Promise<void> => {
    if (kept) return;
    try {
      // Set with the other keeps of this turn of the event loop (the SES answers read in one poll), in one call.
      await turnBatches(deps.redis).keep(key, JSON.stringify(accepted));
      kept = true;
      if (expected) log.debug({ messageId, why }, 'SES outcome kept in Redis until the sent write succeeds');
      else log.warn({ messageId, why }, 'SES outcome kept in Redis until the sent write succeeds');
    } catch (err) {
      log.error(
        { messageId, why, err: (err as Error).message },
        'SES accepted the message but Redis did not take its outcome either; it may be sent again after the lease',
      );
    }
  };
  // A write that must first wait for others (a batch of finishes running) widens the window in which a crash
  // loses the outcome: keep it before waiting.
  if (keepFirst) await keep('the sent write waits for a running batch', true);
  const recorded = await writeUntilLeaseEnds(write, claimedAt + deps.config.sendLeaseMs - LEASE_MARGIN_MS, keep).catch(
    (err) => {
      log.error(
        { messageId, err: (err as Error).message },
        'SES accepted the message but the sent write failed; the job retries',
      );
      throw err;
    },
  );
  // Not awaited: once the row is `sent` a claim skips it, so the key is only garbage (it expires) if this is lost.
  if (kept) turnBatches(deps.redis).forget(key);
  return recorded;
}

/** Sets each `KEYS[i]` to `ARGV[i + 1]`, expiring in `ARGV[1]` s: the kept outcomes of one turn, in one call. */
const KEEP_ALL = new RedisScript(`for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[1]) end
return #KEYS`);

/**
 * The keeps and removals of kept outcomes on one connection, gathered over one turn of the event loop (the SES
 * answers read in one poll; the finishes of one batch) and sent together: one script call sets them all, each
 * with its expiry, and one `DEL` removes them, where each was a command of its own (about 1.7 Redis commands per
 * email in `npm run bench -- worker`). On a Redis Cluster, where keys need not share a hash slot, each key still
 * goes in a command of its own.
 */
class TurnBatches {
  private keeps: { keys: string[]; values: string[]; done: Promise<void> } | undefined;
  private forgets: string[] | undefined;

  constructor(private readonly redis: Redis | Cluster) {}

  /**
   * Keeps `value` under `key` for {@link ACCEPTED_TTL_S}, with the other keeps of this turn.
   *
   * @throws the Redis error, or a timeout after {@link KEEP_TIMEOUT_MS} (the whole batch fails alike).
   */
  keep(key: string, value: string): Promise<void> {
    if (!this.keeps) {
      const batch = { keys: [] as string[], values: [] as string[], done: Promise.resolve() };
      batch.done = new Promise<void>((resolve, reject) =>
        setImmediate(() => {
          if (this.keeps === batch) this.keeps = undefined;
          withTimeout(this.setAll(batch.keys, batch.values), KEEP_TIMEOUT_MS).then(() => resolve(), reject);
        }),
      );
      this.keeps = batch;
    }
    this.keeps.keys.push(key);
    this.keeps.values.push(value);
    return this.keeps.done;
  }

  /** Removes `key` with the other removals of this turn; a lost removal only leaves a key that expires. */
  forget(key: string): void {
    if (this.forgets) {
      this.forgets.push(key);
      return;
    }
    const keys = (this.forgets = [key]);
    setImmediate(() => {
      this.forgets = undefined;
      const removed = this.redis.isCluster ? Promise.all(keys.map((k) => this.redis.del(k))) : this.redis.del(...keys);
      removed.catch(() => undefined);
    });
  }

  private async setAll(keys: string[], values: string[]): Promise<void> {
    if (this.redis.isCluster) await Promise.all(keys.map((k, i) => this.redis.set(k, values[i], 'EX', ACCEPTED_TTL_S)));
    else await KEEP_ALL.run(this.redis, keys, [ACCEPTED_TTL_S, ...values]);
  }
}

const batchesOf = new WeakMap<Redis | Cluster, TurnBatches>();

/** The {@link TurnBatches} of a connection. */
function turnBatches(redis: Redis | Cluster): TurnBatches {
  let b = batchesOf.get(redis);
  if (!b) batchesOf.set(redis, (b = new TurnBatches(redis)));
  return b;
}

/** Rejects with `Error('timed out after N ms')` when `p` has not settled within `ms`; `p` itself runs on. */
async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A kept SES outcome, or undefined when there is none (or it cannot be read: then the message is re-sent). */
function parseAccepted(kept: string | null): AcceptedBySes | undefined {
  if (!kept) return undefined;
  try {
    const v = JSON.parse(kept) as Partial<AcceptedBySes>;
    if (typeof v.messageId !== 'string' || typeof v.renderedSubject !== 'string') return undefined;
    return {
      messageId: v.messageId,
      renderedSubject: v.renderedSubject,
      ...(typeof v.connection === 'string' ? { connection: v.connection } : {}),
    };
  } catch {
    return undefined;
  }
}

/**
 * Runs the write that records an SES outcome until it succeeds or the lease runs out (`deadline`, epoch ms):
 * each attempt may take only the time left (a write on a silently dropped connection would otherwise hang past
 * the lease, when another worker may claim the row), and is tried again while Postgres is unreachable
 * ({@link isUnavailableError}) or did not answer in time, with backoff from 100 ms doubling to 2 s.
 *
 * @param keep - called (once is enough; it is idempotent) before an attempt that has less than 1 s of lease left
 *   and after any failed attempt, so the outcome survives the lease.
 * @throws the last error when the deadline passes, or at once for an error that is not a lost connection.
 */
async function writeUntilLeaseEnds<T>(
  write: () => Promise<T>,
  deadline: number,
  keep: (why: string) => Promise<void>,
): Promise<T> {
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    const left = deadline - Date.now();
    if (left < 1_000) await keep('little of the lease left');
    try {
      return await withTimeout(write(), Math.max(left, 1_000));
    } catch (err) {
      await keep((err as Error).message);
      const timedOut = /^timed out after/.test((err as Error).message);
      if ((!timedOut && !isUnavailableError(err)) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}
