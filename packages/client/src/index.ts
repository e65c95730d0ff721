/**
 * `@mailroom/client`: the typed client for the Mailroom API and its helpers (errors, pagination, idempotency
 * keys, retries).
 *
 * @module
 */
export {
  createMailroomClient,
  type MailroomClient,
  type MailroomClientOptions,
  type paths,
  type operations,
  type components,
} from './client';
export { MailroomError, isApiErrorBody, unwrap, type ApiErrorBody, type Envelope, type FieldError } from './errors';
export { paginate, type Page } from './pagination';
export { idempotencyKey, withIdempotencyKey } from './idempotency';
export { canRetry, parseRetryAfter, retryingFetch, type FetchFn, type RetryOptions } from './retry';
