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
  KEY_SCOPE_FORBIDDEN: 'KEY_SCOPE_FORBIDDEN',
  KEY_DOMAIN_FORBIDDEN: 'KEY_DOMAIN_FORBIDDEN',
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
  // A send-only key on another route; a send-only key sending from a domain outside its list.
  KEY_SCOPE_FORBIDDEN: 403,
  KEY_DOMAIN_FORBIDDEN: 403,
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
 * closed", a stream that is not writeable, a command refused while offline). Read only on an error with no code
 * and no cause (the driver's own words, not a wrapper that quotes a statement and its parameters).
 */
const UNAVAILABLE_MESSAGE = /connection terminated|not queryable|Connection is closed|timeout exceeded when trying to connect|Stream isn't writeable|enableOfflineQueue|Connection ended/i;

/** Redis replies that mean "not now" (a replica promoted, a restart loading its data, a cluster resharding). */
const REDIS_NOT_NOW = /^(READONLY|LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN)\b/;

/** Errors that are always bugs in our code, whatever their message says. */
const PROGRAMMING_ERRORS = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);

/** A Postgres SQLSTATE that means the server or the connection is unavailable. */
function unavailableSqlState(code: string, message: string): boolean {
  return code.startsWith('08') || code.startsWith('57P') || code === '53300' || (code === '55000' && /not currently accepting connections/i.test(message));
}

/**
 * True when `err` (or anything in its `cause` chain) means a backing service, Postgres or Redis, is unreachable
 * or dropped the connection: the caller should answer 503 `SERVICE_UNAVAILABLE` or retry later, never treat it as
 * a bug or as the input's fault.
 *
 * - Socket errors (`ECONNREFUSED`, `ECONNRESET`, `ETIMEDOUT`, …), ioredis's `MaxRetriesPerRequestError`, and
 *   Redis replies `READONLY`, `LOADING`, `CLUSTERDOWN`, `TRYAGAIN`, `MASTERDOWN`.
 * - Otherwise a Postgres error (a five-character SQLSTATE anywhere in the chain) decides by its code alone: classes `08`
 *   (connection exception) and `57P` (`57P01` admin shutdown / `pg_terminate_backend`, `57P02` crash shutdown,
 *   `57P03` cannot connect now), `53300` (too many connections), and `55000` "database … is not currently
 *   accepting connections". Any other SQLSTATE is not unavailability, whatever its message quotes.
 * - Otherwise the innermost error's message, when it is a driver's error (not a `TypeError` and the like).
 */
export function isUnavailableError(err: unknown): boolean {
  const chain: Array<{ code?: unknown; name?: unknown; message?: unknown; cause?: unknown }> = [];
  for (let e: unknown = err; e && typeof e === 'object' && chain.length < 6; e = (e as { cause?: unknown }).cause) {
    chain.push(e);
  }
  for (const e of chain) {
    if (typeof e.code === 'string' && UNAVAILABLE_SOCKET_CODES.has(e.code)) return true;
    if (e.name === 'MaxRetriesPerRequestError') return true;
    if (typeof e.message === 'string' && REDIS_NOT_NOW.test(e.message)) return true;
  }
  const sqlState = chain.find((e) => typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code));
  if (sqlState) return unavailableSqlState(sqlState.code as string, typeof sqlState.message === 'string' ? sqlState.message : '');
  const root = chain[chain.length - 1];
  if (!root || typeof root.message !== 'string' || PROGRAMMING_ERRORS.has(String(root.name))) return false;
  return UNAVAILABLE_MESSAGE.test(root.message);
}
