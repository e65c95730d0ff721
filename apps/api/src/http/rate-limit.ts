/**
 * Rate limits shared by every API process (Redis, rate-limiter-flexible), each over a fixed 60 s window:
 *
 * - per project over every keyed route ({@link rateLimit}, `RATE_LIMIT_PER_MINUTE`);
 * - per client IP on unauthenticated endpoints ({@link IpLimiter}: `POST /admin/login`, `POST /unsubscribe/…`);
 * - per client IP on failed authentications ({@link AuthFailureLimiter}, `AUTH_FAILURE_LIMIT_PER_MINUTE`).
 *
 * Every response of a keyed route carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset`
 * (seconds; IETF draft-ietf-httpapi-ratelimit-headers); every 429 carries `Retry-After` (seconds). If Redis is
 * unreachable, each process falls back to its own in-memory limiter rather than failing requests. The client IP
 * is `req.ip`, as the app's `trust proxy` setting makes it.
 *
 * @module
 */
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode } from '@mailroom/core';

/** Creates the middleware; `perMinute` requests per project per 60 s window. */
export function rateLimit(redis: Redis, keyPrefix: string, perMinute: number): RequestHandler {
  const limiter = perMinuteLimiter(redis, keyPrefix, 'ratelimit', perMinute);
  const setHeaders = (res: Parameters<RequestHandler>[1], r: RateLimiterRes) => {
    res.setHeader('RateLimit-Limit', String(perMinute));
    res.setHeader('RateLimit-Remaining', String(Math.max(0, r.remainingPoints)));
    res.setHeader('RateLimit-Reset', String(Math.ceil(r.msBeforeNext / 1000)));
  };
  return async (_req, res, next) => {
    const projectId = res.locals.auth!.projectId;
    try {
      setHeaders(res, await limiter.consume(projectId));
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      setHeaders(res, err);
      throw rateLimited(err, `Rate limit of ${perMinute} requests per minute exceeded`);
    }
    next();
  };
}

/** 429 `RATE_LIMITED` with `Retry-After` (whole seconds, at least 1) from a refused limiter answer. */
function rateLimited(r: RateLimiterRes, message: string): AppError {
  const retryAfter = String(Math.max(1, Math.ceil(r.msBeforeNext / 1000)));
  return new AppError(ErrorCode.RATE_LIMITED, message, { headers: { 'Retry-After': retryAfter }, suggestion: `Retry after ${retryAfter} s.` });
}

function perMinuteLimiter(redis: Redis, keyPrefix: string, name: string, perMinute: number): RateLimiterRedis {
  return new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${keyPrefix}:${name}`,
    points: perMinute,
    duration: 60,
    insuranceLimiter: new RateLimiterMemory({ points: perMinute, duration: 60 }),
  });
}

/** The key of a client in the per-IP limits: `req.ip` (as `trust proxy` makes it), or one shared bucket without it. */
export function clientIp(req: { ip?: string | undefined }): string {
  return req.ip ?? 'unknown';
}

/** A per-client-IP request limit of one endpoint, shared by every API process. */
export class IpLimiter {
  private readonly limiter: RateLimiterRedis;

  /**
   * @param name - the endpoint's name in Redis keys (`<QUEUE_PREFIX>:<name>:<ip>`).
   * @param perMinute - requests per IP per 60 s window.
   * @param what - how 429 messages name the endpoint ("unsubscribe requests").
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

  /** Counts one request of `ip`. @throws {@link AppError} 429 `RATE_LIMITED` (with `Retry-After`) beyond the limit. */
  async consume(ip: string): Promise<void> {
    try {
      await this.limiter.consume(ip);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      throw rateLimited(err, `Too many ${this.what} from this address: at most ${this.perMinute} per minute`);
    }
  }

  /** Express middleware applying {@link consume} to `req.ip`. */
  middleware(): RequestHandler {
    return async (req, _res, next) => {
      await this.consume(clientIp(req));
      next();
    };
  }
}

/**
 * Counts failed authentications per client IP (unknown or malformed `sk_`/`pk_` keys, wrong admin tokens),
 * shared by every API process. Once an IP has failed `perMinute` times in the window, its next failure and every
 * later attempt with a credential this process has not seen succeed get 429 `RATE_LIMITED` with `Retry-After`,
 * without a database lookup. Successful authentications are never counted, and a credential known to be good
 * is still checked (see `authenticate`), so a client that authenticates keeps working.
 */
export class AuthFailureLimiter {
  private readonly limiter: RateLimiterRedis;

  /** @param perMinute - failed authentications per IP per 60 s window. */
  constructor(redis: Redis, keyPrefix: string, readonly perMinute: number) {
    this.limiter = perMinuteLimiter(redis, keyPrefix, 'authfail', perMinute);
  }

  private blocked(r: RateLimiterRes): AppError {
    return rateLimited(r, `Too many failed authentications from this address: at most ${this.perMinute} per minute`);
  }

  /** @throws {@link AppError} 429 `RATE_LIMITED` when `ip` is over its failure limit; counts nothing. */
  async assertNotBlocked(ip: string): Promise<void> {
    const r = await this.limiter.get(ip);
    if (r && r.consumedPoints > this.perMinute) throw this.blocked(r);
  }

  /**
   * Counts one failed authentication of `ip`.
   *
   * @throws {@link AppError} 429 `RATE_LIMITED` when this failure is over the limit (the caller answers 401 otherwise).
   */
  async fail(ip: string): Promise<void> {
    try {
      await this.limiter.consume(ip);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) throw err;
      throw this.blocked(err);
    }
  }
}
