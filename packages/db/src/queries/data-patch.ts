/**
 * Contact `data` patches (docs/api/overview.md: shallow merge, `null` removes a key).
 *
 * @module
 */

/**
 * Splits a `data` patch (docs/api/overview.md: shallow merge) into the keys to set and the keys to remove (`null`
 * values). Every writer of contact data (upserts, `PATCH`, imports) applies a patch as `(data || set) - removed` in
 * SQL.
 */
export function splitPatch(patch: Record<string, unknown> | undefined): { set: Record<string, unknown>; removed: string[] } {
  const set: Record<string, unknown> = {};
  const removed: string[] = [];
  for (const [k, v] of Object.entries(patch ?? {})) {
    if (v === null) removed.push(k);
    else set[k] = v;
  }
  return { set, removed };
}
