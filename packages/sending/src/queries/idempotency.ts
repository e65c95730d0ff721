/**
 * Idempotency keys (IETF draft "The Idempotency-Key HTTP Header Field"): the first response to a key is stored in
 * the transaction that made its effect and replayed for 24 hours.
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import { idempotencyKeys } from '@mailroom/db/schema';

/** How long a key's response is replayed (ms): 24 h. */
export const IDEMPOTENCY_TTL_MS = 24 * 3600 * 1000;

/** What {@link claimIdempotencyKey} found. */
export type IdempotencyClaim =
  { kind: 'claimed' } | { kind: 'replay'; statusCode: number; response: unknown } | { kind: 'mismatch' };

/**
 * Claims a key inside the caller's transaction. A concurrent request holding the same key makes this wait until
 * that request commits (then this one replays its response) or rolls back (then this one claims the key). A key
 * older than 24 h is taken over as new.
 *
 * Call {@link storeIdempotentResponse} in the same transaction once the response is known.
 */
export async function claimIdempotencyKey(
  tx: DbOrTx,
  projectId: string,
  key: string,
  fingerprint: string,
): Promise<IdempotencyClaim> {
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
export async function storeIdempotentResponse(
  tx: DbOrTx,
  projectId: string,
  key: string,
  statusCode: number,
  response: unknown,
): Promise<void> {
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

/** An email named in a key's stored answer (`{ emailIds }`), as it is now. */
export interface KeyEmail {
  id: string;
  /** Null once the contact was deleted (the email is kept). */
  contactId: string | null;
  /** The contact's address as stored; the email's own when the contact is gone. */
  contactEmail: string;
  toEmail: string;
  status: string;
  error: string | null;
}

/**
 * A key's row as committed now (outside any claim): its fingerprint, stored status and answer, and the emails of the
 * project whose ids the answer lists under `emailIds` (the answer that the write statement stores itself,
 * `idempotency` of `./transactional-batch`). One round trip.
 *
 * @returns `undefined` when the project has no such key.
 */
export async function findIdempotencyKey(
  db: DbOrTx,
  projectId: string,
  key: string,
): Promise<{ fingerprint: string; statusCode: number; response: unknown; emails: KeyEmail[] } | undefined> {
  const result = await db.execute<{
    fingerprint: string;
    status_code: number;
    response: unknown;
    emails: KeyEmail[];
  }>(sql`
    select k.fingerprint, k.status_code, k.response,
      (select coalesce(jsonb_agg(jsonb_build_object('id', e.id, 'contactId', e.contact_id, 'contactEmail', coalesce(c.email, e.to_email),
          'toEmail', e.to_email, 'status', e.status, 'error', e.error) order by x.n), '[]'::jsonb)
        from jsonb_array_elements_text(case when jsonb_typeof(k.response::jsonb -> 'emailIds') = 'array' then k.response::jsonb -> 'emailIds' else '[]'::jsonb end)
          with ordinality as x(id, n)
        join emails e on e.project_id = k.project_id and e.id = x.id::uuid
        left join contacts c on c.id = e.contact_id and c.project_id = e.project_id) as emails
    from idempotency_keys k
    where k.project_id = ${projectId}::uuid and k.key = ${key}`);
  const row = result.rows[0];
  return (
    row && { fingerprint: row.fingerprint, statusCode: row.status_code, response: row.response, emails: row.emails }
  );
}
