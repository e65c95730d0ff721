/**
 * Contact `data` patches (shallow merge, `null` removes a key, an empty string changes nothing).
 *
 * @module
 */

/** Whether a `data` value is ignored by an upsert or patch: the empty string (see {@link splitPatch}). */
export function isIgnoredDataValue(value: unknown): boolean {
  return value === '';
}

/**
 * Splits a `data` patch (a shallow merge) into the keys to set and the keys to remove (`null` values).
 * A key whose value is the empty string `""` is ignored: it neither sets nor removes (Plunk's rule, so that a
 * form field left blank never overwrites what is stored; `null` is the way to delete a key). Only the top level
 * is looked at: an empty string inside a nested object or array is stored as given.
 *
 * Every writer of contact data (upserts through `POST /contacts`, `/v1/send`, `/v1/track` and their batches,
 * `PATCH /contacts/{id}`, imports) applies a patch as `(data || set) - removed` in SQL, so this is the one place
 * the rule lives.
 */
export function splitPatch(patch: Record<string, unknown> | undefined): {
  set: Record<string, unknown>;
  removed: string[];
} {
  const set: Record<string, unknown> = {};
  const removed: string[] = [];
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v === null) removed.push(k);
    else if (!isIgnoredDataValue(v)) set[k] = v;
  }
  return { set, removed };
}
