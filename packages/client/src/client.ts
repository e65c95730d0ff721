/**
 * The typed client: openapi-fetch over the types openapi-typescript generated from the API's OpenAPI document
 * (`generated/schema.d.ts`), so every path, parameter, body and response is checked by the compiler.
 *
 * Runs wherever `fetch`, `Request` and Web Crypto are global: Node 20+, Deno, Bun, browsers. In a browser use only
 * a public key (`pk_…`, accepted by `POST /v1/track` alone): a secret key there is readable by anyone.
 *
 * @module
 */
import createClient, { type Client } from 'openapi-fetch';
import type { paths } from '../generated/schema';
import { retryingFetch, type FetchFn, type RetryOptions } from './retry';

/** Every operation of the API, by path and method (generated). */
export type { paths, operations, components } from '../generated/schema';

/** How to reach the API. */
export interface MailroomClientOptions {
  /** A project key: `sk_…` (every route) or `pk_…` (`POST /v1/track` only); sent as `Authorization: Bearer`. */
  apiKey: string;
  /** Where the API is served, e.g. `https://mail.example.com` (no trailing path). */
  baseUrl: string;
  /** Retry settings ({@link RetryOptions}), or `false` for none. Default: 3 attempts. */
  retry?: RetryOptions | false;
  /** The `fetch` to send with (default `globalThis.fetch`): a test double, a proxy agent, a timeout wrapper. */
  fetch?: FetchFn;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
}

/** The client: `GET`, `POST`, `PUT`, `PATCH`, `DELETE`, each typed by path (openapi-fetch `Client`). */
export type MailroomClient = Client<paths>;

/** `url` without its trailing slashes (a scan from the end: a `/\/+$/` regex is quadratic on a run of slashes). */
function withoutTrailingSlashes(url: string): string {
  let end = url.length;
  while (end > 0 && url[end - 1] === '/') end--;
  return url.slice(0, end);
}

/**
 * Creates a client. Each call answers `{ data, error, response }`: `data` is the success envelope
 * (`{ success: true, data }`), `error` the error body (`code`, `message`, `errors[]`, `retryable`); it never throws
 * for an HTTP error status (use `unwrap` for that), only when the network fails after the retries.
 *
 * @example
 * const mailroom = createMailroomClient({ apiKey: process.env.MAILROOM_API_KEY!, baseUrl: 'https://mail.example.com' });
 * const { data, error } = await mailroom.GET('/emails/{id}', { params: { path: { id } } });
 */
export function createMailroomClient(options: MailroomClientOptions): MailroomClient {
  // Called through an arrow: a browser's fetch refuses to run with another `this`.
  const base: FetchFn = options.fetch ?? ((request) => globalThis.fetch(request));
  return createClient<paths>({
    baseUrl: withoutTrailingSlashes(options.baseUrl),
    fetch: options.retry === false ? base : retryingFetch(base, options.retry),
    headers: { ...options.headers, Authorization: `Bearer ${options.apiKey}` },
  });
}
