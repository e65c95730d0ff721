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

/** Characters of a key kept in clear beside its hash (`key_prefix`): `sk_`/`pk_` and 7 more. */
export const KEY_PREFIX_LENGTH = 10;

/**
 * A reference to one stored key, in a form an operator who leaked it actually holds: the key itself (matched by
 * its SHA-256), its visible prefix (the first {@link KEY_PREFIX_LENGTH} characters, as key listings show it) or
 * the key's id (a UUID).
 */
export type KeyReference = { by: 'key'; key: string } | { by: 'prefix'; prefix: string } | { by: 'id'; id: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Reads what an operator gave to name a key (surrounding whitespace ignored).
 *
 * @returns `undefined` when `input` is neither a key, nor a 10-character `sk_`/`pk_` prefix, nor a UUID.
 */
export function parseKeyReference(input: string): KeyReference | undefined {
  const value = input.trim();
  if (keyKind(value)) return { by: 'key', key: value };
  if (/^(sk|pk)_[A-Za-z0-9_-]+$/.test(value) && value.length === KEY_PREFIX_LENGTH) return { by: 'prefix', prefix: value };
  if (UUID.test(value)) return { by: 'id', id: value.toLowerCase() };
  return undefined;
}
