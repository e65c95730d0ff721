/**
 * Parsing a segment filter (the language of `segments.ts`) from its JSON: every problem found with its path, as
 * one 422 answer; a filter that passes is the normalized {@link SegmentFilter} tree.
 *
 * @module
 */
import { isUuid } from '@mailroom/platform/ids';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { findJsonProblem } from '@mailroom/platform/json-guard';
import {
  EMAIL_ACTIVITIES,
  FILTER_LIMITS,
  FILTER_OPERATORS,
  FILTER_UNITS,
  isIsoDate,
  type Comparison,
  type DataSource,
  type EmailActivity,
  type FilterCondition,
  type FilterOperator,
  type FilterOptions,
  type FilterScalar,
  type FilterUnit,
  type FilterWindow,
  type SegmentFilter,
} from './segments';

const COMPARISONS: readonly string[] = [
  'equals',
  'notEquals',
  'greaterThan',
  'lessThan',
  'greaterThanOrEqual',
  'lessThanOrEqual',
];
const ORDERINGS: readonly string[] = ['greaterThan', 'lessThan', 'greaterThanOrEqual', 'lessThanOrEqual'];
const TEXT_MATCHES: readonly string[] = ['contains', 'notContains', 'startsWith', 'endsWith'];
const PATH_SEGMENT = /^[^.\s]{1,100}$/;

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

class Parser {
  readonly errors: FieldError[] = [];
  private conditions = 0;

  constructor(private readonly options: FilterOptions = {}) {}

  fail(field: string, message: string, code: FieldError['code'] = 'custom'): undefined {
    this.errors.push({ field, message, code });
    return undefined;
  }

  filter(input: unknown, path: string, depth: number): SegmentFilter | undefined {
    if (depth > FILTER_LIMITS.depth)
      return this.fail(path, `nests deeper than ${FILTER_LIMITS.depth} levels`, 'too_big');
    if (Array.isArray(input)) return this.conditionList(input, path, 'AND');
    if (!isObject(input))
      return this.fail(path, 'must be an object {logic, groups} or an array of conditions', 'invalid_type');
    this.unknownKeys(input, ['logic', 'groups'], path);
    const logic = input.logic ?? 'AND';
    if (logic !== 'AND' && logic !== 'OR') this.fail(`${path}.logic`, 'must be one of: AND, OR', 'invalid_enum_value');
    if (!Array.isArray(input.groups)) return this.fail(`${path}.groups`, 'must be an array of groups', 'invalid_type');
    const children: SegmentFilter[] = [];
    input.groups.forEach((g, i) => {
      const gp = `${path}.groups.${i}`;
      if (!isObject(g)) return this.fail(gp, 'must be an object {filters, conditions?}', 'invalid_type');
      this.unknownKeys(g, ['filters', 'conditions'], gp);
      const parts: SegmentFilter[] = [];
      if (g.filters !== undefined) {
        if (!Array.isArray(g.filters))
          return this.fail(`${gp}.filters`, 'must be an array of conditions', 'invalid_type');
        const list = this.conditionList(g.filters, `${gp}.filters`, 'AND');
        if (list) parts.push(list);
      }
      if (g.conditions !== undefined && g.conditions !== null) {
        const nested = this.filter(g.conditions, `${gp}.conditions`, depth + 1);
        if (nested) parts.push(nested);
      }
      if (g.filters === undefined && (g.conditions === undefined || g.conditions === null)) {
        return this.fail(gp, 'needs filters or conditions', 'invalid_type');
      }
      children.push(parts.length === 1 ? parts[0] : { kind: 'group', logic: 'AND', children: parts });
      return undefined;
    });
    return { kind: 'group', logic: logic === 'OR' ? 'OR' : 'AND', children };
  }

  private unknownKeys(obj: Record<string, unknown>, allowed: string[], path: string): void {
    for (const k of Object.keys(obj))
      if (!allowed.includes(k)) this.fail(`${path}.${k}`, 'is not a recognized field', 'unrecognized_keys');
  }

  private conditionList(list: unknown[], path: string, logic: 'AND' | 'OR'): SegmentFilter | undefined {
    const children: SegmentFilter[] = [];
    list.forEach((c, i) => {
      const cond = this.condition(c, `${path}.${i}`);
      if (cond) children.push(cond);
    });
    return { kind: 'group', logic, children };
  }

  private window(
    obj: Record<string, unknown>,
    path: string,
    amountKey: string,
    unitKey: string,
  ): FilterWindow | undefined {
    const amount = obj[amountKey];
    const unit = obj[unitKey];
    let ok = true;
    if (typeof amount !== 'number' || !Number.isInteger(amount) || amount < 1 || amount > 100_000) {
      this.fail(`${path}.${amountKey}`, 'must be a whole number of units, 1–100000', 'invalid_type');
      ok = false;
    }
    if (typeof unit !== 'string' || !(FILTER_UNITS as readonly string[]).includes(unit)) {
      this.fail(`${path}.${unitKey}`, `must be one of: ${FILTER_UNITS.join(', ')}`, 'invalid_enum_value');
      ok = false;
    }
    return ok ? { amount: amount as number, unit: unit as FilterUnit } : undefined;
  }

  private text(value: unknown, path: string): string | undefined {
    if (typeof value !== 'string') return this.fail(path, 'must be a string', 'invalid_type');
    if (value.length > FILTER_LIMITS.stringLength)
      return this.fail(path, `must be at most ${FILTER_LIMITS.stringLength} characters`, 'too_big');
    return value;
  }

  private scalar(value: unknown, path: string, allowDate: boolean): FilterScalar | undefined {
    if (typeof value === 'number') {
      return Number.isFinite(value)
        ? { type: 'number', value }
        : this.fail(path, 'must be a finite number', 'invalid_type');
    }
    if (typeof value === 'boolean') return { type: 'boolean', value };
    if (typeof value === 'string') {
      if (value.length > FILTER_LIMITS.stringLength)
        return this.fail(path, `must be at most ${FILTER_LIMITS.stringLength} characters`, 'too_big');
      if (allowDate && isIsoDate(value)) return { type: 'date', value: new Date(value) };
      return { type: 'string', value };
    }
    return this.fail(path, 'must be a string, number or boolean', 'invalid_type');
  }

  private date(value: unknown, path: string): Date | undefined {
    if (typeof value !== 'string' || !isIsoDate(value))
      return this.fail(path, 'must be an ISO 8601 date or date-time', 'invalid_string');
    return new Date(value);
  }

  private list(value: unknown, path: string): unknown[] | undefined {
    if (!Array.isArray(value) || value.length === 0)
      return this.fail(path, 'must be a non-empty array', 'invalid_type');
    if (value.length > FILTER_LIMITS.inValues)
      return this.fail(path, `must have at most ${FILTER_LIMITS.inValues} values`, 'too_big');
    return value as unknown[];
  }

  condition(input: unknown, path: string): FilterCondition | undefined {
    if (++this.conditions > FILTER_LIMITS.conditions) {
      return this.conditions === FILTER_LIMITS.conditions + 1
        ? this.fail(path, `a filter may hold at most ${FILTER_LIMITS.conditions} conditions`, 'too_big')
        : undefined;
    }
    if (!isObject(input))
      return this.fail(path, 'must be a condition object {field, operator, value?}', 'invalid_type');
    this.unknownKeys(input, ['field', 'operator', 'value', 'unit', 'window', 'campaignId'], path);
    const { field, operator } = input;
    if (typeof field !== 'string' || field.length === 0)
      return this.fail(`${path}.field`, 'must be a non-empty string', 'invalid_type');
    if (typeof operator !== 'string' || !(FILTER_OPERATORS as readonly string[]).includes(operator)) {
      return this.fail(`${path}.operator`, `must be one of: ${FILTER_OPERATORS.join(', ')}`, 'invalid_enum_value');
    }
    const op = operator as FilterOperator;
    const vp = `${path}.value`;
    const unsupported = (what: string) =>
      this.fail(`${path}.operator`, `${op} is not supported for ${what}`, 'invalid_enum_value');
    if (input.window !== undefined && !field.startsWith('event.'))
      this.fail(`${path}.window`, 'applies to event.<name> count conditions only', 'unrecognized_keys');
    if (input.campaignId !== undefined && !field.startsWith('email.'))
      this.fail(`${path}.campaignId`, 'applies to email.<activity> conditions only', 'unrecognized_keys');

    if (field === 'email') {
      if (op === 'in' || op === 'notIn') {
        const values = this.list(input.value, vp);
        if (!values) return undefined;
        const texts = values.map((v, i) => this.text(v, `${vp}.${i}`));
        // Whole addresses: surrounding whitespace is not part of one (as everywhere an address is taken).
        return texts.every((t) => t !== undefined)
          ? { kind: 'email', op, values: texts.map((t) => t.trim().toLowerCase()) }
          : undefined;
      }
      if (op !== 'equals' && op !== 'notEquals' && !TEXT_MATCHES.includes(op)) return unsupported('email');
      const value = this.text(input.value, vp);
      const literal = op === 'equals' || op === 'notEquals';
      return value === undefined
        ? undefined
        : { kind: 'email', op: op as 'equals', value: (literal ? value.trim() : value).toLowerCase() };
    }
    if (field === 'subscribed' || field === 'snoozed') {
      if (op !== 'equals' && op !== 'notEquals') return unsupported(field);
      if (typeof input.value !== 'boolean') return this.fail(vp, 'must be true or false', 'invalid_type');
      return { kind: field, op, value: input.value };
    }
    if (field.startsWith('topic.')) {
      const topicId = field.slice(6);
      if (!isUuid(topicId))
        return this.fail(`${path}.field`, 'must be topic.<topicId> with a topic id', 'invalid_string');
      if (op !== 'equals' && op !== 'notEquals') return unsupported('topic.<topicId>');
      if (typeof input.value !== 'boolean') return this.fail(vp, 'must be true or false', 'invalid_type');
      return { kind: 'topic', topicId, op, value: input.value };
    }
    if (field === 'createdAt' || field === 'updatedAt' || field === 'snoozedUntil') {
      if (op === 'within' || op === 'notWithin') {
        const window = this.window(input, path, 'value', 'unit');
        return window && { kind: 'timestamp', column: field, op, window };
      }
      if (op === 'notEquals' || !COMPARISONS.includes(op)) return unsupported(field);
      const value = this.date(input.value, vp);
      return value && { kind: 'timestamp', column: field, op: op as 'equals', value };
    }
    const dataRoot = field.startsWith('data.')
      ? 'data'
      : this.options.allowContext && field.startsWith('context.')
        ? 'context'
        : undefined;
    if (dataRoot) {
      const segments = field.slice(dataRoot.length + 1).split('.');
      const source: DataSource = dataRoot === 'context' ? { root: 'context' } : {};
      if (segments.length > FILTER_LIMITS.pathSegments || !segments.every((s) => PATH_SEGMENT.test(s))) {
        return this.fail(
          `${path}.field`,
          `data path must be 1–${FILTER_LIMITS.pathSegments} dot-separated keys without spaces`,
          'invalid_string',
        );
      }
      if (op === 'exists' || op === 'notExists') return { kind: 'data', ...source, path: segments, op };
      if (op === 'within' || op === 'notWithin') {
        const window = this.window(input, path, 'value', 'unit');
        return window && { kind: 'data', ...source, path: segments, op, window };
      }
      if (op === 'in' || op === 'notIn') {
        const values = this.list(input.value, vp);
        if (!values) return undefined;
        const bad = values.findIndex((v) => !['string', 'number', 'boolean'].includes(typeof v));
        if (bad >= 0) return this.fail(`${vp}.${bad}`, 'must be a string, number or boolean', 'invalid_type');
        return { kind: 'data', ...source, path: segments, op, values: values as (string | number | boolean)[] };
      }
      if (TEXT_MATCHES.includes(op)) {
        const value = this.text(input.value, vp);
        return value === undefined
          ? undefined
          : { kind: 'data', ...source, path: segments, op: op as 'contains', value };
      }
      if (input.value === null || input.value === undefined) {
        return this.fail(vp, `is required (use exists / notExists to test for a missing key)`, 'invalid_type');
      }
      const value = this.scalar(input.value, vp, ORDERINGS.includes(op));
      if (!value) return undefined;
      if (ORDERINGS.includes(op) && value.type === 'boolean')
        return this.fail(vp, `${op} needs a number, string or date`, 'invalid_type');
      return { kind: 'data', ...source, path: segments, op: op as 'equals', value };
    }
    if (field.startsWith('event.')) {
      const name = field.slice(6);
      if (name.length === 0 || name.length > 255)
        return this.fail(`${path}.field`, 'event name must be 1–255 characters', 'invalid_string');
      if (op === 'exists' || op === 'notExists') return { kind: 'event', name, op };
      if (op === 'within' || op === 'notWithin') {
        const window = this.window(input, path, 'value', 'unit');
        return window && { kind: 'event', name, op, window };
      }
      if (!COMPARISONS.includes(op))
        return unsupported('event.<name> (use exists, notExists, within, notWithin or a count comparison)');
      const count = input.value;
      if (typeof count !== 'number' || !Number.isInteger(count))
        return this.fail(vp, 'must be a whole number (the event count)', 'invalid_type');
      // Compared with count(*), a bigint: anything past 2^53 - 1 is neither exact here nor in range there.
      if (count < 0) return this.fail(vp, 'must be at least 0 (the event count)', 'too_small');
      if (count > FILTER_LIMITS.maxCount)
        return this.fail(vp, `must be at most ${FILTER_LIMITS.maxCount} (the event count)`, 'too_big');
      let window: FilterWindow | undefined;
      if (input.window !== undefined) {
        if (!isObject(input.window)) return this.fail(`${path}.window`, 'must be {value, unit}', 'invalid_type');
        window = this.window(input.window, `${path}.window`, 'value', 'unit');
        if (!window) return undefined;
      }
      return { kind: 'eventCount', name, op: op as Comparison, count, ...(window ? { window } : {}) };
    }
    if (field.startsWith('email.')) {
      const activity = field.slice(6);
      if (!(EMAIL_ACTIVITIES as readonly string[]).includes(activity)) {
        return this.fail(
          `${path}.field`,
          `email activity must be one of: ${EMAIL_ACTIVITIES.map((a) => `email.${a}`).join(', ')}`,
          'invalid_enum_value',
        );
      }
      let campaignId: string | undefined;
      if (input.campaignId !== undefined) {
        if (typeof input.campaignId !== 'string' || !isUuid(input.campaignId))
          return this.fail(`${path}.campaignId`, 'must be a campaign id', 'invalid_string');
        campaignId = input.campaignId;
      }
      const base = {
        kind: 'emailActivity' as const,
        activity: activity as EmailActivity,
        ...(campaignId ? { campaignId } : {}),
      };
      if (op === 'exists' || op === 'notExists') return { ...base, op };
      if (op === 'within' || op === 'notWithin') {
        const window = this.window(input, path, 'value', 'unit');
        return window && { ...base, op, window };
      }
      return unsupported('email.<activity> (use exists, notExists, within or notWithin)');
    }
    const contextField = this.options.allowContext ? ', context.<path>' : '';
    return this.fail(
      `${path}.field`,
      `must be email, subscribed, snoozed, topic.<topicId>, createdAt, updatedAt, snoozedUntil, data.<path>${contextField}, event.<name> or email.<activity>`,
      'invalid_enum_value',
    );
  }
}

/**
 * Validates a filter (either accepted shape) into a {@link SegmentFilter}.
 *
 * @param input - the parsed JSON.
 * @param field - the name of the request field holding it, used as the prefix of error paths
 *   (`audienceFilter.groups.0.filters.1.operator`).
 * @param options - {@link FilterOptions}.
 * @throws {@link AppError} 422 `VALIDATION_ERROR` listing every problem with its path; U+0000 anywhere or
 *   nesting deeper than `MAX_JSON_DEPTH` is refused first (a filter also arrives as `?filter=` JSON text, which
 *   no body guard has seen).
 */
export function parseSegmentFilter(input: unknown, field: string, options: FilterOptions = {}): SegmentFilter {
  const hostile = findJsonProblem(input, field);
  if (hostile) throw validationError([hostile]);
  const parser = new Parser(options);
  const filter = parser.filter(input, field, 1);
  if (parser.errors.length > 0 || !filter)
    throw validationError(parser.errors.length ? parser.errors : [{ field, message: 'is invalid', code: 'custom' }]);
  return filter;
}
