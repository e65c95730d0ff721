/**
 * The filter compiler's SQL: each condition kind and the nesting of groups, as exact text and bound parameters
 * (no database). Values are always parameters; identifiers are fixed.
 */
import { PgDialect } from 'drizzle-orm/pg-core';
import { parseSegmentFilter } from '../filter-parser';
import { compileFilter, type FilterContext } from './segment-filter';

const dialect = new PgDialect();
const NOW = Date.parse('2026-01-02T03:04:05.000Z');
const PROJECT = '0190a3c1-0000-7000-8000-000000000001';
const CAMPAIGN = '0190a3c1-0000-7000-8000-00000000000c';

/** The compiled text (whitespace collapsed) and parameters of a filter given as JSON. */
function compiled(filter: unknown, ctx: Partial<FilterContext> = {}) {
  const q = dialect.sqlToQuery(
    compileFilter(parseSegmentFilter(filter, 'filter', { allowContext: true }), {
      projectId: PROJECT,
      now: NOW,
      alias: 'c',
      ...ctx,
    }),
  );
  return { sql: q.sql.replace(/\s+/g, ' '), params: q.params };
}

const one = (field: string, operator: string, value?: unknown, extra: object = {}) => [
  { field, operator, ...(value !== undefined ? { value } : {}), ...extra },
];

describe('conditions', () => {
  test.each<[string, unknown, string, unknown[]]>([
    ['email equals (lower-cased)', one('email', 'equals', 'A@B.com'), '(("c"."email_key" = $1))', ['a@b.com']],
    ['email notEquals', one('email', 'notEquals', 'a@b.com'), '(("c"."email_key" <> $1))', ['a@b.com']],
    [
      'email in',
      one('email', 'in', ['A@B.com', 'c@d.e']),
      '(("c"."email_key" = any($1::text[])))',
      [['a@b.com', 'c@d.e']],
    ],
    ['email notIn', one('email', 'notIn', ['a@b.c']), '((not ("c"."email_key" = any($1::text[]))))', [['a@b.c']]],
    ['email contains (LIKE escaped)', one('email', 'contains', 'x_%'), '(("c"."email_key" like $1))', ['%x\\_\\%%']],
    ['email notContains', one('email', 'notContains', 'x'), '(("c"."email_key" not like $1))', ['%x%']],
    ['email startsWith', one('email', 'startsWith', 'ab'), '(("c"."email_key" like $1))', ['ab%']],
    ['subscribed', one('subscribed', 'notEquals', true), '(("c"."subscribed" <> $1))', [true]],
    [
      'createdAt within',
      one('createdAt', 'within', 2, { unit: 'days' }),
      '(("c"."created_at" >= $1::timestamptz))',
      ['2025-12-31T03:04:05.000Z'],
    ],
    [
      'createdAt notWithin',
      one('createdAt', 'notWithin', 30, { unit: 'minutes' }),
      '(("c"."created_at" < $1::timestamptz))',
      ['2026-01-02T02:34:05.000Z'],
    ],
    [
      'updatedAt greaterThan a date',
      one('updatedAt', 'greaterThan', '2025-01-01'),
      '(("c"."updated_at" > $1::timestamptz))',
      ['2025-01-01T00:00:00.000Z'],
    ],
    ['data equals: containment', one('data.plan', 'equals', 'pro'), '(("c"."data" @> $1::jsonb))', ['{"plan":"pro"}']],
    [
      'data notEquals: negated containment',
      one('data.a.b', 'notEquals', 2),
      '((not ("c"."data" @> $1::jsonb)))',
      ['{"a":{"b":2}}'],
    ],
    [
      'data greaterThan a number: numbers only, through a strict SQL/JSON path',
      one('data.a.b', 'greaterThan', 5),
      '((coalesce(jsonb_path_exists("c"."data", $1::jsonpath, $2::jsonb, true), false)))',
      ['strict $."a"."b" ? (@ > $v)', '{"v":5}'],
    ],
    [
      'data lessThanOrEqual a number: keys quoted as JSON strings in the path',
      one('data.say"hi"\\', 'lessThanOrEqual', -1.5),
      '((coalesce(jsonb_path_exists("c"."data", $1::jsonpath, $2::jsonb, true), false)))',
      ['strict $."say\\"hi\\"\\\\" ? (@ <= $v)', '{"v":-1.5}'],
    ],
    [
      'data greaterThan a number under a key that #> could read as an array index: the #> form',
      one('data.items.0', 'greaterThan', 5),
      `((coalesce((case when jsonb_typeof(("c"."data" #> $1::text[])) = 'number' then ("c"."data" #> $2::text[])::numeric end) > $3::numeric, false)))`,
      [['items', '0'], ['items', '0'], 5],
    ],
    [
      'data lessThan a date: timestamps only',
      one('data.d', 'lessThan', '2025-01-01T00:00:00Z'),
      `((coalesce(mailroom_try_timestamptz(case when jsonb_typeof(("c"."data" #> $1::text[])) = 'string' then ("c"."data" #> $2::text[]) #>> '{}' end) < $3::timestamptz, false)))`,
      [['d'], ['d'], '2025-01-01T00:00:00.000Z'],
    ],
    [
      'data greaterThanOrEqual a string: strings only',
      one('data.s', 'greaterThanOrEqual', 'm'),
      `((coalesce((case when jsonb_typeof(("c"."data" #> $1::text[])) = 'string' then ("c"."data" #> $2::text[]) #>> '{}' end) >= $3::text, false)))`,
      [['s'], ['s'], 'm'],
    ],
    [
      'data in',
      one('data.tags', 'in', ['a', 1]),
      '((coalesce($1::jsonb @> jsonb_build_array(("c"."data" #> $2::text[])), false)))',
      ['["a",1]', ['tags']],
    ],
    [
      'data notIn',
      one('data.tags', 'notIn', ['a', 1, true]),
      '((not coalesce($1::jsonb @> jsonb_build_array(("c"."data" #> $2::text[])), false)))',
      ['["a",1,true]', ['tags']],
    ],
    [
      'data contains: strings, case-insensitive',
      one('data.n', 'contains', 'Ab'),
      `((coalesce((case when jsonb_typeof(("c"."data" #> $1::text[])) = 'string' then ("c"."data" #> $2::text[]) #>> '{}' end) ilike $3, false)))`,
      [['n'], ['n'], '%Ab%'],
    ],
    [
      'data exists',
      one('data.x', 'exists'),
      `((coalesce(jsonb_typeof(("c"."data" #> $1::text[])), 'null') <> 'null'))`,
      [['x']],
    ],
    [
      'data notExists',
      one('data.x', 'notExists'),
      `((coalesce(jsonb_typeof(("c"."data" #> $1::text[])), 'null') = 'null'))`,
      [['x']],
    ],
    [
      'data within: a timestamp in the window, not after now',
      one('data.x', 'within', 3, { unit: 'hours' }),
      `((coalesce(mailroom_try_timestamptz((case when jsonb_typeof(("c"."data" #> $1::text[])) = 'string' then ("c"."data" #> $2::text[]) #>> '{}' end)) >= $3::timestamptz and mailroom_try_timestamptz((case when jsonb_typeof(("c"."data" #> $4::text[])) = 'string' then ("c"."data" #> $5::text[]) #>> '{}' end)) <= $6::timestamptz, false)))`,
      [['x'], ['x'], '2026-01-02T00:04:05.000Z', ['x'], ['x'], '2026-01-02T03:04:05.000Z'],
    ],
    [
      'event exists',
      one('event.signup', 'exists'),
      '((exists (select 1 from events e where e.project_id = $1::uuid and e.contact_id = "c"."id" and e.name = $2)))',
      [PROJECT, 'signup'],
    ],
    [
      'event within: an id range (UUIDv7 of the window start)',
      one('event.signup', 'within', 1, { unit: 'days' }),
      '((exists (select 1 from events e where e.project_id = $1::uuid and e.contact_id = "c"."id" and e.name = $2 and e.id >= $3::uuid)))',
      [PROJECT, 'signup', '019b7783-3088-0000-0000-000000000000'],
    ],
    [
      'event notExists',
      one('event.signup', 'notExists'),
      '((not exists (select 1 from events e where e.project_id = $1::uuid and e.contact_id = "c"."id" and e.name = $2)))',
      [PROJECT, 'signup'],
    ],
    [
      'event count in a window: grouped IN',
      one('event.buy', 'greaterThanOrEqual', 2, { window: { value: 7, unit: 'days' } }),
      '(("c"."id" in (select e.contact_id from events e where e.project_id = $1::uuid and e.name = $2 and e.id >= $3::uuid group by e.contact_id having count(*) >= $4)))',
      [PROJECT, 'buy', '019b589d-0888-0000-0000-000000000000', 2],
    ],
    [
      'event count that zero satisfies: NOT IN, so contacts without the event match',
      one('event.buy', 'lessThan', 2),
      '(("c"."id" not in (select e.contact_id from events e where e.project_id = $1::uuid and e.name = $2 group by e.contact_id having not (count(*) < $3))))',
      [PROJECT, 'buy', 2],
    ],
    [
      'email activity of one campaign',
      one('email.opened', 'notExists', undefined, { campaignId: CAMPAIGN }),
      '((not exists (select 1 from emails m join email_events v on v.email_id = m.id where m.project_id = $1::uuid and m.contact_id = "c"."id" and v.type = $2 and m.campaign_id = $3::uuid)))',
      [PROJECT, 'opened', CAMPAIGN],
    ],
    [
      'email activity within',
      one('email.clicked', 'within', 2, { unit: 'hours' }),
      '((exists (select 1 from emails m join email_events v on v.email_id = m.id where m.project_id = $1::uuid and m.contact_id = "c"."id" and v.type = $2 and v.created_at >= $3::timestamptz)))',
      [PROJECT, 'clicked', '2026-01-02T01:04:05.000Z'],
    ],
  ])('%s', (_name, filter, sqlText, params) => {
    expect(compiled(filter)).toEqual({ sql: sqlText, params });
  });

  test("context.<path> reads the execution's context, bound as JSON", () => {
    const context = { trigger: { data: { k: 1 } } };
    expect(compiled(one('context.trigger.data.k', 'equals', 1), { context })).toEqual({
      sql: '(($1::jsonb @> $2::jsonb))',
      params: ['{"trigger":{"data":{"k":1}}}', '{"trigger":{"data":{"k":1}}}'],
    });
    // Without a context (outside a workflow) it reads an empty object.
    expect(compiled(one('context.k', 'exists')).params).toEqual(['{}', ['k']]);
  });

  test('the alias names the contacts row; it defaults to contacts', () => {
    const q = dialect.sqlToQuery(
      compileFilter(parseSegmentFilter(one('subscribed', 'equals', true), 'filter'), { projectId: PROJECT, now: NOW }),
    );
    expect(q.sql).toBe('(("contacts"."subscribed" = $1))');
  });
});

describe('groups', () => {
  test('nested groups and logic', () => {
    const filter = {
      logic: 'OR',
      groups: [
        {
          filters: [one('data.a', 'exists')[0]],
          conditions: {
            groups: [{ filters: [one('subscribed', 'equals', true)[0], one('email', 'endsWith', '.org')[0]] }],
          },
        },
        { filters: [one('data.b', 'equals', 1)[0]] },
      ],
    };
    expect(compiled(filter)).toEqual({
      sql: `((((coalesce(jsonb_typeof(("c"."data" #> $1::text[])), 'null') <> 'null')) and ((("c"."subscribed" = $2) and ("c"."email_key" like $3)))) or (("c"."data" @> $4::jsonb)))`,
      params: [['a'], true, '%.org', '{"b":1}'],
    });
  });

  test('an empty AND matches everyone, an empty OR no one', () => {
    expect(compiled([])).toEqual({ sql: 'true', params: [] });
    expect(compiled({ groups: [] })).toEqual({ sql: 'true', params: [] });
    expect(compiled({ logic: 'OR', groups: [] })).toEqual({ sql: 'false', params: [] });
    expect(compiled({ logic: 'OR', groups: [{ filters: [] }] })).toEqual({ sql: '(true)', params: [] });
  });
});
