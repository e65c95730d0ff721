/**
 * `Idempotency-Key` handling (IETF draft-ietf-httpapi-idempotency-key-header): the key is claimed in the
 * transaction that makes the request's effect, and the response is stored in it before it commits.
 *
 * - same key, same request (method, path, canonical JSON body): the first response is replayed for 24 h, with
 *   `Idempotent-Replayed: true`;
 * - same key, different request: 422 `IDEMPOTENCY_CONFLICT` (the draft's status for a reused key);
 * - concurrent duplicates: the second waits on the first's row lock, then replays its response; after 10 s of
 *   waiting it gets 409 `CONFLICT` (retry later);
 * - a request that fails (4xx/5xx) commits nothing, so the key stays free.
 *
 * Keyless requests skip all of this. Deadlocks (rare, between counters) retry the whole transaction: nothing
 * of an aborted attempt was committed or enqueued.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import type express from 'express';
import { sql } from 'drizzle-orm';
import { AppError, ErrorCode, errorCode } from '@mailroom/platform/errors';
import { claimIdempotencyKey, storeIdempotentResponse } from '@mailroom/sending/queries/idempotency';
import { type Database, type DbOrTx } from '@mailroom/db/client';
import type { RouteResult } from './route-result';

/** Longest accepted key (characters). */
export const IDEMPOTENCY_KEY_MAX = 255;
const KEY_PATTERN = /^[\x21-\x7e]+$/;
/** How long a duplicate waits for the first request holding its key (ms). */
const WAIT_MS = 10_000;
const DEADLOCK = '40P01';
const SERIALIZATION = '40001';
const LOCK_TIMEOUT = '55P03';

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === 'object') {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}

/** SHA-256 over method, path and the body's canonical JSON (key order does not matter). */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${JSON.stringify(canonical(body ?? null))}`)
    .digest('hex');
}

/**
 * The request's `Idempotency-Key`, or `undefined`.
 *
 * @throws {@link AppError} 400 `INVALID_PARAMETERS` when it is empty, longer than 255 characters or not printable ASCII.
 */
export function idempotencyKeyOf(req: express.Request): string | undefined {
  const key = req.get('Idempotency-Key');
  if (key === undefined) return undefined;
  if (key.length === 0 || key.length > IDEMPOTENCY_KEY_MAX || !KEY_PATTERN.test(key)) {
    const message = `must be 1–${IDEMPOTENCY_KEY_MAX} printable ASCII characters`;
    throw new AppError(ErrorCode.INVALID_PARAMETERS, `Idempotency-Key: ${message}`, {
      errors: [{ field: 'Idempotency-Key', message, code: 'invalid_string' }],
      suggestion: 'Use a UUID per logical operation.',
    });
  }
  return key;
}

/** A route handler bound to its request: where to write, and where to register after-commit work. */
export type Run = (db: DbOrTx, afterCommit: (fn: () => Promise<void>) => void) => Promise<RouteResult>;

async function retryingTransientConflicts<T>(fn: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn();
    } catch (err) {
      const code = errorCode(err);
      if (attempt >= 3 || (code !== DEADLOCK && code !== SERIALIZATION)) throw err;
    }
  }
}

/** Runs a handler on the pool, then its after-commit work (a keyless request: no transaction of ours). */
export async function runDirect(
  database: Database,
  run: Run,
  defaultStatus: number,
): Promise<{ status: number; data: unknown; replayed: false }> {
  const later: (() => Promise<void>)[] = [];
  const result = await run(database.db, (fn) => later.push(fn));
  for (const fn of later) await fn();
  return { status: result.status ?? defaultStatus, data: result.data, replayed: false };
}

/**
 * Runs an idempotent route's handler. Keys are scoped by project and by key mode (live and test keys never share
 * a stored answer).
 *
 * @returns the status and `data` to send, and whether they are a replay.
 * @throws {@link AppError} 400 (malformed key), 409 `CONFLICT` (duplicate still in progress after 10 s),
 *   422 `IDEMPOTENCY_CONFLICT` (key reused with another request); whatever the handler throws.
 */
export async function runIdempotent(
  database: Database,
  req: express.Request,
  auth: { projectId: string; mode: 'live' | 'test' },
  body: unknown,
  run: Run,
  defaultStatus: number,
): Promise<{ status: number; data: unknown; replayed: boolean }> {
  const given = idempotencyKeyOf(req);
  const projectId = auth.projectId;
  // Live and test keys of one project keep separate key spaces: a staging run (test key) that used an order id as
  // its key must not make production's identical request (live key) replay the test answer and send nothing.
  const key = given === undefined || auth.mode === 'live' ? given : `test:${given}`;
  return retryingTransientConflicts(async () => {
    if (key === undefined) return runDirect(database, run, defaultStatus);
    const later: (() => Promise<void>)[] = [];
    const fingerprint = requestFingerprint(req.method, req.path, body);
    let out: { status: number; data: unknown; replayed: boolean };
    try {
      out = await database.db.transaction(async (tx) => {
        await tx.execute(sql.raw(`set local lock_timeout = '${WAIT_MS}ms'`));
        const claim = await claimIdempotencyKey(tx, projectId, key, fingerprint);
        if (claim.kind === 'mismatch') {
          throw new AppError(ErrorCode.IDEMPOTENCY_CONFLICT, 'This Idempotency-Key was used with a different request', {
            suggestion: 'Use a new key for a new request; reuse a key only to retry the identical request.',
          });
        }
        if (claim.kind === 'replay') return { status: claim.statusCode, data: claim.response, replayed: true };
        const result = await run(tx, (fn) => later.push(fn));
        const status = result.status ?? defaultStatus;
        await storeIdempotentResponse(tx, projectId, key, status, result.data);
        return { status, data: result.data, replayed: false };
      });
    } catch (err) {
      if (errorCode(err) === LOCK_TIMEOUT) {
        throw new AppError(ErrorCode.CONFLICT, 'A request with this Idempotency-Key is still in progress', {
          suggestion: 'Retry after the first request has finished.',
          retryable: true,
        });
      }
      throw err;
    }
    for (const fn of later) await fn();
    return out;
  });
}
