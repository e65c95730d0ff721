/**
 * The one error middleware: every failure leaves as the spec's standard error body
 * `{ success: false, error: { code, message, statusCode, retryable, requestId, errors?, suggestion? }, code, message, timestamp }`
 * (`code` and `message` are repeated at the top level for Plunk SDKs). Unexpected errors are logged with their
 * stack and answered as 500 `INTERNAL_ERROR` with no internals.
 *
 * @module
 */
import type { ErrorRequestHandler, RequestHandler, Response } from 'express';
import { AppError, ErrorCode, errorCode, isUnavailableError } from '@mailroom/platform/errors';

/** Sends the error body for `err`. */
export function sendError(res: Response, err: AppError): void {
  for (const [k, v] of Object.entries(err.options.headers ?? {})) res.setHeader(k, v);
  res.status(err.statusCode).json({
    success: false,
    error: {
      code: err.code,
      message: err.message,
      statusCode: err.statusCode,
      retryable: err.retryable,
      requestId: res.locals.requestId,
      ...(err.options.errors ? { errors: err.options.errors } : {}),
      ...(err.options.suggestion ? { suggestion: err.options.suggestion } : {}),
    },
    code: err.code,
    message: err.message,
    timestamp: new Date().toISOString(),
  });
}

/** zlib's codes for a stream it cannot decode (gzip/deflate: `Z_DATA_ERROR`, `Z_BUF_ERROR`…; brotli: `ERR__ERROR_FORMAT_…`). */
const UNDECODABLE = /^(Z_|ERR__ERROR_|ERR_BROTLI|ERR_ZSTD)/;

/**
 * A request body or path the body parsers or the router could not read: the client's fault, never a 500.
 * - an unknown `Content-Encoding` (or several stacked) or charset: 415 `UNSUPPORTED_MEDIA_TYPE` (RFC 9110 §15.5.16);
 * - a gzip, deflate or br body that does not decode: 400 `BAD_REQUEST` naming `Content-Encoding`;
 * - a path segment that is not valid percent-encoding: 400 `INVALID_PARAMETERS`;
 * - any other 4xx that body-parser raises (aborted upload, wrong `Content-Length`): 400 `BAD_REQUEST`.
 */
function bodyReadFailure(err: unknown): AppError | undefined {
  const e = err as {
    type?: string;
    code?: string;
    message?: string;
    status?: number;
    encoding?: string;
    charset?: string;
  };
  if (e.type === 'encoding.unsupported') {
    const message = `Content-Encoding "${e.encoding ?? ''}" is not supported; send identity, gzip, deflate or br`;
    return new AppError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, message, {
      errors: [
        {
          field: 'Content-Encoding',
          message: 'must be one of: identity, gzip, deflate, br',
          code: 'invalid_enum_value',
        },
      ],
    });
  }
  if (e.type === 'charset.unsupported') {
    return new AppError(ErrorCode.UNSUPPORTED_MEDIA_TYPE, `Unsupported charset "${e.charset ?? ''}"; send UTF-8`, {
      errors: [{ field: 'Content-Type', message: 'charset must be utf-8', code: 'invalid_enum_value' }],
    });
  }
  if (typeof e.code === 'string' && UNDECODABLE.test(e.code) && e.status === 400) {
    return new AppError(ErrorCode.BAD_REQUEST, 'Request body could not be decoded as its Content-Encoding says', {
      errors: [{ field: 'Content-Encoding', message: `body does not decode (${e.code})`, code: 'custom' }],
      suggestion: 'Compress the body with the encoding named in Content-Encoding, or send it uncompressed.',
    });
  }
  if (err instanceof URIError && e.status === 400) {
    return new AppError(ErrorCode.INVALID_PARAMETERS, 'A path parameter is not valid percent-encoding', {
      errors: [{ field: 'path', message: 'must be valid percent-encoded UTF-8', code: 'invalid_string' }],
    });
  }
  if (
    typeof e.type === 'string' &&
    e.type.startsWith('request.') &&
    e.status !== undefined &&
    e.status >= 400 &&
    e.status < 500
  ) {
    return new AppError(ErrorCode.BAD_REQUEST, 'The request body could not be read', {
      errors: [{ field: 'body', message: e.message ?? 'could not be read', code: 'custom' }],
    });
  }
  return undefined;
}

/** Maps what infrastructure throws onto public errors; `undefined` means unexpected. */
function classify(err: unknown): AppError | undefined {
  if (err instanceof AppError) return err;
  const e = err as { type?: string; code?: string; message?: string; name?: string; status?: number };
  // body-parser failures
  if (e.type === 'entity.parse.failed') {
    return new AppError(ErrorCode.INVALID_JSON, 'Malformed JSON in request body', {
      suggestion: 'Send a valid JSON document.',
    });
  }
  if (e.type === 'entity.too.large') return new AppError(ErrorCode.PAYLOAD_TOO_LARGE, 'Request body is too large');
  const unreadable = bodyReadFailure(err);
  if (unreadable) return unreadable;
  const code = errorCode(err);
  if (code === '23505') return new AppError(ErrorCode.CONFLICT, 'The resource already exists');
  if (isUnavailableError(err)) {
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
