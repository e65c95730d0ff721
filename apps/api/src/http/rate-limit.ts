/**
 * Rate limits shared by every API process (Redis, rate-limiter-flexible), each over a fixed 60 s window:
 *
 * - per project over every keyed route ({@link rateLimitStep}, `RATE_LIMIT_PER_MINUTE`);
 * - per client IP on an unauthenticated endpoint ({@link IpLimiter}: `POST /admin/login`);
 * - per client IP on failed lookups ({@link FailureLimiter}): authentications (`AUTH_FAILURE_LIMIT_PER_MINUTE`)
 *   and unsubscribe tokens (`UNSUBSCRIBE_LIMIT_PER_MINUTE`).
 *
 * Every response of a keyed route carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`
 * (seconds; IETF draft-ietf-httpapi-ratelimit-headers); every 429 carries `Retry-After` (seconds). If Redis is
 * unreachable, each process falls back to its own in-memory limiter rather than failing requests.
 *
 * A client is `req.ip` as the app's `trust proxy` setting (`TRUST_PROXY`) makes it, keyed by {@link ipKey}: an
 * IPv4 address as itself, an IPv6 address by its /64 prefix (one subscriber's allocation: a client rotating
 * through its /64 stays one client).
 *
 * @module
 */
import { isIPv4, isIPv6 } from 'node:net';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import type { RequestStep } from './steps';
import { coalescedConsume } from './coalesced-limit';

/** The per-project limit as a request step (see `steps.ts`), after authentication; `perMinute` requests per project per 60 s window. */
export function rateLimitStep(redis: Redis, keyPrefix: string, perMinute: number): RequestStep {
  // Concurrent requests counted together, one Redis call per project and turn (`./coalesced-limit`).
  const consume = coalescedConsume(perMinuteLimiter(redis, keyPrefix, 'ratelimit', perMinute), perMinute);
  const limitText = String(perMinute);
  return async (_req, res) => {
    const { res: r, refused } = await consume(res.locals.auth!.projectId);
    res.setHeader('RateLimit-Limit', limitText);
    res.setHeader('RateLimit-Remaining', String(Math.max(0, r.remainingPoints)));
    res.setHeader('RateLimit-Reset', String(Math.ceil(r.msBeforeNext / 1000)));
    if (refused) throw rateLimited(r, `Rate limit of ${perMinute} requests per minute exceeded`);
  };
}

/**
 * The per-project limit of {@link rateLimitStep} outside HTTP (the SMTP relay: one message is one request), on the
 * same Redis counters, so HTTP requests and relayed messages of a project share `perMinute`.
 *
 * Also counts the further messages of a batch request (`POST /v1/send/batch`: each message is one request).
 *
 * @returns a function that counts `points` (default 1) requests of the project. @throws {@link AppError} 429
 *   `RATE_LIMITED` (with `Retry-After`) beyond the limit.
 */
export function projectRateLimit(
  redis: Redis,
  keyPrefix: string,
  perMinute: number,
): (projectId: string, points?: number) => Promise<void> {
  const limiter = perMinuteLimiter(redis, keyPrefix, 'ratelimit', perMinute);
  return async (projectId, points = 1) => {
    if (points <= 0) return;
    try {
      await limiter.consume(projectId, points);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      throw rateLimited(err, `Rate limit of ${perMinute} requests per minute exceeded`);
    }
  };
}

/**
 * The per-IP limit of failed authentications (`AUTH_FAILURE_LIMIT_PER_MINUTE`), one Redis bucket per address shared
 * by every API process and the SMTP relay: a key guessed over HTTP or over SMTP `AUTH` counts alike.
 */
export function authFailureLimiter(
  redis: Redis,
  config: { queuePrefix: string; authFailureLimitPerMinute: number; blockedLookupIntervalSeconds: number },
): FailureLimiter {
  return new FailureLimiter(redis, config.queuePrefix, {
    name: 'authfail',
    perMinute: config.authFailureLimitPerMinute,
    trickleIntervalSeconds: config.blockedLookupIntervalSeconds,
    what: 'failed authentications',
  });
}

/** 429 `RATE_LIMITED` with `Retry-After` (whole seconds, at least 1) from a refused limiter answer. */
function rateLimited(r: RateLimiterRes, message: string): AppError {
  const retryAfter = String(Math.max(1, Math.ceil(r.msBeforeNext / 1000)));
  return new AppError(ErrorCode.RATE_LIMITED, message, {
    headers: { 'Retry-After': retryAfter },
    suggestion: `Retry after ${retryAfter} s.`,
  });
}

/**
 * The connection as the limiters see it: the same client, except that `multi()` makes its transaction only when
 * one of its commands is called. rate-limiter-flexible calls `multi()` on every consume and uses it only to force
 * an expiry; an ioredis transaction copies every script defined on the connection (BullMQ's dozens share it), and
 * that copy was about 5% of the API's CPU under `/v1/track` load (`npm run bench -- api`, `--cpu-prof`).
 */
function limiterClient(redis: Redis): Redis {
  const lazyMulti = () => {
    let real: ReturnType<Redis['multi']> | undefined;
    return new Proxy({} as ReturnType<Redis['multi']>, {
      get(_target, prop) {
        real ??= redis.multi();
        const value: unknown = Reflect.get(real, prop, real);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(real) : value;
      },
    });
  };
  return new Proxy(redis, {
    get: (target, prop, receiver) => (prop === 'multi' ? lazyMulti : (Reflect.get(target, prop, receiver) as unknown)),
  });
}

function perMinuteLimiter(redis: Redis, keyPrefix: string, name: string, perMinute: number): RateLimiterRedis {
  return new RateLimiterRedis({
    storeClient: limiterClient(redis),
    keyPrefix: `${keyPrefix}:${name}`,
    points: perMinute,
    duration: 60,
    insuranceLimiter: new RateLimiterMemory({ points: perMinute, duration: 60 }),
  });
}

/**
 * The key of a client address in the per-IP limits.
 *
 * - IPv4 (`203.0.113.5`): the address itself.
 * - IPv4-mapped IPv6 (`::ffff:203.0.113.5`, `::ffff:cb00:7105`): the IPv4 address, so a dual-stack socket and an
 *   IPv4 one count together.
 * - Other IPv6: its /64 prefix in canonical form (RFC 5952 lower case, no leading zeros), e.g.
 *   `2001:db8:0:1::/64`; a zone (`%eth0`) is dropped. A /64 is the smallest allocation a subscriber gets
 *   (RFC 6177), and a host picks addresses in it freely (RFC 8981), so counting by address would count nothing.
 * - Anything else (no address known): returned unchanged, one shared bucket.
 *
 * @param address - `req.ip`.
 */
export function ipKey(address: string): string {
  if (isIPv4(address)) return address;
  const bare = address.split('%')[0];
  if (!isIPv6(bare)) return address;
  const groups = ipv6Groups(bare.toLowerCase());
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
  }
  // The network address in RFC 5952 form: its four zero host groups are the longest zero run, so they (with any
  // zero groups right before them) become `::`.
  const head = groups.slice(0, 4);
  while (head.length > 0 && head[head.length - 1] === 0) head.pop();
  return `${head.map((g) => g.toString(16)).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address (with `::` and a trailing dotted IPv4 part expanded). */
function ipv6Groups(address: string): number[] {
  let text = address;
  // The dotted part is what follows the last colon (anchored at both ends: an unanchored search for it backtracks
  // quadratically over a long run of digits).
  const tail = text.slice(text.lastIndexOf(':') + 1);
  if (/^\d+\.\d+\.\d+\.\d+$/.test(tail)) {
    const [a, b, c, d] = tail.split('.').map(Number) as [number, number, number, number];
    text = `${text.slice(0, text.length - tail.length)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [left, right] = text.split('::') as [string, string | undefined];
  const parse = (part: string) => (part ? part.split(':').map((g) => parseInt(g, 16)) : []);
  const l = parse(left);
  if (right === undefined) return l;
  const r = parse(right);
  return [...l, ...new Array<number>(8 - l.length - r.length).fill(0), ...r];
}

/** {@link ipKey} of recent addresses: every keyed request asks (authentication), mostly for the same few clients. */
const recentIpKeys = new Map<string, string>();

/** The limiter key of a request's client: {@link ipKey} of `req.ip` (as `trust proxy` makes it). */
export function clientIp(req: { ip?: string | undefined }): string {
  const address = req.ip ?? 'unknown';
  let key = recentIpKeys.get(address);
  if (key === undefined) {
    if (recentIpKeys.size >= 1000) recentIpKeys.clear();
    key = ipKey(address);
    recentIpKeys.set(address, key);
  }
  return key;
}

/** A per-client-IP request limit of one endpoint, shared by every API process. */
export class IpLimiter {
  private readonly limiter: RateLimiterRedis;

  /**
   * @param name - the endpoint's name in Redis keys (`<QUEUE_PREFIX>:<name>:<client>`).
   * @param perMinute - requests per client ({@link ipKey}) per 60 s window.
   * @param what - how 429 messages name the endpoint ("sign-in attempts").
   */
  constructor(
    redis: Redis,
    keyPrefix: string,
    name: string,
    readonly perMinute: number,
    private readonly what: string,
  ) {
    this.limiter = perMinuteLimiter(redis, keyPrefix, name, perMinute);
  }

  /** Counts one request of `client` ({@link clientIp}). @throws {@link AppError} 429 `RATE_LIMITED` (with `Retry-After`) beyond the limit. */
  async consume(client: string): Promise<void> {
    try {
      await this.limiter.consume(client);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      throw rateLimited(err, `Too many ${this.what} from this address: at most ${this.perMinute} per minute`);
    }
  }
}

/**
 * One counted lookup, from {@link FailureLimiter.attempt}: report its outcome with {@link succeeded} (the point is
 * given back) or, on failure, answer {@link failure}.
 */
export interface Attempt {
  /** Gives the counted point back: the credential was valid, so it never counts. */
  succeeded(): Promise<void>;
  /**
   * The answer to a failed lookup: `otherwise` (e.g. 401, 404), or 429 `RATE_LIMITED` when the client was over
   * its limit and this was its one trickle lookup.
   */
  failure(otherwise: AppError): AppError;
}

/** Options of a {@link FailureLimiter}. */
export interface FailureLimiterOptions {
  /** The limiter's name in Redis keys (`<QUEUE_PREFIX>:<name>:<client>`, and `<name>:trickle`). */
  name: string;
  /** Failures per client ({@link ipKey}) per 60 s window. */
  perMinute: number;
  /** While a client is over the limit, one lookup per this many seconds is still allowed (s, whole). */
  trickleIntervalSeconds: number;
  /** How 429 messages name what failed ("failed authentications"). */
  what: string;
}

/**
 * Counts failed lookups per client IP (unknown or malformed `sk_`/`pk_` keys and wrong admin tokens; made-up
 * unsubscribe tokens), shared by every API process.
 *
 * A lookup that costs the database is counted before it is made ({@link attempt}: one atomic Redis increment,
 * so N parallel requests cannot all pass a limit of M < N) and given back when the credential turns out valid
 * ({@link Attempt.succeeded}); a failure that costs nothing (a malformed key, one the negative cache answers)
 * is counted after ({@link fail}). Once a client is over `perMinute`, it gets 429 `RATE_LIMITED` with
 * `Retry-After` without a lookup, except for one lookup per `trickleIntervalSeconds` (per client, across processes):
 * a legitimate client sharing the address with an offender still gets through within seconds, and then the
 * caller's own memory of good credentials lets it keep working.
 */
export class FailureLimiter {
  private readonly limiter: RateLimiterRedis;
  private readonly trickle: RateLimiterRedis;

  constructor(
    redis: Redis,
    keyPrefix: string,
    private readonly options: FailureLimiterOptions,
  ) {
    this.limiter = perMinuteLimiter(redis, keyPrefix, options.name, options.perMinute);
    this.trickle = new RateLimiterRedis({
      storeClient: limiterClient(redis),
      keyPrefix: `${keyPrefix}:${options.name}:trickle`,
      points: 1,
      duration: options.trickleIntervalSeconds,
      insuranceLimiter: new RateLimiterMemory({ points: 1, duration: options.trickleIntervalSeconds }),
    });
  }

  /** Failures per client per 60 s window. */
  get perMinute(): number {
    return this.options.perMinute;
  }

  private blocked(r: RateLimiterRes): AppError {
    return rateLimited(
      r,
      `Too many ${this.options.what} from this address: at most ${this.options.perMinute} per minute`,
    );
  }

  /**
   * Counts a lookup of `client` before it is made.
   *
   * @param trickle - whether a client over the limit may still have its one lookup per `trickleIntervalSeconds`
   *   (false: over the limit is always 429).
   * @returns the {@link Attempt}, to report the outcome to.
   * @throws {@link AppError} 429 `RATE_LIMITED` (with `Retry-After`) when `client` is over the limit (and its
   *   trickle, if allowed, is spent); the caller must then not look anything up.
   */
  async attempt(client: string, trickle = true): Promise<Attempt> {
    let refused: RateLimiterRes | undefined;
    try {
      await this.limiter.consume(client);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      refused = err;
    }
    if (refused) {
      if (!trickle) throw this.blocked(refused);
      try {
        await this.trickle.consume(client);
      } catch (err) {
        if (!(err instanceof RateLimiterRes)) throw err;
        throw this.blocked(refused);
      }
    }
    const over = refused;
    return {
      succeeded: async () => {
        await this.limiter.reward(client, 1);
      },
      failure: (otherwise) => (over ? this.blocked(over) : otherwise),
    };
  }

  /**
   * Counts one failure of `client` that cost no lookup (a malformed credential, one answered from memory).
   *
   * @throws {@link AppError} 429 `RATE_LIMITED` when this failure is over the limit (the caller answers its own
   *   failure, e.g. 401, otherwise).
   */
  async fail(client: string): Promise<void> {
    try {
      await this.limiter.consume(client);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      throw this.blocked(err);
    }
  }

  /**
   * @throws {@link AppError} 429 `RATE_LIMITED` when `client` is over its limit (its next counted attempt would be
   *   refused); counts nothing.
   */
  async assertNotBlocked(client: string): Promise<void> {
    const r = await this.limiter.get(client);
    if (r && r.consumedPoints >= this.options.perMinute) throw this.blocked(r);
  }
}
