/**
 * The one home of API errors: machine-readable codes, their HTTP statuses and retryability ({@link errorCatalog}),
 * and {@link AppError}.
 *
 * Error bodies follow the service specification's standard form:
 * `{ success: false, error: { code, message, statusCode, retryable, requestId, errors?, suggestion? }, timestamp }`.
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
  EXPIRED: 'EXPIRED',
  IDEMPOTENCY_CONFLICT: 'IDEMPOTENCY_CONFLICT',
  PAYLOAD_TOO_LARGE: 'PAYLOAD_TOO_LARGE',
  UNSUPPORTED_MEDIA_TYPE: 'UNSUPPORTED_MEDIA_TYPE',
  VALIDATION_ERROR: 'VALIDATION_ERROR',
  RATE_LIMITED: 'RATE_LIMITED',
  INTERNAL_ERROR: 'INTERNAL_ERROR',
  SERVICE_UNAVAILABLE: 'SERVICE_UNAVAILABLE',
} as const;
export type ErrorCode = (typeof ErrorCode)[keyof typeof ErrorCode];

/** What the catalog says of one code: its HTTP status, whether retrying can succeed, and what a client should do. */
export interface ErrorCodeInfo {
  /** HTTP status of every response with this code. */
  readonly status: number;
  /**
   * Whether the same request may succeed if sent again unchanged (after `Retry-After` when the response has one):
   * sent as `error.retryable` in every error body. A single error may say otherwise (see {@link AppError}).
   */
  readonly retryable: boolean;
  /** When the API answers with it (one sentence, for the error reference). */
  readonly meaning: string;
  /** What a client should do about it (one sentence, for the error reference). */
  readonly action: string;
}

/**
 * The one code → {status, retryable} map, with each code's meaning and the client's action (the error reference,
 * docs/api/errors.md, is generated from it by `npm run docs:generate`). Retryable: only failures that are about the
 * moment, not the request (a limit, a dependency, our own bug); a request the API refused for what it says fails the
 * same way again.
 */
export const errorCatalog: Readonly<Record<ErrorCode, ErrorCodeInfo>> = {
  BAD_REQUEST: {
    status: 400,
    retryable: false,
    meaning:
      'The request could not be read: a body that is not JSON (or not declared as such), an undecodable Content-Encoding, an unreadable upload.',
    action:
      'Fix the request (Content-Type: application/json, a body that matches its Content-Encoding) before sending it again.',
  },
  INVALID_JSON: {
    status: 400,
    retryable: false,
    meaning: 'The body is not well-formed JSON.',
    action: 'Send a valid JSON document.',
  },
  INVALID_PARAMETERS: {
    status: 400,
    retryable: false,
    meaning:
      'A query or path parameter is malformed (not a number, not an id, an unknown cursor, a page too deep); `error.errors` names it.',
    action: 'Correct the parameter named in `error.errors`.',
  },
  UNAUTHORIZED: {
    status: 401,
    retryable: false,
    meaning: 'No API key (or admin token), or one that is malformed, unknown, expired or revoked.',
    action: 'Send `Authorization: Bearer <key>` with a current key; rotate or re-issue the key if it was revoked.',
  },
  FORBIDDEN: {
    status: 403,
    retryable: false,
    meaning:
      'The caller may not do this: the admin API is disabled (no ADMIN_TOKEN), a test key on a live resource, a signature that does not verify.',
    action: 'Use a credential that is allowed to do it; do not retry with the same one.',
  },
  PUBLIC_KEY_NOT_ALLOWED: {
    status: 403,
    retryable: false,
    meaning: 'A public key (pk_) on a route that needs a secret key (sk_).',
    action: 'Call this route with a secret key from a server, never from a browser.',
  },
  PROJECT_DISABLED: {
    status: 403,
    retryable: false,
    meaning: "The key's project is disabled by the operator.",
    action: 'Ask the operator to enable the project (`npm run cli -- project enable`).',
  },
  KEY_SCOPE_FORBIDDEN: {
    status: 403,
    retryable: false,
    meaning: 'A send-only key (scope `sending`) used outside `POST /v1/send` and the SMTP relay.',
    action: 'Use a full-access secret key for this route, or only send with this key.',
  },
  KEY_DOMAIN_FORBIDDEN: {
    status: 403,
    retryable: false,
    meaning: "The sender's domain is not one of the domains the send-only key is restricted to (the message names it).",
    action: "Send from one of the key's domains, or use a key allowed to send from this one.",
  },
  NOT_FOUND: {
    status: 404,
    retryable: false,
    meaning: 'No such route, or no such id in this project (ids of other projects are not found either).',
    action: 'Check the id and the key: the resource belongs to the project of the key.',
  },
  CONFLICT: {
    status: 409,
    retryable: false,
    meaning:
      'The resource already exists (a unique name, a domain another project owns), or a request with the same Idempotency-Key is still running (that one says `retryable: true`).',
    action:
      'For an existing resource, read or update it instead; when `retryable` is true, retry the same request after a second.',
  },
  INVALID_STATE: {
    status: 409,
    retryable: false,
    meaning:
      "The resource's state does not allow the action (sending a campaign that already sent, starting a disabled workflow, cancelling an email already sent).",
    action: 'Read the resource, then act on its current state.',
  },
  EXPIRED: {
    status: 410,
    retryable: false,
    meaning:
      'A signed link that is no longer valid: a double opt-in confirmation older than DOUBLE_OPT_IN_EXPIRY_HOURS.',
    action: 'Start again: a new POST /contacts with doubleOptIn sends a new link.',
  },
  IDEMPOTENCY_CONFLICT: {
    status: 422,
    retryable: false,
    meaning: 'An Idempotency-Key was reused with a different request (draft-ietf-httpapi-idempotency-key-header).',
    action: 'Use a new key for a new request; resend the exact original request to get its stored response.',
  },
  PAYLOAD_TOO_LARGE: {
    status: 413,
    retryable: false,
    meaning: 'The body is larger than the route accepts (100 kB for most JSON bodies; IMPORT_MAX_BYTES for imports).',
    action: 'Send less per request (split a batch, attach smaller files).',
  },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    retryable: false,
    meaning:
      'A Content-Encoding other than identity, gzip, deflate or br, or a charset other than UTF-8 (RFC 9110 §15.5.16).',
    action: 'Send UTF-8 JSON, uncompressed or with gzip, deflate or br.',
  },
  VALIDATION_ERROR: {
    status: 422,
    retryable: false,
    meaning:
      'The body (or a setting) breaks a rule; `error.errors` lists each field with its rule (`{field, message, code}`).',
    action: 'Correct every field listed in `error.errors`; nothing was changed.',
  },
  RATE_LIMITED: {
    status: 429,
    retryable: true,
    meaning:
      "Over the project's requests per minute (RATE_LIMIT_PER_MINUTE) or over a per-IP failure limit; `Retry-After` says when.",
    action: 'Wait `Retry-After` seconds (RateLimit-Reset on other responses shows the window), then retry; slow down.',
  },
  INTERNAL_ERROR: {
    status: 500,
    retryable: true,
    meaning: 'An unexpected error in the API; it is logged with the request id.',
    action:
      'Retry with exponential backoff, with an Idempotency-Key on writes so a retry never acts twice; report the requestId if it persists.',
  },
  SERVICE_UNAVAILABLE: {
    status: 503,
    retryable: true,
    meaning:
      'A backing service (Postgres or Redis) is unreachable; nothing was changed, or the change was kept and its work resumes.',
    action: 'Wait `Retry-After` seconds, then retry (with the same Idempotency-Key on writes).',
  },
};

/** HTTP status of each code (from {@link errorCatalog}). */
export const errorStatus: Readonly<Record<ErrorCode, number>> = Object.fromEntries(
  Object.entries(errorCatalog).map(([code, info]) => [code, info.status]),
) as Record<ErrorCode, number>;

/** Field-level codes of `errors[]` items (the spec's example is `invalid_string`). */
export type FieldErrorCode =
  'invalid_type' | 'invalid_string' | 'invalid_enum_value' | 'too_small' | 'too_big' | 'unrecognized_keys' | 'custom';

/** One item of `error.errors`: `field` is a dotted path such as `to.0.email`. */
export interface FieldError {
  field: string;
  message: string;
  code: FieldErrorCode;
}

/**
 * An expected failure with its public code; anything else thrown becomes a 500 `INTERNAL_ERROR`. Its status and
 * `retryable` come from {@link errorCatalog}; `options.retryable` overrides the latter for one error whose code
 * covers both kinds (a 409 `CONFLICT` for a request still in progress is retryable, an existing resource is not).
 */
export class AppError extends Error {
  readonly statusCode: number;
  readonly retryable: boolean;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly options: {
      errors?: FieldError[];
      suggestion?: string;
      headers?: Record<string, string>;
      retryable?: boolean;
    } = {},
  ) {
    super(message);
    this.name = 'AppError';
    this.statusCode = errorCatalog[code].status;
    this.retryable = options.retryable ?? errorCatalog[code].retryable;
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

/** The message of a thrown value: an `Error`'s `message`, anything else as a string. */
export function errorMessage(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
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
const UNAVAILABLE_SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EAI_AGAIN',
]);

/**
 * What the drivers say when a connection died or could not be had: pg ("Connection terminated unexpectedly",
 * "Client has encountered a connection error and is not queryable", pool timeouts) and ioredis ("Connection is
 * closed", a stream that is not writeable, a command refused while offline). Read only on an error with no code
 * and no cause (the driver's own words, not a wrapper that quotes a statement and its parameters).
 */
const UNAVAILABLE_MESSAGE =
  /connection terminated|not queryable|Connection is closed|timeout exceeded when trying to connect|Stream isn't writeable|enableOfflineQueue|Connection ended/i;

/** Redis replies that mean "not now" (a replica promoted, a restart loading its data, a cluster resharding). */
const REDIS_NOT_NOW = /^(READONLY|LOADING|CLUSTERDOWN|TRYAGAIN|MASTERDOWN)\b/;

/** Errors that are always bugs in our code, whatever their message says. */
const PROGRAMMING_ERRORS = new Set(['TypeError', 'RangeError', 'ReferenceError', 'SyntaxError']);

/** A Postgres SQLSTATE that means the server or the connection is unavailable. */
function unavailableSqlState(code: string, message: string): boolean {
  return (
    code.startsWith('08') ||
    code.startsWith('57P') ||
    code === '53300' ||
    (code === '55000' && /not currently accepting connections/i.test(message))
  );
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
  if (sqlState)
    return unavailableSqlState(sqlState.code as string, typeof sqlState.message === 'string' ? sqlState.message : '');
  const root = chain[chain.length - 1];
  if (!root || typeof root.message !== 'string' || PROGRAMMING_ERRORS.has(String(root.name))) return false;
  return UNAVAILABLE_MESSAGE.test(root.message);
}
