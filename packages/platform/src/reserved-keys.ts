/**
 * Object keys a request may not use: `__proto__`, `constructor` and `prototype`. JavaScript gives them meaning
 * (`obj.__proto__ = v` sets the prototype instead of a key, so a `__proto__` key copied by assignment vanishes;
 * `constructor` and `prototype` name the machinery that prototype-pollution attacks reach through). Rather than
 * store some of them and lose others on the way (a contact's `data.__proto__` was dropped by the merge), every
 * such key in a request body or an import record is refused with 422 naming its path: `data.__proto__`.
 *
 * `JSON.parse` makes `"__proto__"` an own property, so the check reads own keys. A parser that assigns keys
 * (stream-json) turns a `__proto__` key with an object value into the object's prototype instead: an object whose
 * prototype is not `Object.prototype` (nor `null`) is reported as holding a `__proto__` key too, and
 * {@link markProtoKey} makes that happen for every value.
 *
 * @module
 */
import type { FieldError } from './errors';

/** The keys refused in request bodies and import records, at any depth. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(['__proto__', 'constructor', 'prototype']);

/** At most this many reserved keys are listed in one answer. */
const MAX_REPORTED = 20;

function join(base: string, key: string): string {
  return base ? `${base}.${key}` : key;
}

function reserved(field: string, key: string): FieldError {
  return {
    field,
    message: `"${key}" is a reserved key (__proto__, constructor and prototype are not accepted as keys)`,
    code: 'unrecognized_keys',
  };
}

/**
 * Every reserved key in a parsed JSON value, at any depth, as `errors[]` items (at most 20, in document order).
 * The walk is iterative; bound its depth first (`findJsonProblem`).
 *
 * @param value - a parsed JSON value.
 * @param root - the dotted path of `value` itself (`''` for a request body).
 */
export function findReservedKeys(value: unknown, root = ''): FieldError[] {
  const found: FieldError[] = [];
  // A `report` item is a reserved key met in its parent, kept on the stack so the answer is in document order.
  const stack: Array<{ v: unknown; path: string; report?: string }> = [{ v: value, path: root }];
  while (stack.length > 0 && found.length < MAX_REPORTED) {
    const { v, path, report } = stack.pop()!;
    if (report !== undefined) {
      found.push(reserved(path, report));
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push({ v: v[i], path: join(path, String(i)) });
      continue;
    }
    // A plain object's prototype is null or an `Object.prototype`, of this realm or another (`structuredClone` and
    // `vm` contexts make objects of their own realm): one whose own prototype is null. Anything else was set.
    const proto: unknown = Object.getPrototypeOf(v);
    if (proto !== null && Object.getPrototypeOf(proto) !== null)
      found.push(reserved(join(path, '__proto__'), '__proto__'));
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i];
      stack.push(
        RESERVED_KEYS.has(k)
          ? { v: undefined, path: join(path, k), report: k }
          : { v: (v as Record<string, unknown>)[k], path: join(path, k) },
      );
    }
  }
  return found.slice(0, MAX_REPORTED);
}

/**
 * A `JSON.parse`-style reviver for parsers that assign keys (stream-json's `reviver` option): the value of a
 * `__proto__` key becomes a fresh object, so assigning it sets the holder's prototype to an object
 * {@link findReservedKeys} reports, whatever the value was (a string would otherwise vanish without a trace).
 */
export function markProtoKey(key: string, value: unknown): unknown {
  return key === '__proto__' ? {} : value;
}
