/**
 * Guards for JSON values that came from outside (request bodies, query strings, import rows): what Postgres
 * `text`/`jsonb` cannot store (U+0000, or a lone UTF-16 surrogate such as `"\ud800"` parsed from JSON, in a string
 * or an object key: `jsonb` refuses both, 22P05 / 22P02) and what would exhaust the stack further on
 * (nesting deeper than {@link MAX_JSON_DEPTH}). The walk is iterative, so a 100,000-deep value is refused
 * without recursion.
 *
 * @module
 */
import type { FieldError } from './errors';

/** Deepest nesting accepted anywhere in a request body or import row: objects and arrays inside each other. */
export const MAX_JSON_DEPTH = 32;

/** Where a hostile value sits and what is wrong with it, as an `errors[]` item (`field` is a dotted path). */
export type JsonProblem = FieldError;

function join(base: string, key: string): string {
  return base ? `${base}.${key}` : key;
}

/** True when `s` holds U+0000, which Postgres `text` and `jsonb` refuse. */
export function hasNul(s: string): boolean {
  return s.includes('\u0000');
}

/** A high surrogate not followed by a low one, or a low one not preceded by a high one. */
export const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with text Postgres cannot store, or `undefined` when it can. */
function unstorableText(s: string): string | undefined {
  if (hasNul(s)) return 'must not contain the NUL character (\\u0000)';
  if (LONE_SURROGATE.test(s)) return 'must not contain a lone UTF-16 surrogate (e.g. \\ud800)';
  return undefined;
}

/** A key made printable for an error's `field` path (the key itself may be what cannot be stored). */
function printableKey(k: string): string {
  return k.replace(/\u0000/g, '\\u0000').replace(new RegExp(LONE_SURROGATE.source, 'g'), '\uFFFD');
}

/**
 * Finds the first hostile spot in a JSON value: a string or object key with U+0000 or a lone surrogate, or nesting deeper than
 * `maxDepth` (the value itself is depth 0; each object or array entered adds 1).
 *
 * @param value - a parsed JSON value (anything `JSON.parse` returns); other values are walked the same way.
 * @param root - the dotted path of `value` itself (`''` for a request body, `data` for a field).
 * @param maxDepth - the deepest accepted nesting, default {@link MAX_JSON_DEPTH}.
 * @returns the first problem found, or `undefined` when the value is safe to store.
 */
export function findJsonProblem(value: unknown, root = '', maxDepth = MAX_JSON_DEPTH): JsonProblem | undefined {
  const stack: Array<{ v: unknown; path: string; depth: number }> = [{ v: value, path: root, depth: 0 }];
  while (stack.length > 0) {
    const { v, path, depth } = stack.pop()!;
    if (typeof v === 'string') {
      const problem = unstorableText(v);
      if (problem) return { field: path || '(root)', message: problem, code: 'invalid_string' };
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (depth >= maxDepth) {
      return { field: path || '(root)', message: `is nested too deeply (at most ${maxDepth} levels)`, code: 'too_big' };
    }
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: join(path, String(i)), depth: depth + 1 });
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i];
      const problem = unstorableText(k);
      if (problem) return { field: join(path, printableKey(k)), message: `key ${problem}`, code: 'invalid_string' };
      stack.push({ v: (v as Record<string, unknown>)[k], path: join(path, k), depth: depth + 1 });
    }
  }
  return undefined;
}
