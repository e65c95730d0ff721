/**
 * The filter parser: the typed tree it builds from either accepted shape, and the 422 it gives (every problem,
 * each at its path under the request field's name).
 */
import { AppError } from '@mailroom/platform/errors';
import { parseSegmentFilter } from './filter-parser';

const CAMPAIGN = '0190a3c1-0000-7000-8000-00000000000c';

/** The errors of a filter the parser refuses. */
function refusal(input: unknown, field = 'filter'): { field: string; code: string }[] {
  try {
    parseSegmentFilter(input, field);
  } catch (err) {
    if (err instanceof AppError) return (err.options.errors ?? []).map((e) => ({ field: e.field, code: e.code }));
    throw err;
  }
  throw new Error('accepted');
}

describe('the typed tree', () => {
  test('an array of conditions is an AND group', () => {
    expect(
      parseSegmentFilter(
        [
          { field: 'email', operator: 'equals', value: 'A@B.com' },
          { field: 'subscribed', operator: 'equals', value: true },
        ],
        'filter',
      ),
    ).toEqual({
      kind: 'group',
      logic: 'AND',
      children: [
        { kind: 'email', op: 'equals', value: 'a@b.com' },
        { kind: 'subscribed', op: 'equals', value: true },
      ],
    });
  });

  test('groups: one part stays itself, filters and nested conditions become an AND', () => {
    const tree = parseSegmentFilter(
      {
        logic: 'OR',
        groups: [
          { filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] },
          {
            filters: [{ field: 'data.seats', operator: 'greaterThan', value: 5 }],
            conditions: [{ field: 'event.signup', operator: 'exists' }],
          },
          { conditions: null, filters: [] },
        ],
      },
      'filter',
    );
    expect(tree).toEqual({
      kind: 'group',
      logic: 'OR',
      children: [
        {
          kind: 'group',
          logic: 'AND',
          children: [{ kind: 'data', path: ['plan'], op: 'equals', value: { type: 'string', value: 'pro' } }],
        },
        {
          kind: 'group',
          logic: 'AND',
          children: [
            {
              kind: 'group',
              logic: 'AND',
              children: [{ kind: 'data', path: ['seats'], op: 'greaterThan', value: { type: 'number', value: 5 } }],
            },
            { kind: 'group', logic: 'AND', children: [{ kind: 'event', name: 'signup', op: 'exists' }] },
          ],
        },
        { kind: 'group', logic: 'AND', children: [] },
      ],
    });
  });

  test('each condition kind', () => {
    const cond = (c: object, options = {}) =>
      (parseSegmentFilter([c], 'filter', options) as { children: unknown[] }).children[0];
    expect(cond({ field: 'email', operator: 'in', value: ['A@x.y'] })).toEqual({
      kind: 'email',
      op: 'in',
      values: ['a@x.y'],
    });
    expect(cond({ field: 'createdAt', operator: 'within', value: 2, unit: 'days' })).toEqual({
      kind: 'timestamp',
      column: 'createdAt',
      op: 'within',
      window: { amount: 2, unit: 'days' },
    });
    expect(cond({ field: 'updatedAt', operator: 'lessThan', value: '2025-01-01' })).toEqual({
      kind: 'timestamp',
      column: 'updatedAt',
      op: 'lessThan',
      value: new Date('2025-01-01'),
    });
    // Ordering compares ISO dates as dates; equality keeps them as strings.
    expect(cond({ field: 'data.at', operator: 'greaterThan', value: '2025-01-01' })).toEqual({
      kind: 'data',
      path: ['at'],
      op: 'greaterThan',
      value: { type: 'date', value: new Date('2025-01-01') },
    });
    expect(cond({ field: 'data.at', operator: 'equals', value: '2025-01-01' })).toEqual({
      kind: 'data',
      path: ['at'],
      op: 'equals',
      value: { type: 'string', value: '2025-01-01' },
    });
    expect(cond({ field: 'data.a.b', operator: 'notIn', value: ['x', 1, false] })).toEqual({
      kind: 'data',
      path: ['a', 'b'],
      op: 'notIn',
      values: ['x', 1, false],
    });
    expect(cond({ field: 'data.n', operator: 'startsWith', value: 'Ab' })).toEqual({
      kind: 'data',
      path: ['n'],
      op: 'startsWith',
      value: 'Ab',
    });
    expect(cond({ field: 'event.buy', operator: 'within', value: 3, unit: 'hours' })).toEqual({
      kind: 'event',
      name: 'buy',
      op: 'within',
      window: { amount: 3, unit: 'hours' },
    });
    expect(cond({ field: 'event.buy', operator: 'equals', value: 0, window: { value: 7, unit: 'days' } })).toEqual({
      kind: 'eventCount',
      name: 'buy',
      op: 'equals',
      count: 0,
      window: { amount: 7, unit: 'days' },
    });
    expect(cond({ field: 'email.opened', operator: 'exists', campaignId: CAMPAIGN })).toEqual({
      kind: 'emailActivity',
      activity: 'opened',
      op: 'exists',
      campaignId: CAMPAIGN,
    });
    expect(cond({ field: 'context.trigger.data.k', operator: 'exists' }, { allowContext: true })).toEqual({
      kind: 'data',
      root: 'context',
      path: ['trigger', 'data', 'k'],
      op: 'exists',
    });
  });
});

describe('refusals', () => {
  test('every problem at its path, under the field the filter came in', () => {
    expect(
      refusal(
        {
          logic: 'XOR',
          groups: [
            {
              filters: [
                { field: 'data.plan', operator: 'like' },
                { field: 'bogus', operator: 'equals', value: 1 },
              ],
              extra: 1,
            },
          ],
        },
        'audienceFilter',
      ),
    ).toEqual([
      { field: 'audienceFilter.logic', code: 'invalid_enum_value' },
      { field: 'audienceFilter.groups.0.extra', code: 'unrecognized_keys' },
      { field: 'audienceFilter.groups.0.filters.0.operator', code: 'invalid_enum_value' },
      { field: 'audienceFilter.groups.0.filters.1.field', code: 'invalid_enum_value' },
    ]);
  });

  test('context.<path> only where allowed; limits of depth and size', () => {
    expect(refusal([{ field: 'context.a', operator: 'exists' }])).toEqual([
      { field: 'filter.0.field', code: 'invalid_enum_value' },
    ]);
    let deep: unknown = [];
    for (let i = 0; i < 6; i++) deep = { groups: [{ conditions: deep }] };
    expect(refusal(deep)[0].code).toBe('too_big');
    const many = Array.from({ length: 51 }, () => ({ field: 'subscribed', operator: 'equals', value: true }));
    expect(refusal(many)).toEqual([{ field: 'filter.50', code: 'too_big' }]);
  });
});
