/**
 * Hostile mutations: each one is sure to make a request invalid (so the API must answer 4xx and store nothing).
 * A mutation is aimed at a spot of a generated value (see `schema-arbitrary.ts`) whose schema it breaks.
 */
import { acceptedTypes, jsonType, type Gen, type Schema, type Spot } from './schema-arbitrary';

/** A value nested `depth` levels (arrays or objects), serialised without recursion. */
export class Deep {
  constructor(
    readonly depth: number,
    readonly shape: 'array' | 'object',
  ) {}
}

/** JSON text of a value that may hold {@link Deep} markers and numbers JSON.stringify would mangle. */
export function serialize(v: unknown): string {
  if (v instanceof Deep) {
    return v.shape === 'array'
      ? '['.repeat(v.depth) + '1' + ']'.repeat(v.depth)
      : '{"d":'.repeat(v.depth) + '1' + '}'.repeat(v.depth);
  }
  if (Array.isArray(v)) return `[${v.map(serialize).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.entries(v as Record<string, unknown>)
      .map(([k, x]) => `${JSON.stringify(k)}:${serialize(x)}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** Kinds of body mutations. */
export const BODY_MUTATIONS = [
  'nul-string',
  'nul-key',
  'deep',
  'unknown-field',
  'wrong-type',
  'out-of-range',
  'missing-required',
] as const;
export type BodyMutation = (typeof BODY_MUTATIONS)[number];

function clone<T>(v: T): T {
  return v === undefined ? v : (JSON.parse(JSON.stringify(v)) as T);
}

function get(root: unknown, path: string[]): unknown {
  let v = root;
  for (const k of path) v = v && typeof v === 'object' ? (v as Record<string, unknown>)[k] : undefined;
  return v;
}

/** Sets `path` in `holder.root` (the empty path replaces the root). */
function set(holder: { root: unknown }, path: string[], value: unknown): void {
  if (path.length === 0) {
    holder.root = value;
    return;
  }
  const parent = get(holder.root, path.slice(0, -1)) as Record<string, unknown>;
  parent[path[path.length - 1]] = value;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return v !== null && typeof v === 'object' && !Array.isArray(v) && !(v instanceof Deep);
}

function accepts(types: Set<string>, v: unknown): boolean {
  const t = jsonType(v);
  return t === 'integer' ? types.has('integer') || types.has('number') : types.has(t);
}

const WRONG_TYPES: unknown[] = [7, 1.5, true, null, 'text', [], {}, [1, 'a'], { a: 1 }];

/** Segment filters the filter language must refuse (422): out-of-range counts and dates, empty lists, NUL. */
export const HOSTILE_FILTERS: unknown[] = [
  [{ field: 'event.signup', operator: 'greaterThan', value: 1e20 }],
  [{ field: 'event.signup', operator: 'lessThan', value: -1e20 }],
  [{ field: 'event.signup', operator: 'equals', value: 1.5 }],
  [{ field: 'event.signup', operator: 'equals', value: 2 ** 53 }],
  { logic: 'AND', groups: [{ filters: [{ field: 'createdAt', operator: 'greaterThan', value: '0000-01-01' }] }] },
  [{ field: 'data.x', operator: 'within', value: 1e308, unit: 'days' }],
  [{ field: 'data.x', operator: 'in', value: [] }],
  [{ field: 'event.a', operator: 'greaterThan', value: 1, window: { value: 1e20, unit: 'days' } }],
  [{ field: 'email.opened', operator: 'exists', campaignId: 'x' }],
  { logic: 'XOR', groups: [] },
];

/** True for the segment filter field (its schema is "object or array"; the filter language checks the rest). */
export function isFilterSchema(s: Schema): boolean {
  return typeof s.description === 'string' && s.description.startsWith('Segment filter');
}

/** Values that break a schema's own constraints (not its type), or none. */
export function outOfRange(s: Schema): unknown[] {
  if (isFilterSchema(s)) return HOSTILE_FILTERS;
  const out: unknown[] = [];
  const t = Array.isArray(s.type) ? s.type[0] : s.type;
  if (s.enum)
    out.push(
      'NOT_IN_ENUM_\u00e9',
      ...(s.enum.every((e) => typeof e === 'string') ? [String(s.enum[0]).toLowerCase() + '_x'] : []),
    );
  if (s.const !== undefined) out.push(typeof s.const === 'string' ? `${s.const}_x` : 'x');
  if (t === 'string' && !s.enum) {
    if (s.maxLength !== undefined && s.maxLength <= 50_000) out.push('x'.repeat(s.maxLength + 1));
    if ((s.minLength ?? 0) > 0) out.push('');
    if (s.format === 'mailbox')
      out.push('Acme <not-an-address>', 'Acme <a@b.com', '<>', `J\u00fcrgen <j\u00fcrgen@example.com>`);
    if (s.format === 'email')
      out.push(
        'not-an-address',
        `${'a'.repeat(65)}@example.com`,
        `a@${'b'.repeat(64)}.com`,
        `${'a'.repeat(64)}@${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(63)}.com`,
      );
    if (s.format === 'uuid') out.push('not-a-uuid', '00000000-0000-0000-0000-00000000000g');
    if (s.format === 'date-time') out.push('yesterday', '2024-13-45T25:61:00Z');
    if (s.format === 'uri' || s.format === 'url') out.push('not a url');
    if (s.pattern) out.push('\n\u2028 ');
  }
  if (t === 'integer' || t === 'number') {
    if (s.maximum !== undefined) out.push(s.maximum + 1, 1e20, 1e308);
    if (s.exclusiveMaximum !== undefined) out.push(s.exclusiveMaximum, 1e20);
    if (s.minimum !== undefined) out.push(s.minimum - 1, -1e20, -1e308);
    if (s.exclusiveMinimum !== undefined) out.push(s.exclusiveMinimum, -1e20);
    if (t === 'integer') out.push(1.5, 2 ** 53 + 0.5 === 2 ** 53 ? 0.25 : 0.5);
  }
  if (t === 'array') {
    if (s.maxItems !== undefined && s.maxItems <= 1000) out.push(Array.from({ length: s.maxItems + 1 }, () => 'x'));
    if ((s.minItems ?? 0) > 0) out.push([]);
  }
  if (t === 'object' && (s.minProperties ?? 0) > 0) out.push({});
  return out;
}

/**
 * True when no other branch of a union at the spot's path accepts the spot's JSON types (so a value that breaks
 * this branch's constraints breaks the union).
 */
function soleBranch(spots: Spot[], sp: Spot): boolean {
  const key = sp.path.join('\u0001');
  const union = spots.find((o) => o.path.join('\u0001') === key && (o.schema.anyOf ?? o.schema.oneOf));
  if (!union) return true;
  const mine = acceptedTypes(sp.schema);
  if (!mine) return false;
  const sharing = (union.schema.anyOf ?? union.schema.oneOf)!.filter((b) => {
    const t = acceptedTypes(b);
    return !t || [...t].some((x) => mine.has(x));
  });
  return sharing.length <= 1;
}

/**
 * Applies a body mutation to a generated body. Falls back to nesting the whole body 40 levels deep when no spot
 * suits the kind (always refused: deeper than 32).
 *
 * @returns the mutated body and a short description of what was done.
 */
export function mutateBody(
  gen: Gen,
  kind: BodyMutation,
  pick: number,
  deepDepth: number,
  deepShape: 'array' | 'object',
): { body: unknown; what: string } {
  const holder = { root: clone(gen.value) };
  const at = (spots: Spot[]) => spots[pick % spots.length];
  const where = (sp: Spot) => sp.path.join('.') || '(root)';
  const live = gen.spots.filter((sp) => get(holder.root, sp.path) !== undefined || sp.path.length === 0);
  const fallback = () => ({ body: new Deep(40, deepShape), what: `${kind} (no spot) → whole body nested 40 deep` });
  switch (kind) {
    case 'nul-string': {
      const strings = live.filter((sp) => typeof get(holder.root, sp.path) === 'string');
      if (strings.length === 0) {
        if (!isPlainObject(holder.root)) return fallback();
        holder.root['nul\u0000'] = 'x';
        return { body: holder.root, what: 'NUL key added at root' };
      }
      const sp = at(strings);
      const s = get(holder.root, sp.path) as string;
      const i = pick % (s.length + 1);
      set(holder, sp.path, s.slice(0, i) + '\u0000' + s.slice(i));
      return { body: holder.root, what: `NUL in string at ${where(sp)}` };
    }
    case 'nul-key': {
      const objects = live.filter((sp) => isPlainObject(get(holder.root, sp.path)));
      if (objects.length === 0) return fallback();
      const sp = at(objects);
      const obj = get(holder.root, sp.path) as Record<string, unknown>;
      const keys = Object.keys(obj);
      if (keys.length > 0 && pick % 2 === 0) {
        const k = keys[pick % keys.length];
        obj[`${k}\u0000`] = obj[k];
        delete obj[k];
        return { body: holder.root, what: `NUL in key ${k} at ${where(sp)}` };
      }
      obj['\u0000'] = 1;
      return { body: holder.root, what: `NUL key added at ${where(sp)}` };
    }
    case 'deep': {
      const sp = at(live.length ? live : [{ path: [], schema: {} }]);
      set(holder, sp.path, new Deep(deepDepth, deepShape));
      return { body: holder.root, what: `${deepDepth}-deep ${deepShape} at ${where(sp)}` };
    }
    case 'unknown-field': {
      const closed = live.filter(
        (sp) => sp.schema.additionalProperties === false && isPlainObject(get(holder.root, sp.path)),
      );
      if (closed.length === 0) return fallback();
      const sp = at(closed);
      (get(holder.root, sp.path) as Record<string, unknown>)[`fuzz_${pick % 1000}`] = pick % 3 === 0 ? null : 'x';
      return { body: holder.root, what: `unknown field at ${where(sp)}` };
    }
    case 'wrong-type': {
      // The outermost schema of each node only: a union's branch is not the whole story (null is fine in a Nullable).
      const outer = live.filter(
        (sp, i) => live.findIndex((o) => o.path.join('\u0001') === sp.path.join('\u0001')) === i,
      );
      const typed = outer.filter((sp) => acceptedTypes(sp.schema) !== undefined);
      if (typed.length === 0) return fallback();
      const sp = at(typed);
      const types = acceptedTypes(sp.schema)!;
      const wrong = WRONG_TYPES.filter((v) => !accepts(types, v));
      if (wrong.length === 0) return fallback();
      const v = wrong[pick % wrong.length];
      set(holder, sp.path, clone(v));
      return { body: holder.root, what: `wrong type ${jsonType(v)} at ${where(sp)}` };
    }
    case 'out-of-range': {
      // A direct (non-union) schema only: a union could accept the value in another branch.
      const bounded = live.filter(
        (sp) =>
          (isFilterSchema(sp.schema) || (!sp.schema.anyOf && !sp.schema.oneOf && soleBranch(live, sp))) &&
          outOfRange(sp.schema).length > 0,
      );
      if (bounded.length === 0) return fallback();
      const sp = at(bounded);
      const values = outOfRange(sp.schema);
      const v = values[Math.floor(pick / bounded.length) % values.length];
      set(holder, sp.path, clone(v));
      return { body: holder.root, what: `out of range (${JSON.stringify(v)?.slice(0, 40)}) at ${where(sp)}` };
    }
    case 'missing-required': {
      const withRequired = live.filter((sp) =>
        (sp.schema.required ?? []).some(
          (k) => isPlainObject(get(holder.root, sp.path)) && k in (get(holder.root, sp.path) as object),
        ),
      );
      if (withRequired.length === 0) return fallback();
      const sp = at(withRequired);
      const obj = get(holder.root, sp.path) as Record<string, unknown>;
      const present = sp.schema.required!.filter((k) => k in obj);
      const k = present[pick % present.length];
      delete obj[k];
      return { body: holder.root, what: `required ${k} removed at ${where(sp)}` };
    }
  }
}
