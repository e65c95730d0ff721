import { AppError } from './errors';
import { renderJsonTemplate } from './templates';
import { durationMs, graphProblems, parseStepConfig, type GraphStep, type GraphTransition } from './workflows';

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
    const problems = graphProblems(steps, complete.filter((t) => t.branch !== 'no' && t.from !== null));
    expect(problems.map((p) => p.message)).toEqual(['the trigger needs a transition to the first step', 'a CONDITION step needs a no transition']);
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
    expect(graphProblems(loop, edges).map((p) => p.message)).toEqual(['is on a cycle with no DELAY or WAIT_FOR_EVENT step']);
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
    expect(fields(() => parseStepConfig('WAIT_FOR_EVENT', { event: 'x', timeout: { amount: 9_000, unit: 'hours' } }, 'c'))).toEqual(['c.timeout']);
  });

  test('CONDITION filters may read context.<path>; WEBHOOK headers may not take ours', () => {
    expect(parseStepConfig('CONDITION', { filter: [{ field: 'context.trigger.data.plan', operator: 'equals', value: 'pro' }] }, 'config')).toBeTruthy();
    expect(fields(() => parseStepConfig('CONDITION', { filter: [{ field: 'trigger.plan', operator: 'equals', value: 1 }] }, 'config'))).toEqual(['config.filter.0.field']);
    expect(fields(() => parseStepConfig('WEBHOOK', { url: 'https://x.example', headers: { 'Webhook-Signature': 'v1,x' } }, 'config'))).toEqual(['config.headers.Webhook-Signature']);
    expect(fields(() => parseStepConfig('WEBHOOK', { url: 'ftp://x.example' }, 'config'))).toEqual(['config.url']);
  });
});

test('renderJsonTemplate inserts strings JSON-escaped, so the body stays one valid document', () => {
  const nasty = 'a "quote", a \\ backslash,\na newline and </script>';
  const body = renderJsonTemplate('{"name":"{{contact.name}}","n":{{n}},"ok":{{ok}} }', { contact: { name: nasty }, n: 42, ok: true });
  expect(JSON.parse(body)).toEqual({ name: nasty, n: 42, ok: true });
  // Three closing braces end a raw tag: a body written that way is refused when saved, naming the field.
  expect(() => parseStepConfig('WEBHOOK', { url: 'https://x.example', body: '{"ok":{{ok}}}' }, 'config')).toThrow(AppError);
});
