/**
 * The one error middleware: every failure leaves as the spec's standard error body
 * `{ success: false, error: { code, message, statusCode, requestId, errors?, suggestion? }, code, message, timestamp }`
 * (`code` and `message` are repeated at the top level for Plunk SDKs). Unexpected errors are logged with their
 * stack and answered as 500 `INTERNAL_ERROR` with no internals.
 *
 * @module
 */
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { AppError, ErrorCode, errorCode } from '@mailroom/core';

/** Sends the error body for `err`. */
export function sendError(res: Response, err: AppError): void {
  for (const [k, v] of Object.entries(err.options.headers ?? {})) res.setHeader(k, v);
  res.status(err.statusCode).json({
    success: false,
    error: {
      code: err.code,
      message: err.message,
      statusCode: err.statusCode,
      requestId: res.locals.requestId,
      ...(err.options.errors ? { errors: err.options.errors } : {}),
      ...(err.options.suggestion ? { suggestion: err.options.suggestion } : {}),
    },
    code: err.code,
    message: err.message,
    timestamp: new Date().toISOString(),
  });
}

const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', '57P01', '57P03', '08006', '08001', '08003']);

/** Maps what infrastructure throws onto public errors; `undefined` means unexpected. */
function classify(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  const e = err as { type?: string; code?: string; message?: string; name?: string; status?: number };
  // body-parser failures
  if (e.type === 'entity.parse.failed') {
    return new AppError(ErrorCode.INVALID_JSON, 'Malformed JSON in request body', { suggestion: 'Send a valid JSON document.' });
  }
  if (e.type === 'entity.too.large') return new AppError(ErrorCode.PAYLOAD_TOO_LARGE, 'Request body is too large');
  if (e.type === 'encoding.unsupported' || e.type === 'charset.unsupported') {
    return new AppError(ErrorCode.BAD_REQUEST, 'Unsupported request body encoding');
  }
  const code = errorCode(err);
  if (code === '23505') return new AppError(ErrorCode.CONFLICT, 'The resource already exists');
  if ((code && UNAVAILABLE_CODES.has(code)) || e.name === 'MaxRetriesPerRequestError' ||
      /Connection is closed|connection terminated|timeout exceeded when trying to connect|Stream isn't writeable/i.test(e.message ?? '')) {
    return new AppError(ErrorCode.SERVICE_UNAVAILABLE, 'A backing service is unavailable; retry shortly', {
      headers: { 'Retry-After': '5' },
    });
  }
  return undefined;
}

/** Express error middleware (registered last). */
export const errorHandler: ErrorRequestHandler = (err, _req, res, _next) => {
  const known = classify(err);
  if (known) {
    if (known.statusCode >= 500) res.locals.log?.error({ err }, 'request failed: backing service');
    sendError(res, known);
    return;
  }
  res.locals.log?.error({ err }, 'unexpected error');
  sendError(res, new AppError(ErrorCode.INTERNAL_ERROR, 'Internal server error'));
};

/** 404 for unknown routes. */
export const notFoundHandler: RequestHandler = (req, res) => {
  sendError(res, new AppError(ErrorCode.NOT_FOUND, `No route for ${req.method} ${req.path}`));
};

