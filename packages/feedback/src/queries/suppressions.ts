/**
 * The project suppression list: addresses never mailed again. Keys are lower-cased addresses (as contacts'
 * `email_key`); entries come from hard bounces, repeated soft bounces, complaints and operators.
 *
 * @module
 */
import { and, eq, inArray, sql } from 'drizzle-orm';
import { emailKey, normalizeEmail, normalizedKey, type NormalizedEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { likePattern } from '@mailroom/db/queries/like';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { suppressions, type SuppressionReason } from '@mailroom/db/schema';

export type SuppressionRow = typeof suppressions.$inferSelect;

/** An entry to add; the address is normalized (domain lower-cased) and keyed here. */
export interface NewSuppression {
  email: string;
  reason: SuppressionReason;
  sourceEmailId?: string | null;
  details?: Record<string, unknown>;
}

/** Of `emails`, the keys that are suppressed in the project (one indexed lookup). */
export async function suppressedKeys(
  db: DbOrTx,
  projectId: string,
  emails: readonly NormalizedEmail[],
): Promise<Set<string>> {
  if (emails.length === 0) return new Set();
  const rows = await db
    .select({ key: suppressions.emailKey })
    .from(suppressions)
    .where(
      and(
        eq(suppressions.projectId, projectId),
        inArray(suppressions.emailKey, [...new Set(emails.map(normalizedKey))]),
      ),
    );
  return new Set(rows.map((r) => r.key));
}

/**
 * Adds entries; an address already on the list keeps its first entry (its reason and time).
 *
 * @returns the rows actually added (not those already present), in input order.
 */
export async function addSuppressions(
  db: DbOrTx,
  projectId: string,
  entries: readonly NewSuppression[],
): Promise<SuppressionRow[]> {
  const unique = new Map<string, NewSuppression>();
  for (const e of entries) if (!unique.has(emailKey(e.email))) unique.set(emailKey(e.email), e);
  if (unique.size === 0) return [];
  return db
    .insert(suppressions)
    .values(
      [...unique.entries()].map(([key, e]) => ({
        id: newId(),
        projectId,
        email: normalizeEmail(e.email),
        emailKey: key,
        reason: e.reason,
        sourceEmailId: e.sourceEmailId ?? null,
        details: e.details ?? {},
      })),
    )
    .onConflictDoNothing({ target: [suppressions.projectId, suppressions.emailKey] })
    .returning();
}

/** One entry by address, or `undefined`. */
export async function getSuppression(
  db: DbOrTx,
  projectId: string,
  email: string,
): Promise<SuppressionRow | undefined> {
  const [row] = await db
    .select()
    .from(suppressions)
    .where(and(eq(suppressions.projectId, projectId), eq(suppressions.emailKey, emailKey(email))));
  return row;
}

/** Removes an address from the list. @returns the removed entry, or `undefined` when it was not listed. */
export async function deleteSuppression(
  db: DbOrTx,
  projectId: string,
  email: string,
): Promise<SuppressionRow | undefined> {
  const [row] = await db
    .delete(suppressions)
    .where(and(eq(suppressions.projectId, projectId), eq(suppressions.emailKey, emailKey(email))))
    .returning();
  return row;
}

/**
 * A keyset page of the list, newest first, optionally narrowed to addresses containing `search` (trigram
 * index) and to one `reason`.
 */
export async function listSuppressions(
  db: DbOrTx,
  projectId: string,
  q: { limit: number; beforeId?: string; search?: string; reason?: SuppressionReason },
) {
  const filters = and(
    eq(suppressions.projectId, projectId),
    q.search ? sql`${suppressions.emailKey} like ${likePattern(q.search.toLowerCase())}` : undefined,
    q.reason ? eq(suppressions.reason, q.reason) : undefined,
  );
  return keysetList(db, suppressions, filters, q);
}
