/**
 * Request steps: the parts of a route's chain (authentication, the project's rate limit, body parsing) as plain
 * async functions. `mountRoutes` runs a route's steps and its handler inside one Express handler, so a request
 * passes through Express's router once per route instead of once per step (each dispatch has a cost of its own
 * on the hot paths); where a step must stand in an Express chain (`router.get('/metrics', metricsOnly(...))`),
 * {@link toMiddleware} makes it a middleware.
 *
 * @module
 */
import type { Request, RequestHandler, Response } from 'express';

/** One step of a request: resolves to go on, throws (an `AppError`, usually) to answer with an error. */
export type RequestStep = (req: Request, res: Response) => Promise<void> | void;

/** The step as Express middleware: `next()` once it resolves, `next(err)` when it throws. */
export function toMiddleware(step: RequestStep): RequestHandler {
  return async (req, res, next) => {
    await step(req, res);
    next();
  };
}

/**
 * A middleware (body-parser's, here) as a step: resolves when it calls `next()`, rejects on `next(err)`.
 * Only for middleware that always calls `next` (one that ends the response itself would never resolve).
 */
export function fromMiddleware(middleware: RequestHandler): RequestStep {
  return (req, res) =>
    new Promise<void>((resolve, reject) => {
      // body-parser passes its http-errors (Error instances) or nothing.
      middleware(req, res, (err?: unknown) =>
        err ? reject(err instanceof Error ? err : new Error('middleware failed')) : resolve(),
      );
    });
}
