import type { Request, RequestHandler, Response } from 'express';
import type { AuthContext } from './context';
import { randomUUID } from 'node:crypto';
import type { Logger } from '@mailroom/platform/logger';

const INBOUND_ID = /^[\w.:-]{8,128}$/;

/** Records a finished request (the app's metrics); see `ApiMetrics.record`. */
export type RequestRecorder = (req: Request, res: Response, seconds: number) => void;

/**
 * Gives every request an id (the caller's `X-Request-Id` when well-formed, else a new UUID), echoes it as
 * `X-Request-Id`, and writes one access-log line per response (method, path, status, ms, projectId). `record`, when
 * given, is called in the same `finish` listener (the app's metrics), so a request costs one listener, not two.
 *
 * `res.locals.log` is a child logger bound to the request id (and, once authenticated, the project id and a test
 * key's `keyMode`), made on first use: most requests log nothing but their access line, which is written with
 * the same fields from the base logger, so they never pay for a child.
 */
export function requestId(logger: Logger, record?: RequestRecorder): RequestHandler {
  return (req, res, next) => {
    const inbound = req.get('x-request-id');
    const id = inbound && INBOUND_ID.test(inbound) ? inbound : randomUUID();
    const locals = new RequestLocals(id, logger);
    res.locals = locals;
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      record?.(req, res, ms / 1000);
      logger.info(
        {
          ...bindings(id, locals.auth),
          method: req.method,
          path: req.path,
          status: res.statusCode,
          ms: Math.round(ms * 10) / 10,
          projectId: locals.auth?.projectId,
        },
        'request',
      );
    });
    next();
  };
}

/**
 * A request's `res.locals`: its id, its authentication once known (set by the auth step), and `log`.
 *
 * `log` is a getter of the class, not one defined on each request's object: in V8 an accessor defined per object
 * (`Object.defineProperty(locals, 'log', { get })`, a new closure each time) kept every request's objects through
 * the young-generation collections, so that most of each request was promoted to the old generation: with a probe
 * answering right after this middleware under 50 concurrent requests, 3.9 MB promoted per scavenge against 0.4 MB
 * (docs/decisions/0180-requests-born-with-express-prototypes.md).
 */
class RequestLocals {
  auth?: AuthContext;
  // Private fields: nothing writing or spreading `res.locals` (Express's `res.render`) meets them.
  readonly #logger: Logger;
  #child?: Logger;
  #childAuth?: AuthContext;

  constructor(
    readonly requestId: string,
    logger: Logger,
  ) {
    this.#logger = logger;
  }

  /** A child logger bound to the request id (and the project once authenticated), made on first use. */
  get log(): Logger {
    // Made again once the request is authenticated, so that lines after that carry the project.
    if (!this.#child || this.#childAuth !== this.auth) {
      this.#childAuth = this.auth;
      this.#child = this.#logger.child(bindings(this.requestId, this.auth));
    }
    return this.#child;
  }
}

/** The fields every log line of a request carries. */
function bindings(requestId: string, auth: AuthContext | undefined): Record<string, string> {
  if (!auth) return { requestId };
  return { requestId, projectId: auth.projectId, ...(auth.mode === 'test' ? { keyMode: 'test' } : {}) };
}
