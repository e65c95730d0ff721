/**
 * The segment filter as a request field, shared by segments and campaigns: its schema (the language is checked
 * further by `parseSegmentFilter`) and Plunk v2's other names for it.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { validationError } from '@mailroom/platform/errors';

/** The segment filter language as a request field (checked further by `parseSegmentFilter`). */
export const FilterField = Type.Unsafe<unknown>({
  oneOf: [{ type: 'object' }, { type: 'array' }],
  description:
    'Segment filter: `{logic: "AND"|"OR", groups: [{filters: [condition], conditions?: <filter>}]}` or an array of ' +
    'conditions (AND). A condition is `{field, operator, value?, unit?, window?, campaignId?}`; fields `email`, ' +
    '`subscribed`, `createdAt`, `updatedAt`, `data.<path>`, `event.<name>`, `email.sent|delivered|opened|clicked|' +
    'bounced|complained`; operators equals, notEquals, contains, notContains, startsWith, endsWith, greaterThan, ' +
    'lessThan, greaterThanOrEqual, lessThanOrEqual, in, notIn, exists, notExists, within, notWithin (units minutes, ' +
    'hours, days). `data.*` values compare by the filter value\'s type (number, boolean, string, ISO date). ' +
    '`notEquals`/`notContains`/`notIn`/`notExists` include contacts without the key. `event.<name>` with a count ' +
    'comparison counts occurrences, optionally in `window: {value, unit}`. Invalid filters get 422 naming the path.',
});

/** Plunk v2's names for `filter`: give one of the three. */
export const FilterAliases = {
  filters: Type.Optional(Type.Unsafe<unknown>({ ...FilterField, description: "Plunk v2's name for `filter` (same language); give only one of filter, filters, condition" })),
  condition: Type.Optional(Type.Unsafe<unknown>({ ...FilterField, description: "Plunk v2's later name for `filter` (same language); give only one of filter, filters, condition" })),
};

/**
 * The filter of a request given as `filter`, `filters` or `condition` (Plunk's names), with the field it came in
 * (so errors name the field the client sent).
 *
 * @throws {@link AppError} 422 naming the second field when more than one is given.
 */
export function requestFilter(body: { filter?: unknown; filters?: unknown; condition?: unknown }): { value?: unknown; field: string } {
  const given = (['filter', 'filters', 'condition'] as const).filter((k) => body[k] !== undefined);
  if (given.length > 1) {
    throw validationError([{ field: given[1], message: `give the filter once: ${given.join(' and ')} are the same field`, code: 'custom' }]);
  }
  const field = given[0] ?? 'filter';
  return { value: body[field as 'filter'], field };
}
