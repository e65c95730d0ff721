/**
 * Per-project request rate limit shared by every API process (Redis, rate-limiter-flexible).
 *
 * Every response carries `RateLimit-Limit`, `RateLimit-Remaining` and `RateLimit-Reset` (seconds; IETF
 * draft-ietf-httpapi-ratelimit-headers); a 429 adds `Retry-After` (seconds). If Redis is unreachable, each
 * process falls back to its own in-memory limiter rather than failing requests.
 *
 * @module
 */
import type { RequestHandler } from 'express';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Redis } from 'ioredis';
import { AppError, ErrorCode } from '@mailroom/core';

/** Creates the middleware; `perMinute` requests per project per 60 s window. */
export function rateLimit(redis: Redis, keyPrefix: string, perMinute: number): RequestHandler {
  const limiter = new RateLimiterRedis({
    storeClient: redis,
    keyPrefix: `${keyPrefix}:ratelimit`,
    points: perMinute,
    duration: 60,
    insuranceLimiter: new RateLimiterMemory({ points: perMinute, duration: 60 }),
  });
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
      const retryAfter = String(Math.max(1, Math.ceil(err.msBeforeNext / 1000)));
      throw new AppError(ErrorCode.RATE_LIMITED, `Rate limit of ${perMinute} requests per minute exceeded`, {
        headers: { 'Retry-After': retryAfter },
        suggestion: `Retry after ${retryAfter} s.`,
      });
    }
    next();
  };
}
