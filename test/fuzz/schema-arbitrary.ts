/**
 * fast-check arbitraries built from the OpenAPI document's JSON Schemas: a plausible value for a schema, with the
 * "spots" it is made of (every node's path and the schema that governs it), so a hostile mutation can be aimed at
 * a node whose schema it is sure to break. The values need not be valid themselves: the fuzz test always adds a
 * mutation that makes the request invalid.
 */
import fc from 'fast-check';

/** A JSON Schema node as the OpenAPI document carries it (TypeBox output). */
export interface Schema {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  additionalProperties?: boolean | Schema;
  patternProperties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
  oneOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  exclusiveMinimum?: number;
  exclusiveMaximum?: number;
  minItems?: number;
  maxItems?: number;
  minProperties?: number;
  description?: string;
  default?: unknown;
}

/** A node of a generated value: where it is and which schema it was generated from. */
export interface Spot {
  path: string[];
  schema: Schema;
}

/** A generated value and its spots. */
export interface Gen {
  value: unknown;
  spots: Spot[];
}

const SAFE = fc.string({
  unit: fc.constantFrom(...'abcdefghijklmnopqrstuvwxyz0123456789_-'.split('')),
  minLength: 1,
  maxLength: 8,
});

/** JSON types a schema accepts (`undefined`: anything, as for `Type.Unknown()`). */
export function acceptedTypes(s: Schema): Set<string> | undefined {
  const branches = s.anyOf ?? s.oneOf;
  if (branches) {
    const all = new Set<string>();
    for (const b of branches) {
      const t = acceptedTypes(b);
      if (!t) return undefined;
      t.forEach((x) => all.add(x));
    }
    return all;
  }
  if (s.allOf) return acceptedTypes(s.allOf[0]);
  if (s.const !== undefined) return new Set([jsonType(s.const)]);
  if (s.enum) return new Set(s.enum.map(jsonType));
  if (s.type === undefined) return undefined;
  const types = new Set(Array.isArray(s.type) ? s.type : [s.type]);
  if (types.has('integer')) types.add('number-integer');
  return types;
}

/** The JSON type of a value (`integer` for whole numbers). */
export function jsonType(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

function withSpot(path: string[], schema: Schema, arb: fc.Arbitrary<unknown>): fc.Arbitrary<Gen> {
  return arb.map((value) => ({ value, spots: [{ path, schema }] }));
}

function stringArb(s: Schema): fc.Arbitrary<unknown> {
  switch (s.format) {
    case 'email':
      return SAFE.map((x) => `${x}@example.com`);
    case 'mailbox':
      return fc.oneof(
        SAFE.map((x) => `${x}@example.com`),
        SAFE.map((x) => `Name ${x} <${x}@example.com>`),
      );
    case 'uuid':
      return fc.uuid();
    case 'date-time':
      return fc
        .date({ min: new Date('2000-01-01'), max: new Date('2100-01-01'), noInvalidDate: true })
        .map((d) => d.toISOString());
    case 'uri':
    case 'url':
      return SAFE.map((x) => `https://example.com/${x}`);
    default: {
      const min = s.minLength ?? 0;
      const max = Math.min(s.maxLength ?? min + 12, min + 12);
      return fc.string({ minLength: min, maxLength: Math.max(min, max) });
    }
  }
}

function numberArb(s: Schema, integer: boolean): fc.Arbitrary<unknown> {
  const min = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 0);
  const max = s.maximum ?? (s.exclusiveMaximum !== undefined ? s.exclusiveMaximum - 1 : min + 1000);
  return integer
    ? fc.integer({ min: Math.ceil(min), max: Math.max(Math.ceil(min), Math.floor(max)) })
    : fc.double({ min, max, noNaN: true });
}

/**
 * An arbitrary of plausible values of `s`, recording every node as a spot.
 *
 * @param path - where the value sits (`[]` for a body).
 * @param depth - remaining nesting budget (small: bodies here are shallow).
 */
export function fromSchema(s: Schema, path: string[] = [], depth = 4): fc.Arbitrary<Gen> {
  const branches = s.anyOf ?? s.oneOf;
  if (branches && branches.length > 0) {
    // The union node is a spot of its own (for wrong-type mutations); the branch's spots come with it.
    return fc
      .oneof(...branches.map((b) => fromSchema(b, path, depth)))
      .map((g) => ({ value: g.value, spots: [{ path, schema: s }, ...g.spots] }));
  }
  if (s.allOf && s.allOf.length > 0) return fromSchema(Object.assign({}, ...s.allOf) as Schema, path, depth);
  if (s.const !== undefined) return withSpot(path, s, fc.constant(s.const));
  if (s.enum) return withSpot(path, s, fc.constantFrom(...s.enum));
  const type = Array.isArray(s.type) ? s.type[0] : s.type;
  switch (type) {
    case 'string':
      return withSpot(path, s, stringArb(s));
    case 'integer':
      return withSpot(path, s, numberArb(s, true));
    case 'number':
      return withSpot(path, s, numberArb(s, false));
    case 'boolean':
      return withSpot(path, s, fc.boolean());
    case 'null':
      return withSpot(path, s, fc.constant(null));
    case 'array': {
      if (!s.items || depth <= 0) return withSpot(path, s, fc.constant([]));
      const min = s.minItems ?? 0;
      const max = Math.min(s.maxItems ?? min + 2, min + 2);
      return fc
        .array(fromSchema(s.items, [...path, '*'], depth - 1), { minLength: min, maxLength: max })
        .map((items) => ({
          value: items.map((g) => g.value),
          spots: [
            { path, schema: s },
            ...items.flatMap((g, i) =>
              g.spots.map((sp) => ({ ...sp, path: [...path, String(i), ...sp.path.slice(path.length + 1)] })),
            ),
          ],
        }));
    }
    case 'object': {
      const props = Object.entries(s.properties ?? {});
      const required = new Set(s.required ?? []);
      const extra = s.patternProperties
        ? Object.values(s.patternProperties)[0]
        : typeof s.additionalProperties === 'object'
          ? s.additionalProperties
          : undefined;
      const fields = props.map(([k, ps]) =>
        depth <= 0 && !required.has(k)
          ? fc.constant(undefined)
          : required.has(k)
            ? fromSchema(ps, [...path, k], depth - 1)
            : fc.option(fromSchema(ps, [...path, k], depth - 1), { nil: undefined }),
      );
      const extras =
        extra && depth > 0
          ? fc.array(fc.tuple(SAFE, fromSchema(extra, [...path, '*'], depth - 1)), { maxLength: 2 })
          : fc.constant([] as [string, Gen][]);
      return fc.tuple(fc.tuple(...fields), extras).map(([gens, more]) => {
        const value: Record<string, unknown> = {};
        const spots: Spot[] = [{ path, schema: s }];
        props.forEach(([k], i) => {
          const g = gens[i];
          if (!g) return;
          value[k] = g.value;
          spots.push(...g.spots);
        });
        for (const [k, g] of more) {
          if (k in value) continue;
          value[k] = g.value;
          spots.push(...g.spots.map((sp) => ({ ...sp, path: [...path, k, ...sp.path.slice(path.length + 1)] })));
        }
        return { value, spots };
      });
    }
    default:
      // Type.Unknown(): any small JSON value; only NUL and depth are sure to break it.
      return withSpot(path, s, fc.jsonValue({ maxDepth: 2 }));
  }
}
