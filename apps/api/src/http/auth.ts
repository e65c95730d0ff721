/**
 * API-key authentication (spec "Authentication"; API.md): `Authorization: Bearer sk_…|pk_…`.
 *
 * - missing, malformed or unknown key → 401 `UNAUTHORIZED`;
 * - a public key on a secret-key route → 403 `PUBLIC_KEY_NOT_ALLOWED`;
 * - a disabled project → 403 `PROJECT_DISABLED`.
 *
 * Lookups are by SHA-256 hash and cached in memory for `AUTH_CACHE_TTL_MS`, so disabling a project or rotating
 * a key reaches every API process within that time.
 *
 * @module
 */
import type { RequestHandler } from 'express';
import { AppError, ErrorCode, hashKey, keyKind, safeEqual, type KeyKind } from '@mailroom/core';
import { findKey, type Db, type KeyRecord } from '@mailroom/db';

/** A bounded TTL cache of key hash → key record (`null` caches a miss). */
export class AuthCache {
  private readonly entries = new Map<string, { value: KeyRecord | null; expires: number }>();
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async lookup(hash: string, load: () => Promise<KeyRecord | undefined>): Promise<KeyRecord | null> {
    const now = Date.now();
    const hit = this.entries.get(hash);
    if (hit && hit.expires > now) return hit.value;
    const value = (await load()) ?? null;
    if (this.ttlMs > 0) {
      if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
      this.entries.set(hash, { value, expires: now + this.ttlMs });
    }
    return value;
  }

  /** Forgets everything (after an admin change in this process). */
  clear(): void {
    this.entries.clear();
  }
}

function bearer(header: string | undefined): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  return m?.[1];
}

/**
 * Authenticates the request.
 *
 * @param accept - key kinds this route takes (`['secret']` for most, `['public', 'secret']` for `/v1/track`).
 */
export function authenticate(db: Db, cache: AuthCache, accept: KeyKind[]): RequestHandler {
  return async (req, res, next) => {
    const key = bearer(req.get('authorization'));
    if (!key) {
      throw new AppError(ErrorCode.UNAUTHORIZED, 'Missing API key: send "Authorization: Bearer <key>"', {
        suggestion: 'Use the secret key (sk_…) of your project.',
      });
    }
    const kind = keyKind(key);
    if (!kind) throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid API key');
    const record = await cache.lookup(hashKey(key), () => findKey(db, hashKey(key)));
    if (!record) throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid API key');
    if (!accept.includes(record.kind)) {
      throw new AppError(ErrorCode.PUBLIC_KEY_NOT_ALLOWED, 'A public key (pk_) cannot be used on this endpoint', {
        suggestion: 'Use the secret key (sk_…); public keys work only with /v1/track.',
      });
    }
    if (record.projectDisabled) throw new AppError(ErrorCode.PROJECT_DISABLED, 'This project is disabled');
    res.locals.auth = { projectId: record.projectId, kind: record.kind };
    res.locals.log = res.locals.log.child({ projectId: record.projectId });
    next();
  };
}

/** Guards `/admin/*` with `ADMIN_TOKEN` (constant-time compare); admin routes are off when it is unset. */
export function adminOnly(adminToken: string | undefined): RequestHandler {
  return (req, _res, next) => {
    if (!adminToken) throw new AppError(ErrorCode.FORBIDDEN, 'The admin API is disabled: set ADMIN_TOKEN to enable it');
    const token = bearer(req.get('authorization'));
    if (!token || !safeEqual(token, adminToken)) throw new AppError(ErrorCode.UNAUTHORIZED, 'Invalid admin token');
    next();
  };
}
