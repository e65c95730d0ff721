/**
 * Idempotency keys: the `Idempotency-Key` header that makes a retried POST safe.
 *
 * The API replays the first response to a key for 24 h (`Idempotent-Replayed: true`); the same key with a
 * different body is 422 `IDEMPOTENCY_CONFLICT`. Operations that honour the header declare it as a parameter, so
 * `params.header` type-checks only on them.
 *
 * @module
 */

/** A fresh key: a random UUID (RFC 9562 version 4) from the runtime's Web Crypto (Node 20+, Deno, Bun, browsers). */
export function idempotencyKey(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * The header object to pass as `params.header` of an operation that honours idempotency keys.
 *
 * @param key - reuse the same key when the caller itself retries the same logical request (a job retried after a
 *   crash); a fresh one by default.
 * @example
 * await client.POST('/v1/send', { params: { header: withIdempotencyKey() }, body: { to, subject, body } });
 */
export function withIdempotencyKey(key: string = idempotencyKey()): { 'Idempotency-Key': string } {
  return { 'Idempotency-Key': key };
}
