/**
 * The segment filter as a request field, shared by segments and campaigns: the language's schema
 * (`@mailroom/audiences/filter-schema`) under our name and Plunk v2's other names for it.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { validationError } from '@mailroom/platform/errors';
import { filterField, type FilterJson } from '@mailroom/audiences/filter-schema';

/** The segment filter language as a request field (its shape checked by ajv, its meaning by `parseSegmentFilter`). */
export const FilterField = filterField();

/** Plunk v2's names for `filter`: give one of the three. */
export const FilterAliases = {
  filters: Type.Optional(
    filterField("Plunk v2's name for `filter` (same language); give only one of filter, filters, condition"),
  ),
  condition: Type.Optional(
    filterField("Plunk v2's later name for `filter` (same language); give only one of filter, filters, condition"),
  ),
};

/**
 * The filter of a request given as `filter`, `filters` or `condition` (Plunk's names), with the field it came in
 * (so errors name the field the client sent).
 *
 * @throws {@link AppError} 422 naming the second field when more than one is given.
 */
export function requestFilter(body: { filter?: FilterJson; filters?: FilterJson; condition?: FilterJson }): {
  value?: FilterJson;
  field: string;
} {
  const given = (['filter', 'filters', 'condition'] as const).filter((k) => body[k] !== undefined);
  if (given.length > 1) {
    throw validationError([
      { field: given[1], message: `give the filter once: ${given.join(' and ')} are the same field`, code: 'custom' },
    ]);
  }
  const field = given[0] ?? 'filter';
  return { value: body[field as 'filter'], field };
}
