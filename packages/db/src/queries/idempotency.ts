/**
 * Idempotency keys (IETF draft "The Idempotency-Key HTTP Header Field"): the first response to a key is stored in
 * the transaction that made its effect and replayed for 24 hours.
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '../client';
import { idempotencyKeys } from '../schema';

/** How long a key's response is replayed (ms): 24 h. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** What {@link claimIdempotencyKey} found. */
export type IdempotencyClaim =
  | { kind: 'claimed' }
  | { kind: 'replay'; statusCode: number; response: unknown }
  | { kind: 'mismatch' };

/**
 * Claims a key inside the caller's transaction. A concurrent request holding the same key makes this wait until
 * that request commits (then this one replays its response) or rolls back (then this one claims the key). A key
 * older than 24 h is taken over as new.
 *
 * Call {@link storeIdempotentResponse} in the same transaction once the response is known.
 */
export async function claimIdempotencyKey(tx: DbOrTx, projectId: string, key: string, fingerprint: string): Promise<IdempotencyClaim> {
  const claimed = await tx.execute(sql`
    insert into idempotency_keys (project_id, key, fingerprint, status_code, response, created_at)
    values (${projectId}::uuid, ${key}, ${fingerprint}, 0, 'null'::json, now())
    on conflict (project_id, key) do update set
      fingerprint = excluded.fingerprint, status_code = 0, response = 'null'::json, created_at = now()
    where idempotency_keys.created_at < now() - make_interval(secs => ${IDEMPOTENCY_TTL_MS / 1000})
    returning 1`);
  if (claimed.rows.length > 0) return { kind: 'claimed' };
  const [row] = await tx
    .select()
    .from(idempotencyKeys)
    .where(and(eq(idempotencyKeys.projectId, projectId), eq(idempotencyKeys.key, key)));
  if (!row || row.fingerprint !== fingerprint) return { kind: 'mismatch' };
  return { kind: 'replay', statusCode: row.statusCode, response: row.response };
}

/** Stores the response of a claimed key (same transaction as the claim). */
export async function storeIdempotentResponse(tx: DbOrTx, projectId: string, key: string, statusCode: number, response: unknown): Promise<void> {
  await tx
    .update(idempotencyKeys)
    .set({ statusCode, response })
    .where(and(eq(idempotencyKeys.projectId, projectId), eq(idempotencyKeys.key, key)));
}

/** Deletes keys past their 24 h (housekeeping; expired keys are already ignored). @returns rows deleted. */
export async function purgeIdempotencyKeys(db: DbOrTx, limit = 10_000): Promise<number> {
  const res = await db.execute(sql`
    delete from idempotency_keys where ctid in (
      select ctid from idempotency_keys
      where created_at < now() - make_interval(secs => ${IDEMPOTENCY_TTL_MS / 1000}) limit ${limit})`);
  return res.rowCount ?? 0;
}
