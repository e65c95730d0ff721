/**
 * The one home of API errors: machine-readable codes, their HTTP statuses, and {@link AppError}.
 *
 * Error bodies follow the service specification's standard form (see `shared/API.md`):
 * `{ success: false, error: { code, message, statusCode, requestId, errors?, suggestion? }, timestamp }`.
 *
 * @module
 */

/** Machine-readable error codes; values are part of the public API and never renamed. */
export const ErrorCode = {
  BAD_REQUEST: 'BAD_REQUEST',
  INVALID_JSON: 'INVALID_JSON',
  INVALID_PARAMETERS: 'INVALID_PARAMETERS',
  UNAUTHORIZED: 'UNAUTHORIZED',
  FORBIDDEN: 'FORBIDDEN',
  PUBLIC_KEY_NOT_ALLOWED: 'PUBLIC_KEY_NOT_ALLOWED',
  PROJECT_DISABLED: 'PROJECT_DISABLED',
  NOT_FOUND: 'NOT_FOUND',
  CONFLICT: 'CONFLICT',
  INVALID_STATE: 'INVALID_STATE',
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  RATE_LIMITED: 'RATE_LIMITED',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** HTTP status of each code. */
export const errorStatus: Record<ErrorCode, number> = {
  BAD_REQUEST: 400,
  INVALID_JSON: 400,
  INVALID_PARAMETERS: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  PUBLIC_KEY_NOT_ALLOWED: 403,
  PROJECT_DISABLED: 403,
  NOT_FOUND: 404,
  CONFLICT: 409,
  INVALID_STATE: 409,
  // IETF draft-ietf-httpapi-idempotency-key-header §2.7: a key reused with another payload is 422.
  IDEMPOTENCY_CONFLICT: 422,
  PAYLOAD_TOO_LARGE: 413,
  // RFC 9110 §15.5.16: a Content-Encoding (or charset) the server cannot decode.
  UNSUPPORTED_MEDIA_TYPE: 415,
  VALIDATION_ERROR: 422,
  RATE_LIMITED: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
};

/** Field-level codes of `errors[]` items (the spec's example is `invalid_string`). */
export type FieldErrorCode =
  | 'invalid_type'
  | 'invalid_string'
  | 'invalid_enum_value'
  | 'too_small'
  | 'too_big'
  | 'unrecognized_keys'
  | 'custom';

/** One item of `error.errors`: `field` is a dotted path such as `to.0.email`. */
export interface FieldError {
  field: string;
  message: string;
  code: FieldErrorCode;
}

/** An expected failure with its public code; anything else thrown becomes a 500 `INTERNAL_ERROR`. */
export class AppError extends Error {
  readonly statusCode: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: { errors?: FieldError[]; suggestion?: string; headers?: Record<string, string> } = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.statusCode = errorStatus[code];
  }
}

/** 422 `VALIDATION_ERROR` for one or more fields. */
export function validationError(errors: FieldError[], message?: string): AppError {
  const first = errors[0];
  return new AppError(
    ErrorCode.VALIDATION_ERROR,
    message ?? (errors.length === 1 && first ? `${first.field}: ${first.message}` : 'Request validation failed'),
    { errors, suggestion: 'Correct the fields listed in error.errors and retry.' },
  );
}

/** 404 that never reveals whether the id exists in another project. */
export function notFound(resource: string): AppError {
  return new AppError(ErrorCode.NOT_FOUND, `${resource} not found`);
}

/**
 * The driver error code (`23505`, `ECONNREFUSED`, …) of an error or of its `cause` chain: query builders such as
 * Drizzle wrap the driver's error in their own.
 */
export function errorCode(err: unknown): string | undefined {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

/**
 * The message of the innermost `cause` of an error: the driver's own words ("canceling statement due to lock
 * timeout") rather than a query builder's wrapper, which repeats the whole statement and its parameters.
 */
export function rootMessage(err: unknown): string {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && e && typeof e === 'object' && (e as { cause?: unknown }).cause; depth++) {
    e = (e as { cause: unknown }).cause;
  }
  return e instanceof Error ? e.message : String(e);
}

/** Socket-level failures of a connection to Postgres or Redis. */
const UNAVAILABLE_SOCKET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EHOSTUNREACH', 'ENETUNREACH', 'EAI_AGAIN']);

/**
 * What the drivers say when a connection died or could not be had: pg ("Connection terminated unexpectedly",
 * "Client has encountered a connection error and is not queryable", pool timeouts) and ioredis ("Connection is
 * closed", `MaxRetriesPerRequestError`, a stream that is not writeable, a command refused while offline).
 */
const UNAVAILABLE_MESSAGE = /connection terminated|not currently accepting connections|not queryable|Connection is closed|timeout exceeded when trying to connect|Stream isn't writeable|enableOfflineQueue|Connection ended|the database system is (starting up|shutting down|in recovery)|terminating connection/i;

/**
 * True when `err` (or anything in its `cause` chain) means a backing service, Postgres or Redis, is unreachable
 * or dropped the connection: the caller should answer 503 `SERVICE_UNAVAILABLE` or retry later, never treat it as
 * a bug or as the input's fault.
 *
 * Postgres SQLSTATE classes 08 (connection exception) and 57P (operator intervention: `57P01`
 * admin shutdown / `pg_terminate_backend`, `57P02` crash shutdown, `57P03` cannot connect now) and `53300`
 * (too many connections) count, as do socket errors and the drivers' own messages for a dead connection.
 */
export function isUnavailableError(err: unknown): boolean {
  let e: unknown = err;
  for (let depth = 0; depth < 6 && e && typeof e === 'object'; depth++) {
    const { code, name, message } = e as { code?: unknown; name?: unknown; message?: unknown };
    if (typeof code === 'string') {
      if (UNAVAILABLE_SOCKET_CODES.has(code) || code.startsWith('08') || code.startsWith('57P') || code === '53300') return true;
    }
    if (name === 'MaxRetriesPerRequestError') return true;
    if (typeof message === 'string' && UNAVAILABLE_MESSAGE.test(message)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
