/**
 * API keys: `sk_` (secret, every route) and `pk_` (public, `/v1/track` only), each the prefix plus 32 bytes of
 * randomness in base64url. Only the SHA-256 of a key is stored (docs/api/overview.md, authentication).
 *
 * Each kind comes in two modes: `live` (`sk_…`, `pk_…`) and `test` (`sk_test_…`, `pk_test_…`). A test key works
 * on every route its kind works on, but what it creates is test data: mail is built exactly as live and stored in
 * a sink instead of reaching SES.
 *
 * @module
 */
import { createHash, randomBytes } from 'node:crypto';

export type KeyKind = 'secret' | 'public';

/** `live` keys send through SES; `test` keys (`sk_test_…`, `pk_test_…`) deliver to the test sink. */
export type KeyMode = 'live' | 'test';

const PREFIX: Record<KeyKind, string> = { secret: 'sk_', public: 'pk_' };

/** What follows `sk_`/`pk_` in a test key. */
const TEST_MARK = 'test_';

/**
 * A new key of the given kind and mode: `sk_`/`pk_` (then `test_` for a test key) + 43 base64url characters
 * (32 random bytes). A live key never starts with `sk_test_`/`pk_test_` (drawn again in the 1-in-2^30 case), so
 * the prefix alone tells the mode.
 */
export function generateKey(kind: KeyKind, mode: KeyMode = 'live'): string {
  for (;;) {
    const random = randomBytes(32).toString('base64url');
    if (mode === 'test') return PREFIX[kind] + TEST_MARK + random;
    if (!random.startsWith(TEST_MARK)) return PREFIX[kind] + random;
  }
}

/** The mode a key's shape claims: `test` for `sk_test_…`/`pk_test_…`, else `live`. The database row decides. */
export function keyMode(key: string): KeyMode {
  return /^(sk|pk)_test_/.test(key) ? 'test' : 'live';
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

/** Characters of a live key kept in clear beside its hash (`key_prefix`): `sk_`/`pk_` and 7 more. */
export const KEY_PREFIX_LENGTH = 10;

/** Characters of a test key kept in clear: `sk_test_`/`pk_test_` and 7 more (as many random ones as a live key's). */
export const TEST_KEY_PREFIX_LENGTH = KEY_PREFIX_LENGTH + TEST_MARK.length;

/**
 * The visible prefix of a key, stored beside its hash and shown in key listings: the first
 * {@link KEY_PREFIX_LENGTH} characters of a live key, {@link TEST_KEY_PREFIX_LENGTH} of a test key (so both show
 * 7 random characters).
 */
export function keyPrefix(key: string): string {
  return key.slice(0, keyMode(key) === 'test' ? TEST_KEY_PREFIX_LENGTH : KEY_PREFIX_LENGTH);
}

/**
 * A reference to one stored key, in a form an operator who leaked it actually holds: the key itself (matched by
 * its SHA-256), its visible prefix ({@link keyPrefix}: as key listings show it) or the key's id (a UUID).
 */
export type KeyReference = { by: 'key'; key: string } | { by: 'prefix'; prefix: string } | { by: 'id'; id: string };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Reads what an operator gave to name a key (surrounding whitespace ignored).
 *
 * @returns `undefined` when `input` is neither a key, nor a key prefix (10 characters `sk_…`/`pk_…`, or 15
 *   characters `sk_test_…`/`pk_test_…`), nor a UUID.
 */
export function parseKeyReference(input: string): KeyReference | undefined {
  const value = input.trim();
  if (keyKind(value)) return { by: 'key', key: value };
  if (
    /^(sk|pk)_[A-Za-z0-9_-]+$/.test(value) &&
    (value.length === KEY_PREFIX_LENGTH || (keyMode(value) === 'test' && value.length === TEST_KEY_PREFIX_LENGTH))
  ) {
    return { by: 'prefix', prefix: value };
  }
  if (UUID.test(value)) return { by: 'id', id: value.toLowerCase() };
  return undefined;
}
