/**
 * Workflows: the step catalog (each type's configuration schema), durations and the graph rules. The rules of
 * edits (enable, piecewise and whole-graph changes, manual starts, cancels) are in graph/*.ts, the engine that runs
 * executions in engine/*.ts.
 *
 * A workflow is a graph: the trigger (EVENT: an event name; MANUAL: started through the API) leads to a first
 * step; each step leads on along a branch:
 * - `next` for SEND_EMAIL, DELAY, WEBHOOK and UPDATE_CONTACT (a missing `next` ends the execution COMPLETED);
 * - `yes` / `no` for CONDITION, `event` / `timeout` for WAIT_FOR_EVENT (both required);
 * - none for EXIT (ends the execution EXITED with its reason).
 *
 * @module
 */
import { emailTagErrors, EmailTagsSchema, type EmailTag } from '@mailroom/platform/email-tags';
import { WORKFLOW_STEP_TYPES, type WorkflowStepType, type WorkflowBranch } from '@mailroom/db/schema/workflow-states';
import { Type, type Static } from '@sinclair/typebox';
import { EmailAddress } from '@mailroom/contacts/contacts';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { dataValidator } from '@mailroom/platform/validation';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { templateSyntaxErrors } from '@mailroom/mail/templates';

/** Trigger types. */
export const WORKFLOW_TRIGGER_TYPES = ['EVENT', 'MANUAL'] as const;
export type WorkflowTriggerType = (typeof WORKFLOW_TRIGGER_TYPES)[number];

/** Duration units of DELAY and WAIT_FOR_EVENT. */
export const DURATION_UNITS = ['seconds', 'minutes', 'hours', 'days', 'weeks'] as const;
export type DurationUnit = (typeof DURATION_UNITS)[number];

const UNIT_MS: Record<DurationUnit, number> = {
  seconds: 1000,
  minutes: 60_000,
  hours: 3_600_000,
  days: 86_400_000,
  weeks: 604_800_000,
};

/** The longest DELAY or WAIT_FOR_EVENT timeout: one year (365 days), in ms. */
export const MAX_WAIT_MS = 365 * 86_400_000;

/** An amount of time as configured: `{ amount, unit }`. */
export const Duration = Type.Object(
  {
    amount: Type.Integer({ minimum: 1, maximum: 31_536_000, description: 'a whole number of units' }),
    unit: Type.Unsafe<DurationUnit>({ type: 'string', enum: [...DURATION_UNITS] }),
  },
  { additionalProperties: false },
);
export type Duration = Static<typeof Duration>;

/** A duration in ms. */
export function durationMs(d: Duration): number {
  return d.amount * UNIT_MS[d.unit];
}

/** HTTP methods of a WEBHOOK step. */
export const WEBHOOK_STEP_METHODS = ['POST', 'PUT', 'PATCH', 'GET', 'DELETE'] as const;

/** Header names a WEBHOOK step may not set (they are ours, or the transport's). */
const RESERVED_HEADERS =
  /^(host|content-length|connection|transfer-encoding|webhook-id|webhook-timestamp|webhook-signature|idempotency-key)$/i;

/** Configuration schema of each step type. */
export const STEP_CONFIG_SCHEMAS = {
  SEND_EMAIL: Type.Object(
    {
      templateId: Type.String({ format: 'uuid', description: 'a template of this project' }),
      templateVersion: Type.Optional(
        Type.Integer({
          minimum: 1,
          maximum: 2_147_483_647,
          description: 'pin this published version of the template; omitted: the latest published version at each send',
        }),
      ),
      from: Type.Optional(EmailAddress),
      fromName: Type.Optional(Type.String({ maxLength: 200 })),
      replyTo: Type.Optional(EmailAddress),
      data: Type.Optional(
        Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), { description: 'extra template variables' }),
      ),
      topicId: Type.Optional(
        Type.String({
          format: 'uuid',
          description:
            "a topic of this project: a MARKETING template's email goes only to a contact subscribed to it (else the step is SKIPPED), and its one-click unsubscribe leaves that topic only; a TRANSACTIONAL template ignores it",
        }),
      ),
      tags: Type.Optional(EmailTagsSchema),
    },
    { additionalProperties: false },
  ),
  DELAY: Duration,
  WAIT_FOR_EVENT: Type.Object(
    {
      event: Type.String({ minLength: 1, maxLength: 255, description: 'the event name to wait for' }),
      timeout: Duration,
    },
    { additionalProperties: false },
  ),
  CONDITION: Type.Object(
    { filter: Type.Unknown({ description: 'a segment filter; may also test context.<path>' }) },
    { additionalProperties: false },
  ),
  WEBHOOK: Type.Object(
    {
      url: Type.String({ format: 'uri', maxLength: 2048, pattern: '^https?://' }),
      method: Type.Optional(
        Type.Unsafe<(typeof WEBHOOK_STEP_METHODS)[number]>({ type: 'string', enum: [...WEBHOOK_STEP_METHODS] }),
      ),
      headers: Type.Optional(
        Type.Record(
          Type.String({ pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,100}$" }),
          Type.String({ maxLength: 2000, pattern: '^[^\\r\\n]*$' }),
          { maxProperties: 20 },
        ),
      ),
      body: Type.Optional(
        Type.String({
          maxLength: 65_536,
          description:
            'a template rendered against contact, trigger, event and context, strings JSON-escaped; default: a JSON summary. ' +
            'Write `{{n}} }`, not `{{n}}}`, before a closing brace (three braces close a raw {{{…}}} tag)',
        }),
      ),
      timeoutMs: Type.Optional(Type.Integer({ minimum: 100, maximum: 30_000, default: 10_000 })),
      retries: Type.Optional(Type.Integer({ minimum: 0, maximum: 10, default: 3 })),
    },
    { additionalProperties: false },
  ),
  UPDATE_CONTACT: Type.Object(
    {
      data: Type.Optional(
        Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.Unknown(), {
          description: 'merged into the contact; null removes a key; an empty string is ignored',
        }),
      ),
      subscribed: Type.Optional(Type.Boolean()),
    },
    { additionalProperties: false, minProperties: 1 },
  ),
  EXIT: Type.Object({ reason: Type.Optional(Type.String({ maxLength: 500 })) }, { additionalProperties: false }),
} as const;

/** The configuration of a step of type `T`. */
export type StepConfig<T extends WorkflowStepType> = Static<(typeof STEP_CONFIG_SCHEMAS)[T]>;

const configValidators = Object.fromEntries(
  WORKFLOW_STEP_TYPES.map((t) => [t, dataValidator(STEP_CONFIG_SCHEMAS[t])]),
) as { [T in WorkflowStepType]: ReturnType<typeof dataValidator<(typeof STEP_CONFIG_SCHEMAS)[T]>> };

/**
 * Validates a step's configuration for its type: the schema, then the rules a schema cannot say (durations up to
 * a year, the CONDITION filter, reserved webhook headers, SEND_EMAIL tags given twice or reserved).
 *
 * @param field - the request field holding the config (`config`, `steps.2.config`), prefix of error paths.
 * @throws {@link AppError} 422 `VALIDATION_ERROR` naming each bad field.
 */
export function parseStepConfig<T extends WorkflowStepType>(type: T, config: unknown, field: string): StepConfig<T> {
  const checked = configValidators[type](config ?? {});
  if (!checked.ok)
    throw validationError(
      checked.errors.map((e) => ({ ...e, field: e.field && e.field !== '(root)' ? `${field}.${e.field}` : field })),
    );
  const value = checked.value as Record<string, unknown>;
  const errors: FieldError[] = [];
  if (type === 'DELAY' && durationMs(value as Duration) > MAX_WAIT_MS)
    errors.push({ field, message: 'must be at most one year', code: 'too_big' });
  if (type === 'WAIT_FOR_EVENT' && durationMs(value.timeout as Duration) > MAX_WAIT_MS) {
    errors.push({ field: `${field}.timeout`, message: 'must be at most one year', code: 'too_big' });
  }
  if (type === 'SEND_EMAIL') errors.push(...emailTagErrors(value.tags as EmailTag[] | undefined, `${field}.tags`));
  if (type === 'CONDITION') parseSegmentFilter(value.filter, `${field}.filter`, { allowContext: true });
  if (type === 'WEBHOOK') {
    if (typeof value.body === 'string') errors.push(...templateSyntaxErrors({ [`${field}.body`]: value.body }));
    for (const name of Object.keys((value.headers as Record<string, string>) ?? {})) {
      if (RESERVED_HEADERS.test(name))
        errors.push({ field: `${field}.headers.${name}`, message: 'is set by the platform', code: 'custom' });
    }
  }
  if (errors.length > 0) throw validationError(errors);
  return value;
}

/** The branches a step of `type` may leave by. */
export function branchesOf(type: WorkflowStepType): readonly WorkflowBranch[] {
  if (type === 'CONDITION') return ['yes', 'no'];
  if (type === 'WAIT_FOR_EVENT') return ['event', 'timeout'];
  if (type === 'EXIT') return [];
  return ['next'];
}

/** A step as the graph rules see it. */
export interface GraphStep {
  /** Id or client reference. */
  ref: string;
  type: WorkflowStepType;
}

/** An edge as the graph rules see it; `from` null is the trigger. */
export interface GraphTransition {
  from: string | null;
  to: string;
  branch: WorkflowBranch;
}

/** A rule the graph breaks: the step or transition (by index) it concerns, or the graph as a whole. */
export interface GraphProblem {
  at: { step: number } | { transition: number } | null;
  message: string;
}

/**
 * Checks a whole graph: one transition from the trigger, edges between known steps along branches their step
 * has, one edge per (step, branch), complete branches (CONDITION: yes and no; WAIT_FOR_EVENT: event and
 * timeout), every step reachable from the trigger, and no cycle that does not pass a DELAY or WAIT_FOR_EVENT.
 *
 * @returns the problems, empty when the graph can run.
 */
export function graphProblems(steps: readonly GraphStep[], transitions: readonly GraphTransition[]): GraphProblem[] {
  const problems: GraphProblem[] = [];
  const index = new Map(steps.map((s, i) => [s.ref, i]));
  const out = new Map<string | null, Map<WorkflowBranch, string>>();
  transitions.forEach((t, i) => {
    const at = { transition: i };
    const from = t.from === null ? undefined : steps[index.get(t.from) ?? -1];
    if (t.from !== null && !from) return problems.push({ at, message: `from: no step ${t.from} in this workflow` });
    if (!index.has(t.to)) return problems.push({ at, message: `to: no step ${t.to} in this workflow` });
    const allowed = from ? branchesOf(from.type) : (['next'] as const);
    if (!allowed.includes(t.branch)) {
      return problems.push({
        at,
        message: from
          ? allowed.length === 0
            ? `an EXIT step has no outgoing transitions`
            : `branch must be one of ${allowed.join(', ')} for a ${from.type} step`
          : 'the trigger leads on by branch next',
      });
    }
    const edges = out.get(t.from) ?? new Map<WorkflowBranch, string>();
    if (edges.has(t.branch))
      return problems.push({ at, message: `a second ${t.branch} transition from ${t.from ?? 'the trigger'}` });
    edges.set(t.branch, t.to);
    out.set(t.from, edges);
    return undefined;
  });
  const entry = out.get(null)?.get('next');
  if (!entry) problems.push({ at: null, message: 'the trigger needs a transition to the first step' });
  steps.forEach((s, i) => {
    const edges = out.get(s.ref);
    for (const b of branchesOf(s.type)) {
      if (b !== 'next' && !edges?.has(b))
        problems.push({ at: { step: i }, message: `a ${s.type} step needs a ${b} transition` });
    }
  });
  // Reachability from the trigger.
  const seen = new Set<string>();
  const stack = entry ? [entry] : [];
  while (stack.length > 0) {
    const ref = stack.pop()!;
    if (seen.has(ref)) continue;
    seen.add(ref);
    for (const to of out.get(ref)?.values() ?? []) stack.push(to);
  }
  if (entry)
    steps.forEach(
      (s, i) => !seen.has(s.ref) && problems.push({ at: { step: i }, message: 'is not reachable from the trigger' }),
    );
  // A cycle without a delay is a cycle among the steps that do not wait.
  const waits = (ref: string) => {
    const t = steps[index.get(ref)!].type;
    return t === 'DELAY' || t === 'WAIT_FOR_EVENT';
  };
  const state = new Map<string, 'open' | 'done'>();
  const cyclic = (ref: string): boolean => {
    if (state.get(ref) === 'open') return true;
    if (state.get(ref) === 'done' || waits(ref)) return false;
    state.set(ref, 'open');
    for (const to of out.get(ref)?.values() ?? []) if (cyclic(to)) return true;
    state.set(ref, 'done');
    return false;
  };
  for (const s of steps) {
    if (!state.has(s.ref) && cyclic(s.ref)) {
      problems.push({ at: { step: steps.indexOf(s) }, message: 'is on a cycle with no DELAY or WAIT_FOR_EVENT step' });
      break;
    }
  }
  return problems;
}
