/**
 * API keys: `sk_` (secret, every route) and `pk_` (public, `/v1/track` only), each the prefix plus 32 bytes of
 * randomness in base64url. Only the SHA-256 of a key is stored (API.md, Authentication).
 *
 * @module
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export type KeyKind = 'secret' | 'public';

const PREFIX: Record<KeyKind, string> = { secret: 'sk_', public: 'pk_' };

/** A new key of the given kind: `sk_` or `pk_` + 43 base64url characters (32 random bytes). */
export function generateKey(kind: KeyKind): string {
  return PREFIX[kind] + randomBytes(32).toString('base64url');
}

/** The kind a key claims by its prefix, or `undefined` for anything that is not shaped like one of our keys. */
export function keyKind(key: string): KeyKind | undefined {
  if (!/^(sk|pk)_[A-Za-z0-9_-]{32,128}$/.test(key)) return undefined;
  return key.startsWith('sk_') ? 'secret' : 'public';
}

/** SHA-256 of a key, hex: what the database stores and looks up. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** Constant-time comparison of two secrets (e.g. the admin token). */
export function safeEqual(a: string, b: string): boolean {
  const ha = createHash('sha256').update(a).digest();
  const hb = createHash('sha256').update(b).digest();
  return timingSafeEqual(ha, hb);
}
