/**
 * Every regular expression of the source tree that request text can reach, timed on adversarial inputs of
 * 100,000 characters: each must finish in under 50 ms (a linear regex takes well under 15 ms here; a backtracking
 * one takes seconds to hours), or, on a busy machine, within 3 times what a regex matching every character of the
 * same input takes at that moment (the most work a linear regex can do on it: a busy core slows both alike). The regexes are read from the sources themselves (`regex-attacks.ts`): literals,
 * `new RegExp` with literal arguments and schema `pattern`s under apps/ and packages/, plus ajv-formats' (the
 * `format`s of our schemas) and the ones built at run time, listed below. A new regex is covered without
 * editing this file.
 *
 * Inputs per regex: for each unbounded quantifier, the text that leads the regex up to it, one character it
 * accepts repeated to 100,000, and a failing end; and each probe character repeated. The old `{{a ?? b}}`
 * rewrite (`\s*(.*?)\s*(\}?\}\})`) took 4.7 s on 3,000 characters of such input.
 */
import path from 'node:path';
import { attackInputs, sourceRegexes, type SourceRegex } from './regex-attacks';

const ROOT = path.resolve(__dirname, '..', '..');
const SIZE = 100_000;
const LIMIT_MS = 50;

const regexes: SourceRegex[] = [
  ...sourceRegexes(ROOT, ['apps/api/src', 'apps/worker/src', 'packages']),
  ...sourceRegexes(ROOT, ['node_modules/ajv-formats/dist'], '.js'),
  // Built at run time:
  {
    where: 'packages/mail/src/text-slots.ts (slot tokens)',
    source: 'mrv0123456789abcdefn(\\d+)e',
    flags: 'g',
    kind: 'new RegExp',
  },
  {
    where: 'packages/feedback/src/sns.ts (certificate host)',
    source: '^sns\\.[a-z0-9-]+\\.amazonaws\\.com$',
    flags: '',
    kind: 'new RegExp',
  },
];

/** The fastest of up to three runs of `re` over all of `input` (a global replace visits every start position). */
/** Every character of the input, one match each: the most matches (and replacement work) a linear regex makes. */
const EVERY_CHARACTER = /[^]/gu;

/** The shortest of three runs (ms) of `re` replaced over `input` (fewer once one run is under the limit). */
function timeMs(re: RegExp, input: string): number {
  let best = Infinity;
  for (let run = 0; run < 3 && best >= LIMIT_MS; run++) {
    const start = performance.now();
    input.replace(re, '');
    best = Math.min(best, performance.now() - start);
  }
  return best;
}

test('the inventory reaches the request path (routes, validation, addresses, templates, filters, headers)', () => {
  const files = new Set(regexes.map((r) => r.where.replace(/:\d+$/, '')));
  for (const file of [
    'apps/api/src/routes/send.ts',
    'apps/api/src/http/idempotency.ts',
    'packages/platform/src/validation.ts',
    'packages/platform/src/address.ts',
    'packages/mail/src/headers.ts',
    'packages/audiences/src/segments.ts',
    'packages/workflows/src/workflows.ts',
  ]) {
    expect(files).toContain(file);
  }
  expect(regexes.length).toBeGreaterThan(100);
});

test('the inputs include the attack that stalled the fallback rewrite', () => {
  const old = /(\{\{\{?)\s*([A-Za-z_$@][\w$-]*(?:\.[\w$-]+)*)\s*\?\?\s*(.*?)\s*(\}?\}\})/g;
  const inputs = attackInputs(old.source, old.flags, 2_000).map((i) => i.input);
  expect(inputs.some((i) => /^\{\{a\?\? {1900}/.test(i))).toBe(true);
});

describe(`every regex finishes ${SIZE.toLocaleString('en')}-character adversarial inputs in under ${LIMIT_MS} ms`, () => {
  test.each(
    regexes.map(
      (r) => [`${r.where} /${r.source.slice(0, 60)}${r.source.length > 60 ? '…' : ''}/${r.flags}`, r] as const,
    ),
  )('%s', (_name, r) => {
    const re = new RegExp(r.source, `${r.flags.replace(/[gy]/g, '')}g`);
    const slow: string[] = [];
    for (const { label, input } of attackInputs(r.source, r.flags, SIZE)) {
      const ms = timeMs(re, input);
      if (ms >= LIMIT_MS && ms >= 3 * timeMs(EVERY_CHARACTER, input)) slow.push(`${ms.toFixed(0)} ms: ${label}`);
      if (ms > 1_000) break;
    }
    expect(slow).toEqual([]);
  });
});
