/**
 * Plunk v2 workflow step configurations → ours (`STEP_CONFIG_SCHEMAS` in `@mailroom/core`), each then validated
 * by `parseStepConfig` like a step made through the API:
 * - SEND_EMAIL `{templateId, from?, fromName?, replyTo?}` (the template may also be the step's `templateId` column);
 * - DELAY `{amount, unit}` as is;
 * - WAIT_FOR_EVENT `{eventName, timeout: seconds}` → `{event, timeout: {amount, unit: 'seconds'}}`; no timeout → a year;
 * - CONDITION `{field, operator, value}` → `{filter: [{field, operator, value}]}`, `contact.` dropped from the field;
 * - WEBHOOK `{url, method?, headers?, body?}`, an object body sent as its JSON text;
 * - UPDATE_CONTACT `{updates}` → `{data, subscribed?}`;
 * - EXIT `{reason?}`.
 *
 * @module
 */
import { AppError } from '@mailroom/platform/errors';
import { parseStepConfig } from '@mailroom/workflows/workflows';
import { WORKFLOW_STEP_TYPES, type WorkflowStepType } from '@mailroom/db/schema/workflow-states';

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const defined = (o: Obj): Obj => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
const YEAR_S = 365 * 86_400;

/** A refusal's reason from an error of our validators: its field errors, or its message. */
export function reasonOf(err: unknown): string {
  if (!(err instanceof AppError)) return String(err);
  const errors = err.options.errors ?? [];
  return errors.length > 0 ? errors.map((e) => `${e.field} ${e.message}`).join('; ') : err.message;
}

function convert(
  type: WorkflowStepType,
  c: Obj,
  templateColumn: unknown,
  template: (plunkId: string) => string | undefined,
): Obj | string {
  switch (type) {
    case 'SEND_EMAIL': {
      const plunkTemplate = (typeof templateColumn === 'string' && templateColumn) || c.templateId;
      const templateId = typeof plunkTemplate === 'string' ? template(plunkTemplate) : undefined;
      // eslint-disable-next-line @typescript-eslint/no-base-to-string -- a foreign dump's odd id is reported as it stringifies
      if (!templateId) return `its template ${String(plunkTemplate ?? '(none)')} was not imported`;
      return defined({ templateId, from: c.from, fromName: c.fromName, replyTo: c.replyTo });
    }
    case 'DELAY':
      return defined({ amount: typeof c.amount === 'string' ? Number(c.amount) : c.amount, unit: c.unit });
    case 'WAIT_FOR_EVENT': {
      if (c.timeout && typeof c.timeout === 'object') return { event: c.eventName ?? c.event, timeout: c.timeout };
      const seconds =
        c.timeout === undefined || c.timeout === null ? YEAR_S : Math.min(Math.round(Number(c.timeout)), YEAR_S);
      return { event: c.eventName ?? c.event, timeout: { amount: seconds, unit: 'seconds' } };
    }
    case 'CONDITION': {
      if (c.filter !== undefined) return { filter: c.filter };
      const field = typeof c.field === 'string' ? c.field.replace(/^contact\./, '') : c.field;
      return { filter: [defined({ field, operator: c.operator, value: c.value, unit: c.unit })] };
    }
    case 'WEBHOOK':
      return defined({
        url: c.url,
        method: typeof c.method === 'string' ? c.method.toUpperCase() : undefined,
        headers: c.headers,
        body: c.body !== undefined && c.body !== null && typeof c.body !== 'string' ? JSON.stringify(c.body) : c.body,
      });
    case 'UPDATE_CONTACT': {
      const { subscribed, ...data } = obj(c.updates ?? c);
      return defined({
        data: Object.keys(data).length > 0 ? data : undefined,
        subscribed: typeof subscribed === 'boolean' ? subscribed : undefined,
      });
    }
    case 'EXIT':
      return defined({ reason: typeof c.reason === 'string' ? c.reason.slice(0, 500) : undefined });
  }
}

/**
 * Our configuration of a Plunk step.
 *
 * @param type - the Plunk step type (not TRIGGER: the caller handles it).
 * @param template - our id of a Plunk template, when it was imported.
 * @returns the validated configuration, or the reason it cannot be mapped.
 */
export function mapStepConfig(
  type: string,
  config: unknown,
  templateColumn: unknown,
  template: (plunkId: string) => string | undefined,
): { ok: true; type: WorkflowStepType; config: Obj } | { ok: false; reason: string } {
  if (!(WORKFLOW_STEP_TYPES as readonly string[]).includes(type))
    return { ok: false, reason: `step type ${type} has no equivalent here` };
  const t = type as WorkflowStepType;
  const converted = convert(t, obj(config), templateColumn, template);
  if (typeof converted === 'string') return { ok: false, reason: converted };
  try {
    return { ok: true, type: t, config: parseStepConfig(t, converted, 'config') };
  } catch (err) {
    return { ok: false, reason: `${t} config: ${reasonOf(err)}` };
  }
}
