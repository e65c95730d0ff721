/**
 * Bearer tokens of the operator endpoints (RFC 6750 §2.1 `Authorization: Bearer <token>`): the one parser and the
 * one constant-time check shared by the API (`/admin/*`, `/metrics`, the queue dashboard) and the worker's
 * health port (`/metrics` behind `METRICS_TOKEN`).
 *
 * @module
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** Constant-time comparison of two secrets (e.g. the admin token). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}

/**
 * The token of an `Authorization: Bearer <token>` header (scheme matched case-insensitively, RFC 6750 §2.1), or
 * undefined when the header is absent or of another shape.
 */
export function bearerToken(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1];
}

/**
 * Whether `given` equals one of the configured `tokens` (unset ones skipped), compared in constant time each
 * (see `safeEqual`), so the answer's timing tells nothing about how close a guess was.
 */
export function matchesToken(given: string | undefined, tokens: readonly (string | undefined)[]): boolean {
  if (!given) return false;
  let ok = false;
  // Every configured token is compared, whichever matches: the time does not say which one did.
  for (const token of tokens) if (token !== undefined && safeEqual(given, token)) ok = true;
  return ok;
}
