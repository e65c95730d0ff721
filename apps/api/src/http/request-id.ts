import type { RequestHandler } from 'express';
import { randomUUID } from 'node:crypto';
import type { Logger } from '@mailroom/platform/logger';

const INBOUND_ID = /^[\w.:-]{8,128}$/;

/**
 * Gives every request an id (the caller's `X-Request-Id` when well-formed, else a new UUID), echoes it as
 * `X-Request-Id`, and binds a child logger carrying it, plus one access-log line per response.
 */
export function requestId(logger: Logger): RequestHandler {
  return (req, res, next) => {
    const inbound = req.get('x-request-id');
    const id = inbound && INBOUND_ID.test(inbound) ? inbound : randomUUID();
    res.locals.requestId = id;
    res.locals.log = logger.child({ requestId: id });
    res.setHeader('X-Request-Id', id);
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      res.locals.log.info(
        { method: req.method, path: req.path, status: res.statusCode, ms: Math.round(ms * 10) / 10, projectId: res.locals.auth?.projectId },
        'request',
      );
    });
    next();
  };
}
