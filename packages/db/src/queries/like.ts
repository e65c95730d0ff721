/**
 * SQL LIKE patterns from user text: `\`, `%` and `_` are escaped (Postgres's default escape character is `\`),
 * so a search for `50%_off` matches those characters literally.
 *
 * @module
 */

/** A LIKE pattern matching `value` anywhere (`contains`), at the start, or at the end. */
export function likePattern(value: string, mode: 'contains' | 'startsWith' | 'endsWith' = 'contains'): string {
  const escaped = value.replace(/[\\%_]/g, (c) => '\\' + c);
  return mode === 'contains' ? `%${escaped}%` : mode === 'startsWith' ? `${escaped}%` : `%${escaped}`;
}
