/**
 * Retries of retryable failures, as a `fetch` wrapper the client sends every request through.
 *
 * What is retried:
 * - 429 and 503, unless the error body says `retryable: false`; any other 5xx only when its body says
 *   `retryable: true`; network failures (fetch rejecting);
 * - only requests that are safe to repeat: idempotent methods (GET, HEAD, OPTIONS, PUT, DELETE; RFC 9110 §9.2.2),
 *   or any request carrying an `Idempotency-Key` header. A POST or PATCH without one is never retried.
 *
 * How long it waits: the response's `Retry-After` (delay-seconds or HTTP-date, RFC 9110 §10.2.3) plus up to one
 * base delay of jitter; without it, exponential backoff with full jitter (a random wait between 0 and
 * `baseDelayMs · 2^(attempt-1)`, capped at `maxDelayMs`). A `Retry-After` longer than `maxDelayMs` is not waited
 * for: the response is returned as it is.
 *
 * @module
 */
import { isApiErrorBody } from './errors';

/** Retry settings; every field has a default. */
export interface RetryOptions {
  /** Attempts in all, the first included (default 3; 1 disables retries). */
  maxAttempts?: number;
  /** Base of the exponential backoff, in milliseconds (default 500). */
  baseDelayMs?: number;
  /** Longest single wait, in milliseconds (default 30 000). */
  maxDelayMs?: number;
  /** Waits `ms` milliseconds, or rejects when `signal` aborts (default: a timer). Injectable for tests. */
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A number in [0, 1) for the jitter (default `Math.random`). */
  random?: () => number;
}

/** A `fetch` taking a prepared `Request`, as openapi-fetch calls it. */
export type FetchFn = (request: Request) => Promise<Response>;

/** RFC 9110 §9.2.2: methods whose repetition has the same effect as one request. */
const IDEMPOTENT_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** Whether `request` may be sent again: an idempotent method, or an `Idempotency-Key` the server deduplicates on. */
export function canRetry(request: Request): boolean {
  return IDEMPOTENT_METHODS.has(request.method.toUpperCase()) || request.headers.has('Idempotency-Key');
}

/**
 * A `Retry-After` value in milliseconds from `now`, or undefined when absent or unreadable.
 *
 * @param value - delay-seconds (`"120"`) or an HTTP-date (`"Wed, 21 Oct 2015 07:28:00 GMT"`), RFC 9110 §10.2.3.
 * @param now - the current time in milliseconds since the epoch.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | undefined {
  if (value === null) return undefined;
  const text = value.trim();
  if (/^\d+$/.test(text)) return Number(text) * 1000;
  const date = Date.parse(text);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** Whether an answer is worth repeating: its body's `retryable` when it says, else 429 and 503. */
async function isRetryable(response: Response): Promise<boolean> {
  if (response.status !== 429 && response.status < 500) return false;
  let flag: boolean | undefined;
  if ((response.headers.get('Content-Type') ?? '').includes('json')) {
    try {
      const body: unknown = await response.clone().json();
      flag = isApiErrorBody(body) ? body.error.retryable : undefined;
    } catch {
      // Not JSON after all (a proxy's page): the status decides.
    }
  }
  return flag ?? (response.status === 429 || response.status === 503);
}

function timerSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Wraps `fetch` so that retryable failures of repeatable requests are sent again (see the module comment).
 *
 * @returns a fetch that resolves with the last response (a non-retryable or final one) and rejects with the last
 *   network error once the attempts are used up.
 */
export function retryingFetch(fetch: FetchFn, options: RetryOptions = {}): FetchFn {
  const maxAttempts = Math.max(1, options.maxAttempts ?? 3);
  const baseDelayMs = options.baseDelayMs ?? 500;
  const maxDelayMs = options.maxDelayMs ?? 30_000;
  const sleep = options.sleep ?? timerSleep;
  const random = options.random ?? Math.random;
  const backoff = (attempt: number) => random() * Math.min(maxDelayMs, baseDelayMs * 2 ** (attempt - 1));

  return async (request) => {
    if (maxAttempts === 1 || !canRetry(request)) return fetch(request);
    for (let attempt = 1; ; attempt++) {
      const last = attempt === maxAttempts;
      // A body can be read once: every attempt but the last sends a copy.
      const sent = last ? request : request.clone();
      let response: Response;
      try {
        response = await fetch(sent);
      } catch (err) {
        if (last || request.signal.aborted) throw err;
        await sleep(backoff(attempt), request.signal);
        continue;
      }
      if (last || !(await isRetryable(response))) return response;
      const after = parseRetryAfter(response.headers.get('Retry-After'));
      const delay = after === undefined ? backoff(attempt) : after + random() * baseDelayMs;
      if (delay > maxDelayMs) return response;
      await response.body?.cancel();
      await sleep(delay, request.signal);
    }
  };
}
