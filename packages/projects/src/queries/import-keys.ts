/**
 * Keys brought from elsewhere (an operator moving a Plunk project by hand): stored like ours, as SHA-256 hashes
 * beside their visible prefix (`keyPrefix`), so clients keep the keys they have.
 *
 * @module
 */
import { eq } from 'drizzle-orm';
import { hashKey, keyMode, keyPrefix, type KeyKind } from '../keys';
import type { Db } from '@mailroom/db/client';
import { apiKeys, projects } from '@mailroom/db/schema';
import { listKeys, type KeySummary } from './projects';

/** Outcome of {@link importProjectKeys}. */
export type ImportKeysResult =
  | { ok: true; keys: KeySummary[] }
  | { ok: false; reason: 'project_not_found' }
  | { ok: false; reason: 'key_in_use'; kind: KeyKind };

/**
 * Adds the given keys to a project as current keys (the project's other keys are left as they are), all or none.
 * The caller checks each key's shape and kind (`keyKind` of `@mailroom/core`).
 * A key shaped as a test key (`sk_test_…`, `pk_test_…`) is stored as a test key.
 *
 * @param keys - the keys in clear, by kind; only their hashes are stored.
 * @returns the project's keys that were added, or why none was: `key_in_use` when a key is already stored here
 *   (by any project, this one included: a key names one project, once).
 */
export async function importProjectKeys(
  db: Db,
  projectId: string,
  keys: { kind: KeyKind; key: string }[],
): Promise<ImportKeysResult> {
  class InUse extends Error {
    constructor(readonly kind: KeyKind) {
      super('key in use');
    }
  }
  try {
    return await db.transaction(async (tx) => {
      // The same lock as rotateKeys and revokeKey: key changes of one project never interleave.
      const [project] = await tx
        .select({ id: projects.id })
        .from(projects)
        .where(eq(projects.id, projectId))
        .for('update');
      if (!project) return { ok: false, reason: 'project_not_found' } as const;
      const ids: string[] = [];
      for (const { kind, key } of keys) {
        const [row] = await tx
          .insert(apiKeys)
          .values({ projectId, kind, mode: keyMode(key), keyHash: hashKey(key), keyPrefix: keyPrefix(key) })
          .onConflictDoNothing({ target: apiKeys.keyHash })
          .returning({ id: apiKeys.id });
        if (!row) throw new InUse(kind);
        ids.push(row.id);
      }
      const all = (await listKeys(tx, projectId)) ?? [];
      return { ok: true, keys: all.filter((k) => ids.includes(k.id)) } as const;
    });
  } catch (err) {
    if (err instanceof InUse) return { ok: false, reason: 'key_in_use', kind: err.kind };
    throw err;
  }
}
