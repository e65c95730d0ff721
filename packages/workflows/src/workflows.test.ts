import { AppError } from '@mailroom/platform/errors';
import { renderJsonTemplate } from '@mailroom/mail/templates';
import {
  durationMs,
  graphProblems,
  MAX_WAIT_MS,
  parseStepConfig,
  type Duration,
  type GraphStep,
  type GraphTransition,
} from './workflows';
import { fromPlunkStepConfig, plunkConditionField, plunkWebhookTemplate } from './workflows-plunk';
import {
  autoConnectBranches,
  plunkTransitionFields,
  plunkTriggerConfig,
  resolveBranch,
  resolveTrigger,
} from './workflows-plunk-graph';

const steps: GraphStep[] = [
  { ref: 'wait', type: 'WAIT_FOR_EVENT' },
  { ref: 'cond', type: 'CONDITION' },
  { ref: 'send', type: 'SEND_EMAIL' },
  { ref: 'exit', type: 'EXIT' },
];
const complete: GraphTransition[] = [
  { from: null, to: 'wait', branch: 'next' },
  { from: 'wait', to: 'cond', branch: 'event' },
  { from: 'wait', to: 'exit', branch: 'timeout' },
  { from: 'cond', to: 'send', branch: 'yes' },
  { from: 'cond', to: 'exit', branch: 'no' },
];

describe('graphProblems', () => {
  test('a complete graph has none; a step without next simply ends', () => {
    expect(graphProblems(steps, complete)).toEqual([]);
  });

  test('missing trigger transition, incomplete branches, unreachable steps', () => {
    const problems = graphProblems(
      steps,
      complete.filter((t) => t.branch !== 'no' && t.from !== null),
    );
    expect(problems.map((p) => p.message)).toEqual([
      'the trigger needs a transition to the first step',
      'a CONDITION step needs a no transition',
    ]);
    const orphan = graphProblems([...steps, { ref: 'lost', type: 'DELAY' }], complete);
    expect(orphan).toEqual([{ at: { step: 4 }, message: 'is not reachable from the trigger' }]);
  });

  test('branches must belong to the step type; one edge per (step, branch); unknown steps', () => {
    const problems = graphProblems(steps, [
      ...complete,
      { from: 'send', to: 'exit', branch: 'yes' },
      { from: 'exit', to: 'send', branch: 'next' },
      { from: 'cond', to: 'send', branch: 'yes' },
      { from: 'ghost', to: 'send', branch: 'next' },
      { from: 'send', to: 'ghost', branch: 'next' },
      { from: null, to: 'send', branch: 'yes' },
    ]);
    expect(problems.map((p) => [p.at, p.message])).toEqual([
      [{ transition: 5 }, 'branch must be one of next for a SEND_EMAIL step'],
      [{ transition: 6 }, 'an EXIT step has no outgoing transitions'],
      [{ transition: 7 }, 'a second yes transition from cond'],
      [{ transition: 8 }, 'from: no step ghost in this workflow'],
      [{ transition: 9 }, 'to: no step ghost in this workflow'],
      [{ transition: 10 }, 'the trigger leads on by branch next'],
    ]);
  });

  test('a cycle must pass a DELAY or WAIT_FOR_EVENT', () => {
    const loop: GraphStep[] = [
      { ref: 'a', type: 'UPDATE_CONTACT' },
      { ref: 'b', type: 'CONDITION' },
    ];
    const edges: GraphTransition[] = [
      { from: null, to: 'a', branch: 'next' },
      { from: 'a', to: 'b', branch: 'next' },
      { from: 'b', to: 'a', branch: 'yes' },
      { from: 'b', to: 'b', branch: 'no' },
    ];
    expect(graphProblems(loop, edges).map((p) => p.message)).toEqual([
      'is on a cycle with no DELAY or WAIT_FOR_EVENT step',
    ]);
    const delayed: GraphStep[] = [...loop, { ref: 'd', type: 'DELAY' }];
    const viaDelay: GraphTransition[] = [
      { from: null, to: 'a', branch: 'next' },
      { from: 'a', to: 'b', branch: 'next' },
      { from: 'b', to: 'd', branch: 'yes' },
      { from: 'b', to: 'd', branch: 'no' },
      { from: 'd', to: 'a', branch: 'next' },
    ];
    expect(graphProblems(delayed, viaDelay)).toEqual([]);
  });
});

describe('parseStepConfig', () => {
  const fields = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return (err as AppError).options.errors?.map((e) => e.field);
    }
    return [];
  };

  test('durations up to one year', () => {
    expect(durationMs(parseStepConfig('DELAY', { amount: 52, unit: 'weeks' }, 'config'))).toBe(52 * 604_800_000);
    expect(fields(() => parseStepConfig('DELAY', { amount: 366, unit: 'days' }, 'config'))).toEqual(['config']);
    expect(
      fields(() => parseStepConfig('WAIT_FOR_EVENT', { event: 'x', timeout: { amount: 9_000, unit: 'hours' } }, 'c')),
    ).toEqual(['c.timeout']);
  });

  test('CONDITION filters may read context.<path>; WEBHOOK headers may not take ours', () => {
    expect(
      parseStepConfig(
        'CONDITION',
        { filter: [{ field: 'context.trigger.data.plan', operator: 'equals', value: 'pro' }] },
        'config',
      ),
    ).toBeTruthy();
    expect(
      fields(() =>
        parseStepConfig('CONDITION', { filter: [{ field: 'trigger.plan', operator: 'equals', value: 1 }] }, 'config'),
      ),
    ).toEqual(['config.filter.0.field']);
    expect(
      fields(() =>
        parseStepConfig('WEBHOOK', { url: 'https://x.example', headers: { 'Webhook-Signature': 'v1,x' } }, 'config'),
      ),
    ).toEqual(['config.headers.Webhook-Signature']);
    expect(fields(() => parseStepConfig('WEBHOOK', { url: 'ftp://x.example' }, 'config'))).toEqual(['config.url']);
  });
});

test('renderJsonTemplate inserts strings JSON-escaped, so the body stays one valid document', () => {
  const nasty = 'a "quote", a \\ backslash,\na newline and </script>';
  const body = renderJsonTemplate('{"name":"{{contact.name}}","n":{{n}},"ok":{{ok}} }', {
    contact: { name: nasty },
    n: 42,
    ok: true,
  });
  expect(JSON.parse(body)).toEqual({ name: nasty, n: 42, ok: true });
  // Three closing braces end a raw tag: a body written that way is refused when saved, naming the field.
  expect(() => parseStepConfig('WEBHOOK', { url: 'https://x.example', body: '{"ok":{{ok}}}' }, 'config')).toThrow(
    AppError,
  );
});

describe("Plunk v2's workflow shapes", () => {
  const fields = (fn: () => unknown) => {
    try {
      fn();
    } catch (err) {
      return ((err as AppError).options.errors ?? []).map((e) => e.field);
    }
    throw new Error('expected a validation error');
  };

  test('WAIT_FOR_EVENT {eventName, timeout: seconds} becomes {event, timeout: {amount, unit: seconds}}; no timeout waits a year', () => {
    expect(fromPlunkStepConfig('WAIT_FOR_EVENT', { eventName: 'purchase', timeout: 86_400 }, 'config')).toEqual({
      event: 'purchase',
      timeout: { amount: 86_400, unit: 'seconds' },
    });
    expect(fromPlunkStepConfig('WAIT_FOR_EVENT', { eventName: 'purchase', timeout: 1.2 }, 'config')).toEqual({
      event: 'purchase',
      timeout: { amount: 2, unit: 'seconds' },
    });
    const forever = fromPlunkStepConfig('WAIT_FOR_EVENT', { eventName: 'purchase' }, 'config') as { timeout: Duration };
    expect(durationMs(forever.timeout)).toBe(MAX_WAIT_MS);
    expect(parseStepConfig('WAIT_FOR_EVENT', forever, 'config')).toEqual(forever);
    expect(
      fields(() => fromPlunkStepConfig('WAIT_FOR_EVENT', { eventName: 'x', timeout: 31_536_001 }, 'config')),
    ).toEqual(['config.timeout']);
    expect(
      fields(() => fromPlunkStepConfig('WAIT_FOR_EVENT', { eventName: 'x', event: 'y', timeout: 5 }, 'config')),
    ).toEqual(['config.eventName']);
    // Our form passes unchanged.
    const ours = { event: 'purchase', timeout: { amount: 2, unit: 'days' } };
    expect(fromPlunkStepConfig('WAIT_FOR_EVENT', ours, 'config')).toEqual(ours);
  });

  test('CONDITION {field, operator, value} becomes a filter of our language, fields renamed', () => {
    expect(
      fromPlunkStepConfig('CONDITION', { field: 'contact.data.plan', operator: 'equals', value: 'pro' }, 'config'),
    ).toEqual({
      filter: [{ field: 'data.plan', operator: 'equals', value: 'pro' }],
    });
    expect(
      fromPlunkStepConfig('CONDITION', { field: 'event.amount', operator: 'greaterThan', value: 10 }, 'config'),
    ).toEqual({
      filter: [{ field: 'context.trigger.data.amount', operator: 'greaterThan', value: 10 }],
    });
    // Plunk's negative operators do not match a missing value; ours do, so the mapping requires the value.
    expect(
      fromPlunkStepConfig('CONDITION', { field: 'data.plan', operator: 'notEquals', value: 'pro' }, 'config'),
    ).toEqual({
      filter: [
        { field: 'data.plan', operator: 'exists' },
        { field: 'data.plan', operator: 'notEquals', value: 'pro' },
      ],
    });
    expect(
      fromPlunkStepConfig('CONDITION', { field: 'data.plan', operator: 'exists', value: 'ignored' }, 'config'),
    ).toEqual({
      filter: [{ field: 'data.plan', operator: 'exists' }],
    });
    expect(
      fromPlunkStepConfig('CONDITION', { field: 'contact.subscribed', operator: 'equals', value: true }, 'config'),
    ).toEqual({
      filter: [{ field: 'subscribed', operator: 'equals', value: true }],
    });
    expect(plunkConditionField('contact.email')).toBe('email');
    expect(plunkConditionField('workflow.plan')).toBe('context.trigger.data.plan');
    expect(plunkConditionField('data.plan')).toBe('data.plan');
    // The result passes our validation.
    const mapped = fromPlunkStepConfig(
      'CONDITION',
      { field: 'contact.email', operator: 'contains', value: '@acme' },
      'config',
    );
    expect(() => parseStepConfig('CONDITION', mapped, 'config')).not.toThrow();
  });

  test('CONDITION on a field every contact has (email, subscribed): no exists test added; exists / notExists always true / false', () => {
    const map = (config: object) => fromPlunkStepConfig('CONDITION', config, 'config');
    expect(map({ field: 'contact.email', operator: 'notEquals', value: 'a@x.io' })).toEqual({
      filter: [{ field: 'email', operator: 'notEquals', value: 'a@x.io' }],
    });
    expect(map({ field: 'contact.email', operator: 'notContains', value: '@x.io' })).toEqual({
      filter: [{ field: 'email', operator: 'notContains', value: '@x.io' }],
    });
    expect(map({ field: 'contact.subscribed', operator: 'notEquals', value: true })).toEqual({
      filter: [{ field: 'subscribed', operator: 'notEquals', value: true }],
    });
    expect(map({ field: 'contact.email', operator: 'exists' })).toEqual({
      filter: [{ field: 'email', operator: 'contains', value: '@' }],
    });
    expect(map({ field: 'contact.email', operator: 'notExists' })).toEqual({
      filter: [{ field: 'email', operator: 'notContains', value: '@' }],
    });
    expect(map({ field: 'contact.subscribed', operator: 'exists' })).toMatchObject({ filter: { logic: 'OR' } });
    for (const config of [
      { field: 'contact.subscribed', operator: 'exists' },
      { field: 'contact.subscribed', operator: 'notExists' },
    ]) {
      expect(() => parseStepConfig('CONDITION', map(config), 'config')).not.toThrow();
    }
  });

  test('CONDITION refusals name the Plunk field', () => {
    expect(
      fields(() => fromPlunkStepConfig('CONDITION', { mode: 'multi', field: 'data.plan', branches: [] }, 'config')),
    ).toEqual(['config.mode']);
    expect(
      fields(() => fromPlunkStepConfig('CONDITION', { field: 'data.plan', operator: 'within', value: 3 }, 'config')),
    ).toEqual(['config.operator']);
    expect(
      fields(() => fromPlunkStepConfig('CONDITION', { field: 'bogus', operator: 'equals', value: 1 }, 'config')),
    ).toEqual(['config.field']);
    // Ordering an address means nothing: refused on the operator.
    expect(
      fields(() =>
        fromPlunkStepConfig('CONDITION', { field: 'contact.email', operator: 'greaterThan', value: 'm' }, 'config'),
      ),
    ).toEqual(['config.operator']);
    expect(
      fields(() =>
        fromPlunkStepConfig('CONDITION', { field: 'data.plan', operator: 'equals', value: { nested: true } }, 'config'),
      ),
    ).toEqual(['config.value']);
  });

  test('UPDATE_CONTACT {updates, subscriptionAction}; WEBHOOK body object; SEND_EMAIL templateId and recipient', () => {
    expect(
      fromPlunkStepConfig('UPDATE_CONTACT', { updates: { plan: 'pro' }, subscriptionAction: 'unsubscribe' }, 'config'),
    ).toEqual({ data: { plan: 'pro' }, subscribed: false });
    expect(
      fromPlunkStepConfig('UPDATE_CONTACT', { updates: { plan: 'pro' }, subscriptionAction: 'none' }, 'config'),
    ).toEqual({ data: { plan: 'pro' } });
    expect(fields(() => fromPlunkStepConfig('UPDATE_CONTACT', { subscriptionAction: 'maybe' }, 'config'))).toEqual([
      'config.subscriptionAction',
    ]);
    const hook = fromPlunkStepConfig(
      'WEBHOOK',
      {
        url: 'https://example.com/h',
        method: 'POST',
        body: { who: '{{email}}', plan: '{{data.plan}}', paid: '{{event.amount}}', n: 2 },
      },
      'config',
    ) as { body: string };
    expect(JSON.parse(hook.body)).toEqual({
      who: '{{contact.email}}',
      plan: '{{contact.data.plan}}',
      paid: '{{trigger.amount}}',
      n: 2,
    });
    const rendered = renderJsonTemplate(hook.body, {
      contact: { email: 'a"b@x.io', data: { plan: 'pro' } },
      trigger: { amount: 5 },
    });
    expect(JSON.parse(rendered)).toEqual({ who: 'a"b@x.io', plan: 'pro', paid: '5', n: 2 });
    expect(plunkWebhookTemplate('{{firstName ?? friend}} {{{ contact.email }}}')).toBe(
      '{{contact.data.firstName ?? friend}} {{{ contact.email }}}',
    );
    const tpl = '0190a0a0-0000-7000-8000-000000000001';
    expect(fromPlunkStepConfig('SEND_EMAIL', { recipient: { type: 'CONTACT' } }, 'config', tpl)).toEqual({
      templateId: tpl,
    });
    expect(
      fields(() =>
        fromPlunkStepConfig('SEND_EMAIL', { recipient: { type: 'CUSTOM', customEmail: 'a@b.co' } }, 'config', tpl),
      ),
    ).toEqual(['config.recipient']);
    expect(fields(() => fromPlunkStepConfig('DELAY', { amount: 1, unit: 'hours' }, 'config', tpl))).toEqual([
      'templateId',
    ]);
  });

  test('triggers: ours, eventName, triggerType + triggerConfig; SCHEDULE refused', () => {
    expect(resolveTrigger({ eventName: 'signup' })).toEqual({ type: 'EVENT', event: 'signup' });
    expect(resolveTrigger({ triggerType: 'EVENT', triggerConfig: { eventName: 'signup' } })).toEqual({
      type: 'EVENT',
      event: 'signup',
    });
    expect(resolveTrigger({ triggerType: 'MANUAL', triggerConfig: null })).toEqual({ type: 'MANUAL', event: null });
    expect(resolveTrigger({ triggerType: 'EVENT' }, { type: 'EVENT', event: 'old' })).toEqual({
      type: 'EVENT',
      event: 'old',
    });
    expect(resolveTrigger({ trigger: { type: 'MANUAL' } })).toEqual({ type: 'MANUAL', event: null });
    expect(resolveTrigger({})).toBeUndefined();
    expect(fields(() => resolveTrigger({ triggerType: 'SCHEDULE', triggerConfig: { schedule: '0 9 * * *' } }))).toEqual(
      ['triggerType'],
    );
    expect(fields(() => resolveTrigger({ triggerConfig: { schedule: '0 9 * * *' } }))).toEqual([
      'triggerConfig.schedule',
    ]);
    expect(fields(() => resolveTrigger({ triggerType: 'EVENT' }, { type: 'MANUAL', event: null }))).toEqual([
      'triggerConfig.eventName',
    ]);
    expect(fields(() => resolveTrigger({ trigger: { type: 'MANUAL' }, eventName: 'x' }))).toEqual(['eventName']);
    expect(plunkTriggerConfig({ type: 'EVENT', event: 'signup' })).toEqual({ eventName: 'signup' });
  });

  test('transition branches from condition / waitOutcome, and back', () => {
    expect(resolveBranch({ condition: { branch: 'no' } }, 'CONDITION', [])).toBe('no');
    expect(resolveBranch({ waitOutcome: 'TIMEOUT' }, 'WAIT_FOR_EVENT', [])).toBe('timeout');
    expect(resolveBranch({ condition: { fallback: true } }, 'WAIT_FOR_EVENT', [])).toBe('timeout');
    expect(resolveBranch({ priority: 0 }, 'WAIT_FOR_EVENT', ['event'])).toBe('timeout');
    expect(resolveBranch({ priority: 0 }, 'SEND_EMAIL', [])).toBe('next');
    expect(resolveBranch({}, 'WAIT_FOR_EVENT', [])).toBe('next');
    expect(fields(() => resolveBranch({ priority: 1 }, 'CONDITION', []))).toEqual(['condition.branch']);
    expect(fields(() => resolveBranch({ waitOutcome: 'EVENT' }, 'DELAY', []))).toEqual(['waitOutcome']);
    expect(fields(() => resolveBranch({ branch: 'yes', condition: { branch: 'no' } }, 'CONDITION', []))).toEqual([
      'condition.branch',
    ]);
    expect(fields(() => resolveBranch({ condition: { branch: 'yes', field: 'x' } }, 'CONDITION', []))).toEqual([
      'condition.field',
    ]);
    expect(plunkTransitionFields('yes')).toEqual({ condition: { branch: 'yes' }, waitOutcome: null, priority: 0 });
    expect(plunkTransitionFields('timeout')).toEqual({ condition: null, waitOutcome: 'TIMEOUT', priority: 1 });
    expect(autoConnectBranches('WAIT_FOR_EVENT')).toEqual(['event', 'timeout']);
  });
});
