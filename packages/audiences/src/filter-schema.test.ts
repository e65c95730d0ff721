/**
 * The filter's JSON Schema as the request validators enforce it: the structure at any depth (through the
 * recursive reference), the keys of groups, and nothing of a condition's meaning (left to the parser).
 */
import { Type } from '@sinclair/typebox';
import { AppError } from '@mailroom/platform/errors';
import { bodyValidator } from '@mailroom/platform/validation';
import { filterField, SEGMENT_FILTER_ID, SegmentFilterSchema } from './filter-schema';

const validate = bodyValidator(
  Type.Object({
    filter: Type.Optional(filterField()),
    other: Type.Optional(Type.Union([filterField('another field'), Type.Null()])),
    name: Type.Optional(Type.String()),
  }),
);

function errorsOf(body: unknown): { field: string; message: string; code: string }[] {
  try {
    validate(body);
  } catch (err) {
    if (err instanceof AppError) return err.options.errors ?? [];
    throw err;
  }
  return [];
}

test('a field is a reference to the one registered schema', () => {
  expect(JSON.parse(JSON.stringify(filterField('x')))).toEqual({ $ref: SEGMENT_FILTER_ID, description: 'x' });
  expect(SegmentFilterSchema.$id).toBe(SEGMENT_FILTER_ID);
});

test('both shapes pass, whatever the conditions mean (the parser judges that)', () => {
  expect(errorsOf({ filter: [{ field: 'bogus', operator: 'nope', value: { any: 'thing' }, extra: 1 }] })).toEqual([]);
  expect(
    errorsOf({ filter: { logic: 'XOR', groups: [{ filters: [], conditions: { groups: [{ conditions: null }] } }] } }),
  ).toEqual([]);
  expect(errorsOf({ other: null })).toEqual([]);
});

test('structure is checked at every depth, each problem at its own path', () => {
  expect(
    errorsOf({ filter: { groups: [{ conditions: { groups: [{ filters: [{ field: 1, operator: 'x' }] }] } }] } }),
  ).toEqual([
    { field: 'filter.groups.0.conditions.groups.0.filters.0.field', message: 'must be string', code: 'invalid_type' },
  ]);
  expect(errorsOf({ name: 3, other: { groups: [{ filters: [{ operator: 'x' }] }] } })).toEqual([
    { field: 'name', message: 'must be string', code: 'invalid_type' },
    { field: 'other.groups.0.filters.0.field', message: 'is required', code: 'invalid_type' },
  ]);
  expect(errorsOf({ filter: { groups: [{ filters: [3], conditions: 'x' }], logic: 'AND', extra: 1 } })).toEqual([
    { field: 'filter.extra', message: 'is not a recognized field', code: 'unrecognized_keys' },
    { field: 'filter.groups.0.filters.0', message: 'must be object', code: 'invalid_type' },
    { field: 'filter.groups.0.conditions', message: 'must be object', code: 'invalid_type' },
  ]);
  expect(errorsOf({ filter: { logic: 'AND' } })).toEqual([
    { field: 'filter.groups', message: 'is required', code: 'invalid_type' },
  ]);
  expect(errorsOf({ filter: 'plan=pro' })).toEqual([
    { field: 'filter', message: 'must be object', code: 'invalid_type' },
  ]);
});
