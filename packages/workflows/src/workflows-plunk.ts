/**
 * Plunk v2's workflow model, mapped onto ours (docs/api/overview.md, Plunk v2 compatibility). Plunk clients send their
 * own shapes; these functions turn them into our configuration, trigger and branch, or refuse what has no equivalent
 * here with a 422 naming the field. Our forms stay primary: a request already in our form passes unchanged.
 *
 * Mapping (Plunk → ours):
 * - workflow `eventName` / `triggerType` + `triggerConfig: {eventName}` → `trigger: {type, event}`; SCHEDULE
 *   triggers (cron) are refused.
 * - SEND_EMAIL: the step's `templateId` → `config.templateId`; `recipient: {type: CONTACT}` is the default here;
 *   a CUSTOM recipient is refused (a workflow mails its own contact).
 * - WAIT_FOR_EVENT `{eventName, timeout: seconds}` → `{event, timeout: {amount, unit: seconds}}`; no timeout
 *   (Plunk waits forever) becomes our longest wait, one year.
 * - CONDITION `{field, operator, value}` → `{filter: [...]}` of the segment language: `contact.email` → `email`,
 *   `contact.subscribed` → `subscribed`, `data.x` / `contact.data.x` → `data.x`, `event.x` / `workflow.x` (the
 *   trigger event's data) → `context.trigger.data.x`; `notEquals` / `notContains` do not match a missing value
 *   (as in Plunk; `email` and `subscribed` are never missing, and `exists` / `notExists` on them are always true /
 *   false). The multi-branch form (`mode: multi`) is refused: our CONDITION has yes and no only.
 * - UPDATE_CONTACT `{updates, subscriptionAction}` → `{data, subscribed}`.
 * - WEBHOOK `body` as a JSON value → the same JSON as our body template; Plunk's variables in its strings are
 *   renamed to ours (`{{email}}` → `{{contact.email}}`, `{{data.x}}` → `{{contact.data.x}}`, `{{event.x}}` →
 *   `{{trigger.x}}`, another top-level name → `{{contact.data.<name>}}`).
 * - transitions: `condition: {branch: yes|no|event|timeout}`, `condition: {fallback: true}` (timeout) and
 *   `waitOutcome: EVENT|TIMEOUT` → `branch`; `priority` is accepted and not stored (branches are exclusive).
 *
 * Triggers and transitions are mapped in `workflows-plunk-graph.ts`.
 *
 * @module
 */
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { MAX_WAIT_MS } from './workflows';
import type { WorkflowStepType } from '@mailroom/db/schema/workflow-states';

/** A JSON object of a request. */
export type Json = Record<string, unknown>;

/** Whether a JSON value is an object (not null, not an array). */
export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * Refuses the request: 422 `VALIDATION_ERROR` naming `field`. A declared function returning `never`, so a guard
 * before it (`if (!isObject(v)) fail(…)`) narrows what follows.
 */
export function fail(field: string, message: string, code: FieldError['code'] = 'custom'): never {
  throw validationError([{ field, message, code }]);
}

/** The Plunk operators of a binary CONDITION, all of which our filter language has. */
export const PLUNK_CONDITION_OPERATORS = [
  'equals',
  'notEquals',
  'contains',
  'notContains',
  'greaterThan',
  'lessThan',
  'greaterThanOrEqual',
  'lessThanOrEqual',
  'exists',
  'notExists',
] as const;

/**
 * The field of our filter language a Plunk CONDITION field names: `contact.email` → `email`,
 * `contact.subscribed` → `subscribed`, `contact.data.x` / `data.x` → `data.x`, `event.x` / `workflow.x` →
 * `context.trigger.data.x`. Any other field is taken as ours (`createdAt`, `context.…`) and checked by the filter
 * language.
 */
export function plunkConditionField(field: string): string {
  if (field === 'contact.email') return 'email';
  if (field === 'contact.subscribed') return 'subscribed';
  if (field.startsWith('contact.data.')) return field.slice('contact.'.length);
  const m = /^(event|workflow)\.(.+)$/.exec(field);
  if (m) return `context.trigger.data.${m[2]}`;
  return field;
}

/**
 * Fields every contact has (`email`, `subscribed`): never missing, so they take no `exists` test in our language.
 * `exists` on one is always true and `notExists` always false, as in Plunk.
 */
const ALWAYS_PRESENT = new Set(['email', 'subscribed']);

/**
 * Our filter for one Plunk test of `target` (already mapped by {@link plunkConditionField}).
 *
 * - `notEquals` / `notContains` never match a missing value in Plunk, while ours include it, so the value is also
 *   required to exist, except on a field every contact has ({@link ALWAYS_PRESENT}), where there is nothing to
 *   require (and our language has no `exists` for it).
 * - `exists` / `notExists` on a field every contact has: always true / always false. On `email` that is "contains
 *   an @" / "contains no @" (every stored address has one); on `subscribed`, "true or false" / "neither".
 */
function plunkFilter(target: string, operator: string, config: Json): Json[] | Json {
  if (ALWAYS_PRESENT.has(target) && (operator === 'exists' || operator === 'notExists')) {
    const always = operator === 'exists';
    if (target === 'email') return [{ field: 'email', operator: always ? 'contains' : 'notContains', value: '@' }];
    return always
      ? {
          logic: 'OR',
          groups: [
            { filters: [{ field: target, operator: 'equals', value: true }] },
            { filters: [{ field: target, operator: 'equals', value: false }] },
          ],
        }
      : [
          { field: target, operator: 'equals', value: true },
          { field: target, operator: 'equals', value: false },
        ];
  }
  const test = {
    field: target,
    operator,
    ...('value' in config && operator !== 'exists' && operator !== 'notExists' ? { value: config.value } : {}),
  };
  const negative = operator === 'notEquals' || operator === 'notContains';
  return negative && !ALWAYS_PRESENT.has(target) ? [{ field: target, operator: 'exists' }, test] : [test];
}

/** Plunk's CONDITION `{field, operator, value}` as our `{filter}`; errors name `<field>.field|operator|value`. */
function plunkCondition(config: Json, field: string): Json {
  if ('mode' in config) {
    fail(
      `${field}.mode`,
      'multi-branch conditions are not supported: a CONDITION here has a yes and a no branch; chain CONDITION steps instead',
    );
  }
  if ('filter' in config)
    fail(`${field}.filter`, 'give either filter (ours) or field/operator/value (Plunk), not both');
  const extra = Object.keys(config).filter((k) => !['field', 'operator', 'value'].includes(k));
  if (extra.length > 0) fail(`${field}.${extra[0]}`, 'is not a recognized field', 'unrecognized_keys');
  if (typeof config.field !== 'string' || config.field.length === 0)
    fail(`${field}.field`, 'must be a non-empty string', 'invalid_type');
  const operator = config.operator ?? 'equals';
  if (typeof operator !== 'string' || !(PLUNK_CONDITION_OPERATORS as readonly string[]).includes(operator)) {
    fail(`${field}.operator`, `must be one of ${PLUNK_CONDITION_OPERATORS.join(', ')}`, 'invalid_enum_value');
  }
  const target = plunkConditionField(config.field);
  const filter = plunkFilter(target, operator, config);
  try {
    parseSegmentFilter(filter, field, { allowContext: true });
  } catch (err) {
    const errors = (err as { options?: { errors?: FieldError[] } }).options?.errors;
    if (!errors) throw err;
    throw validationError(
      errors.map((e) => {
        const last = e.field.split('.').pop()!;
        return { ...e, field: ['field', 'operator', 'value'].includes(last) ? `${field}.${last}` : field };
      }),
    );
  }
  return { filter };
}

/** Renames Plunk's template variables in a WEBHOOK body string to ours (see the module comment). */
export function plunkWebhookTemplate(source: string): string {
  const ours = new Set(['contact', 'trigger', 'event', 'context', 'workflowId', 'executionId', 'stepId', 'stepRunId']);
  return source.replace(
    /(\{\{\{?\s*)([A-Za-z_$][\w$]*)((?:\.[\w$-]+)*)/g,
    (_all, open: string, root: string, rest: string) => {
      if (root === 'email' || root === 'id') return `${open}contact.${root}${rest}`;
      if (root === 'data') return `${open}contact.data${rest}`;
      if (root === 'event' || root === 'workflow') return `${open}trigger${rest}`;
      if (ours.has(root)) return `${open}${root}${rest}`;
      return `${open}contact.data.${root}${rest}`;
    },
  );
}

/** Renames variables in every string of a JSON value (keys included). */
function renameInJson(value: unknown): unknown {
  if (typeof value === 'string') return plunkWebhookTemplate(value);
  if (Array.isArray(value)) return value.map(renameInJson);
  if (isObject(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [plunkWebhookTemplate(k), renameInJson(v)]));
  return value;
}

/**
 * A step configuration in Plunk's form turned into ours (see the module comment); one already in our form is
 * returned as is. The result is then validated by {@link parseStepConfig}.
 *
 * @param type - the step type (ours; Plunk's TRIGGER is refused by the caller).
 * @param config - the request's configuration.
 * @param field - the request field holding it (`config`), prefix of error paths.
 * @param templateId - Plunk's step-level `templateId` (SEND_EMAIL), or undefined.
 * @throws {@link AppError} 422 `VALIDATION_ERROR` naming the field that has no equivalent here.
 */
export function fromPlunkStepConfig(
  type: WorkflowStepType,
  config: unknown,
  field: string,
  templateId?: string | null,
): unknown {
  if (templateId !== undefined && templateId !== null && type !== 'SEND_EMAIL')
    fail('templateId', 'applies to SEND_EMAIL steps only');
  if (!isObject(config)) {
    if (type === 'SEND_EMAIL' && templateId && (config === undefined || config === null)) return { templateId };
    return config;
  }
  const c: Json = { ...config };
  switch (type) {
    case 'SEND_EMAIL': {
      if (templateId) {
        if (c.templateId !== undefined && c.templateId !== templateId)
          fail('templateId', 'differs from config.templateId; give one');
        c.templateId = templateId;
      }
      if ('recipient' in c) {
        const r = c.recipient;
        if (isObject(r) && r.type === 'CUSTOM')
          fail(`${field}.recipient`, 'a workflow mails the contact it runs for; a CUSTOM recipient is not supported');
        if (!(
          r === null ||
          r === undefined ||
          (isObject(r) && r.type === 'CONTACT' && Object.keys(r).every((k) => k === 'type' || k === 'customEmail'))
        )) {
          fail(`${field}.recipient`, 'must be {type: CONTACT}', 'invalid_type');
        }
        delete c.recipient;
      }
      return c;
    }
    case 'WAIT_FOR_EVENT': {
      if (!('eventName' in c)) return c;
      if ('event' in c) fail(`${field}.eventName`, 'give either event (ours) or eventName (Plunk), not both');
      c.event = c.eventName;
      delete c.eventName;
      if (c.timeout === undefined || c.timeout === null) {
        c.timeout = { amount: MAX_WAIT_MS / 1000, unit: 'seconds' };
      } else if (typeof c.timeout === 'number') {
        if (!Number.isFinite(c.timeout) || c.timeout <= 0)
          fail(`${field}.timeout`, 'must be a positive number of seconds', 'too_small');
        if (c.timeout > MAX_WAIT_MS / 1000)
          fail(`${field}.timeout`, 'must be at most one year (31,536,000 seconds)', 'too_big');
        c.timeout = { amount: Math.ceil(c.timeout), unit: 'seconds' };
      }
      return c;
    }
    case 'CONDITION':
      return 'field' in c || 'operator' in c || 'mode' in c ? plunkCondition(c, field) : c;
    case 'UPDATE_CONTACT': {
      if (!('updates' in c) && !('subscriptionAction' in c)) return c;
      if ('updates' in c) {
        if ('data' in c) fail(`${field}.updates`, 'give either data (ours) or updates (Plunk), not both');
        if (c.updates !== undefined && c.updates !== null) c.data = c.updates;
        delete c.updates;
      }
      if ('subscriptionAction' in c) {
        const action = c.subscriptionAction;
        if ('subscribed' in c)
          fail(`${field}.subscriptionAction`, 'give either subscribed (ours) or subscriptionAction (Plunk), not both');
        if (
          action !== undefined &&
          action !== null &&
          !['none', 'subscribe', 'unsubscribe'].includes(action as string)
        ) {
          fail(`${field}.subscriptionAction`, 'must be one of none, subscribe, unsubscribe', 'invalid_enum_value');
        }
        if (action === 'subscribe' || action === 'unsubscribe') c.subscribed = action === 'subscribe';
        delete c.subscriptionAction;
      }
      return c;
    }
    case 'WEBHOOK':
      if (c.body === null) delete c.body;
      else if (c.body !== undefined && typeof c.body !== 'string') c.body = JSON.stringify(renameInJson(c.body));
      return c;
    default:
      return c;
  }
}
