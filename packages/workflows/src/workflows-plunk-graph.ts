/**
 * Plunk v2's workflow triggers and transitions, mapped onto ours (the step configurations are in
 * `workflows-plunk.ts`, whose module comment lists the whole mapping):
 * - workflow `eventName` / `triggerType` + `triggerConfig: {eventName}` → `trigger: {type, event}`; SCHEDULE
 *   triggers (cron) are refused.
 * - transitions: `condition: {branch: yes|no|event|timeout}`, `condition: {fallback: true}` (timeout) and
 *   `waitOutcome: EVENT|TIMEOUT` → `branch`; `priority` is accepted and not stored (branches are exclusive).
 *
 * @module
 */
import type { WorkflowBranch, WorkflowStepType } from '@mailroom/db/schema/workflow-states';
import { type WorkflowTriggerType } from './workflows';
import { fail, isObject } from './workflows-plunk';

/** The branches a Plunk transition's `condition.branch` may name. */
const PLUNK_BRANCHES: readonly unknown[] = ['yes', 'no', 'event', 'timeout'] satisfies WorkflowBranch[];
const isPlunkBranch = (v: unknown): v is WorkflowBranch => PLUNK_BRANCHES.includes(v);

/** A trigger as stored: EVENT with its event name, or MANUAL. */
export interface TriggerSpec {
  type: WorkflowTriggerType;
  event: string | null;
}

/** The trigger fields of a workflow request: ours (`trigger`) or Plunk's (`eventName`, `triggerType`, `triggerConfig`). */
export interface TriggerFields {
  trigger?: { type: WorkflowTriggerType; event?: string };
  eventName?: string;
  triggerType?: string;
  triggerConfig?: unknown;
}

/**
 * The trigger a workflow request sets, from our `trigger` or Plunk's fields, or undefined when it sets none.
 *
 * @param current - the workflow's trigger (updates): Plunk's `triggerType: EVENT` alone keeps its event name.
 * @throws {@link AppError} 422 naming `trigger.event`, `eventName`, `triggerType` or `triggerConfig.<key>`.
 */
export function resolveTrigger(body: TriggerFields, current?: TriggerSpec): TriggerSpec | undefined {
  const plunk = (['eventName', 'triggerType', 'triggerConfig'] as const).filter((k) => body[k] !== undefined);
  if (body.trigger) {
    if (plunk.length > 0)
      fail(plunk[0], "give either trigger (ours) or Plunk's eventName/triggerType/triggerConfig, not both");
    const t = body.trigger;
    if (t.type === 'EVENT' && !t.event) fail('trigger.event', 'is required for an EVENT trigger', 'invalid_type');
    if (t.type === 'MANUAL' && t.event !== undefined)
      fail('trigger.event', 'applies to EVENT triggers only', 'unrecognized_keys');
    return { type: t.type, event: t.type === 'EVENT' ? t.event! : null };
  }
  if (plunk.length === 0) return undefined;
  if (body.triggerType !== undefined && body.triggerType !== 'EVENT' && body.triggerType !== 'MANUAL') {
    fail(
      'triggerType',
      body.triggerType === 'SCHEDULE'
        ? 'SCHEDULE (cron) triggers are not supported: use EVENT or MANUAL'
        : 'must be one of EVENT, MANUAL',
      'invalid_enum_value',
    );
  }
  let configEvent: string | undefined;
  if (body.triggerConfig !== undefined && body.triggerConfig !== null) {
    if (!isObject(body.triggerConfig)) fail('triggerConfig', 'must be an object {eventName}', 'invalid_type');
    const cfg = body.triggerConfig;
    const extra = Object.keys(cfg).find((k) => k !== 'eventName');
    if (extra)
      fail(
        `triggerConfig.${extra}`,
        extra === 'schedule' ? 'schedules (cron) are not supported' : 'is not a recognized field',
        'unrecognized_keys',
      );
    if (cfg.eventName !== undefined) {
      if (typeof cfg.eventName !== 'string' || !/^\S(.*\S)?$/.test(cfg.eventName) || cfg.eventName.length > 255) {
        fail(
          'triggerConfig.eventName',
          'must be an event name (1–255 characters, no surrounding spaces)',
          'invalid_string',
        );
      }
      configEvent = cfg.eventName;
    }
  }
  if (body.eventName !== undefined && configEvent !== undefined && body.eventName !== configEvent)
    fail('eventName', 'differs from triggerConfig.eventName');
  const event = body.eventName ?? configEvent;
  const type = body.triggerType ?? (event !== undefined ? 'EVENT' : (current?.type ?? 'MANUAL'));
  if (type === 'MANUAL') {
    if (event !== undefined)
      fail(
        body.eventName !== undefined ? 'eventName' : 'triggerConfig.eventName',
        'applies to EVENT triggers only',
        'unrecognized_keys',
      );
    return { type, event: null };
  }
  const name = event ?? (current?.type === 'EVENT' ? current.event : null);
  if (!name) fail('triggerConfig.eventName', 'is required for an EVENT trigger', 'invalid_type');
  return { type, event: name };
}

/** Plunk's `triggerConfig` of a stored trigger. */
export function plunkTriggerConfig(t: TriggerSpec): { eventName: string } | null {
  return t.type === 'EVENT' && t.event ? { eventName: t.event } : null;
}

/** Plunk's transition fields of a transition request. */
export interface PlunkTransitionFields {
  branch?: WorkflowBranch;
  condition?: unknown;
  waitOutcome?: string;
  priority?: number;
}

/**
 * The branch a transition request names, from our `branch` or Plunk's `condition` / `waitOutcome` (see the module
 * comment). Without any of them: `next`, except that a Plunk-form request (with `condition`, `waitOutcome` or
 * `priority`) from a WAIT_FOR_EVENT step takes the first free of `event` and `timeout`.
 *
 * @param fromType - the type of the step it leaves (null: the trigger).
 * @param taken - branches already used from that step.
 * @throws {@link AppError} 422 naming `condition`, `condition.branch` or `waitOutcome`.
 */
export function resolveBranch(
  body: PlunkTransitionFields,
  fromType: WorkflowStepType | null,
  taken: readonly string[],
): WorkflowBranch {
  const named: { field: string; branch: WorkflowBranch }[] = [];
  if (body.branch) named.push({ field: 'branch', branch: body.branch });
  if (body.waitOutcome !== undefined && body.waitOutcome !== null) {
    if (body.waitOutcome !== 'EVENT' && body.waitOutcome !== 'TIMEOUT')
      fail('waitOutcome', 'must be one of EVENT, TIMEOUT', 'invalid_enum_value');
    if (fromType !== 'WAIT_FOR_EVENT') fail('waitOutcome', 'applies to transitions from a WAIT_FOR_EVENT step only');
    named.push({ field: 'waitOutcome', branch: body.waitOutcome === 'EVENT' ? 'event' : 'timeout' });
  }
  if (body.condition !== undefined && body.condition !== null) {
    if (!isObject(body.condition)) fail('condition', 'must be an object {branch}', 'invalid_type');
    const cond = body.condition;
    if (cond.fallback === true && !('branch' in cond)) {
      named.push({ field: 'condition.fallback', branch: 'timeout' });
    } else {
      const extra = Object.keys(cond).find((k) => k !== 'branch');
      if (extra)
        fail(`condition.${extra}`, 'is not supported: a transition is chosen by its branch', 'unrecognized_keys');
      const branch = cond.branch;
      if (!isPlunkBranch(branch))
        fail(
          'condition.branch',
          'must be one of yes, no (CONDITION), event, timeout (WAIT_FOR_EVENT)',
          'invalid_enum_value',
        );
      named.push({ field: 'condition.branch', branch });
    }
  }
  const first = named[0];
  const clash = named.find((n) => n.branch !== first?.branch);
  if (clash) fail(clash.field, `names the ${clash.branch} branch but ${first.field} names ${first.branch}`);
  if (first) return first.branch;
  const plunkForm = body.condition !== undefined || body.waitOutcome !== undefined || body.priority !== undefined;
  if (plunkForm && fromType === 'WAIT_FOR_EVENT') return taken.includes('event') ? 'timeout' : 'event';
  if (plunkForm && fromType === 'CONDITION')
    fail('condition.branch', 'a transition from a CONDITION step needs condition: {branch: yes|no}', 'invalid_type');
  return 'next';
}

/** Plunk's `condition`, `waitOutcome` and `priority` of a stored branch. */
export function plunkTransitionFields(branch: WorkflowBranch): {
  condition: { branch: string } | null;
  waitOutcome: 'EVENT' | 'TIMEOUT' | null;
  priority: number;
} {
  if (branch === 'yes' || branch === 'no') return { condition: { branch }, waitOutcome: null, priority: 0 };
  if (branch === 'event') return { condition: null, waitOutcome: 'EVENT', priority: 0 };
  if (branch === 'timeout') return { condition: null, waitOutcome: 'TIMEOUT', priority: 1 };
  return { condition: null, waitOutcome: null, priority: 0 };
}

/**
 * The branches Plunk's `autoConnect` adds from a leaf step of `type` to a new step: `yes` from a CONDITION,
 * `event` and `timeout` from a WAIT_FOR_EVENT (both continue to the new step), `next` otherwise.
 */
export function autoConnectBranches(type: WorkflowStepType | null): WorkflowBranch[] {
  if (type === 'CONDITION') return ['yes'];
  if (type === 'WAIT_FOR_EVENT') return ['event', 'timeout'];
  return ['next'];
}
