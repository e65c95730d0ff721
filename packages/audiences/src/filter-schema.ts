/**
 * The segment filter as JSON Schema: one recursive TypeBox schema (`$id` `SegmentFilter`), registered with the
 * request validators so ajv checks a filter's shape (objects, arrays, the keys of groups) and the OpenAPI
 * document carries it once as a component that request fields reference.
 *
 * The schema holds the structure only. What depends on a condition's field (which operators apply, the type of
 * `value`, units, counts, dates, campaign ids) and the limits of {@link FILTER_LIMITS} are checked by
 * `parseSegmentFilter` (filter-parser.ts), which names every problem's path in one 422. So that those answers stay
 * whole, the schema leaves a condition's keys and values to the parser, and every message it can give for the
 * structure is the parser's own for the same place (`must be an object {logic, groups} or an array of conditions`,
 * `is not a recognized field`).
 *
 * @module
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { registerSchema } from '@mailroom/platform/validation';
import { EMAIL_ACTIVITIES, FILTER_LIMITS, FILTER_OPERATORS, FILTER_UNITS } from './segments';

/** The `$id` of the filter schema, the name of its OpenAPI component. */
export const SEGMENT_FILTER_ID = 'SegmentFilter';

/** What a filter is, as the validators word a value of another shape. */
const FILTER_SHAPE = 'an object {logic, groups} or an array of conditions';

const Condition = Type.Object(
  {
    field: Type.String({
      description:
        'email, subscribed, snoozed, topic.<topicId>, createdAt, updatedAt, snoozedUntil, data.<path>, event.<name>, or email.<activity> ' +
        `(${EMAIL_ACTIVITIES.join(', ')}); context.<path> in workflow CONDITION steps`,
    }),
    operator: Type.String({ description: `one of ${FILTER_OPERATORS.join(', ')}; which apply depends on the field` }),
    value: Type.Optional(
      Type.Unknown({
        description:
          'what the field is compared with: for data.<path> a string, number, boolean or ISO 8601 date (compared by that ' +
          'type); a non-empty list for in / notIn; the number of `unit`s for within / notWithin; the count for an ' +
          'event.<name> count comparison; absent for exists / notExists',
      }),
    ),
    unit: Type.Optional(
      Type.Unknown({ description: `${FILTER_UNITS.join(', ')}: the unit of \`value\` for within / notWithin` }),
    ),
    window: Type.Optional(
      Type.Unknown({
        description: '{value, unit}: an event.<name> count comparison counts only the events of that last period',
      }),
    ),
    campaignId: Type.Optional(
      Type.Unknown({ description: 'an email.<activity> condition restricted to one campaign (its id)' }),
    ),
  },
  { description: 'a condition {field, operator, value?, unit?, window?, campaignId?}; other keys are refused' },
);

/** A condition as JSON, before `parseSegmentFilter` checks its meaning. */
export interface FilterConditionJson {
  field: string;
  operator: string;
  value?: unknown;
  unit?: unknown;
  window?: unknown;
  campaignId?: unknown;
}

/** A filter as JSON, before `parseSegmentFilter` checks its meaning. */
export type FilterJson =
  | FilterConditionJson[]
  | { logic?: string; groups: { filters?: FilterConditionJson[]; conditions?: FilterJson | null }[] };

const ref = { $ref: SEGMENT_FILTER_ID };

/**
 * The filter language's schema: an array of conditions, else an object of groups whose `conditions` nest a filter
 * again (by reference). The two shapes are told apart by `if`/`then`/`else` on the JSON type, so a problem deep in
 * a nested filter is reported at its own path rather than as "matches no shape" at every level above it.
 */
export const SegmentFilterSchema = Type.Unsafe<FilterJson>({
  $id: SEGMENT_FILTER_ID,
  title: `Segment filter (at most ${FILTER_LIMITS.conditions} conditions, nested at most ${FILTER_LIMITS.depth} levels deep)`,
  description: FILTER_SHAPE,
  if: { type: 'array' },
  then: { type: 'array', items: Condition, description: 'conditions that must all match' },
  else: Type.Object(
    {
      logic: Type.Optional(Type.String({ description: 'AND (the default) or OR: how the groups combine' })),
      groups: Type.Array(
        Type.Object(
          {
            filters: Type.Optional(Type.Array(Condition, { description: 'conditions that must all match' })),
            conditions: Type.Optional(
              Type.Unsafe<FilterJson | null>({
                description: `a nested filter (${FILTER_SHAPE}), or null`,
                if: { type: 'null' },
                else: ref,
              }),
            ),
          },
          {
            additionalProperties: false,
            description:
              'a group: matches when all its filters and its nested conditions match; give filters, conditions or both',
          },
        ),
      ),
    },
    { additionalProperties: false },
  ),
});

/** How the language reads, for the description of a request field that takes a filter. */
export const FILTER_DESCRIPTION =
  'Segment filter: `{logic: "AND"|"OR", groups: [{filters: [condition], conditions?: <filter>}]}` or an array of ' +
  'conditions (AND). A condition is `{field, operator, value?, unit?, window?, campaignId?}`; fields `email`, ' +
  '`subscribed`, `snoozed` (true while marketing email is paused), `topic.<topicId>` (equals true/false: subscribed to the topic), `createdAt`, `updatedAt`, `snoozedUntil`, `data.<path>`, `event.<name>`, `email.sent|delivered|opened|clicked|' +
  'bounced|complained`; operators equals, notEquals, contains, notContains, startsWith, endsWith, greaterThan, ' +
  'lessThan, greaterThanOrEqual, lessThanOrEqual, in, notIn, exists, notExists, within, notWithin (units minutes, ' +
  "hours, days). `data.*` values compare by the filter value's type (number, boolean, string, ISO date). " +
  '`notEquals`/`notContains`/`notIn`/`notExists` include contacts without the key. `event.<name>` with a count ' +
  'comparison counts occurrences, optionally in `window: {value, unit}`. Invalid filters get 422 naming the path.';

/**
 * A request field holding a filter: a reference to {@link SegmentFilterSchema} (registered with the validators
 * on the first call), described by `description`.
 */
export function filterField(description: string = FILTER_DESCRIPTION): TSchema & { static: FilterJson } {
  registerSchema(SegmentFilterSchema);
  return Type.Unsafe<FilterJson>(Type.Ref(SEGMENT_FILTER_ID, { description }));
}
