/**
 * The API's error body as a typed value, and the error the helpers throw.
 *
 * @module
 */
import type { components } from '../generated/schema';

/**
 * Every error body of the API (`{ success: false, error: {...}, code, message, timestamp }`), as its OpenAPI
 * `Error` schema says, plus `error.retryable`: whether the same request may succeed later (absent from older
 * servers; the client then decides from the status).
 */
export type ApiErrorBody = components['schemas']['Error'] & { error: { retryable?: boolean } };

/** One entry of `error.errors` (422 VALIDATION_ERROR, 400 INVALID_PARAMETERS): the field as a dotted path. */
export type FieldError = NonNullable<ApiErrorBody['error']['errors']>[number];

/** Whether `value` has the shape of the API's error body (a proxy in front of the API may answer something else). */
export function isApiErrorBody(value: unknown): value is ApiErrorBody {
  if (typeof value !== 'object' || value === null) return false;
  const error = (value as { error?: unknown }).error;
  return typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'string';
}

/**
 * A failed API call: the HTTP status and, when the body is the API's error body, its `code`, `message`,
 * `requestId`, field errors and `retryable` flag.
 */
export class MailroomError extends Error {
  override readonly name = 'MailroomError';
  /** HTTP status (e.g. 422). */
  readonly status: number;
  /** Machine-readable code (`VALIDATION_ERROR`, `NOT_FOUND`, …); `HTTP_<status>` when the body was not the API's. */
  readonly code: string;
  /** The request id (`X-Request-Id`), to quote when reporting a problem. */
  readonly requestId: string | undefined;
  /** The fields that failed validation, each `{ field, message, code }`. */
  readonly errors: FieldError[];
  /** Whether the same request may succeed later (the body's `retryable`, else 429/503 and network-level failures). */
  readonly retryable: boolean;
  /** What to do about it, when the API says. */
  readonly suggestion: string | undefined;
  /** The parsed error body, or the raw value when it was not the API's. */
  readonly body: unknown;

  constructor(status: number, body: unknown) {
    const api = isApiErrorBody(body) ? body.error : undefined;
    super(api?.message ?? `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.code = api?.code ?? `HTTP_${status}`;
    this.requestId = api?.requestId;
    this.errors = api?.errors ?? [];
    this.retryable = api?.retryable ?? (status === 429 || status === 503);
    this.suggestion = api?.suggestion;
  }
}

/** The success envelope every JSON operation answers: `{ success: true, data }`. */
export interface Envelope<T> {
  success: true;
  data: T;
}

/**
 * The `data` of a successful call, or throws.
 *
 * @param result - what an operation of the client returned (`{ data, error, response }`).
 * @returns the envelope's `data`.
 * @throws {@link MailroomError} when the call answered an error status.
 */
export function unwrap<T>(result: { data?: Envelope<T>; error?: unknown; response: Response }): T {
  if (result.data !== undefined && result.response.ok) return result.data.data;
  throw new MailroomError(result.response.status, result.error);
}
