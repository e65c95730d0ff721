import fc from 'fast-check';
import { rewriteFallbacks } from './fallbacks';

/** The regex the scan replaced (cubic backtracking), as the reference of what it must match. */
const OLD = /(\{\{\{?)\s*([A-Za-z_$@][\w$-]*(?:\.[\w$-]+)*)\s*\?\?\s*(.*?)\s*(\}?\}\})/g;
function reference(source: string): string {
  return source.replace(OLD, (whole, open: string, path: string, rawDefault: string, close: string) => {
    if (open.length !== close.length) return whole;
    const quoted = /^(["'])(.*)\1$/s.exec(rawDefault);
    return `${open}__fallback ${path} ${JSON.stringify(quoted ? quoted[2] : rawDefault)}${close}`;
  });
}

test('rewrites exactly what the old expression rewrote (short random sources)', () => {
  const piece = fc.constantFrom(
    '{',
    '}',
    '{{',
    '}}',
    '?',
    '??',
    'a',
    'b.c',
    '.',
    ' ',
    '\n',
    '\u00a0',
    '"',
    "'",
    '-',
    '@',
    '\t',
    'x y',
  );
  fc.assert(
    fc.property(fc.array(piece, { maxLength: 14 }), fc.boolean(), (pieces, lead) => {
      const source = (lead ? '{{a ?? ' : '') + pieces.join('');
      expect(rewriteFallbacks(source)).toBe(reference(source));
    }),
    { numRuns: 20_000 },
  );
});

test('examples', () => {
  expect(rewriteFallbacks('{{a ?? b}} {{{c ?? d}}}')).toBe('{{__fallback a "b"}} {{{__fallback c "d"}}}');
  expect(rewriteFallbacks("{{ user.first ?? 'dear friend' }}")).toBe('{{__fallback user.first "dear friend"}}');
  expect(rewriteFallbacks('{{a ?? b\n}}')).toBe('{{__fallback a "b"}}');
  expect(rewriteFallbacks('{{a ?? b\nc}}')).toBe('{{a ?? b\nc}}');
  expect(rewriteFallbacks('{{a ?? b}}}')).toBe('{{a ?? b}}}');
  expect(rewriteFallbacks('no fallbacks {{x}}')).toBe('no fallbacks {{x}}');
});

// Alone this takes tens of milliseconds; the bound leaves room for a busy shared host. A quadratic rewrite (the old
// one took 37 s on 6,000 characters) would take hours on these inputs.
test('linear: unclosed fallbacks over megabytes take well under seconds', () => {
  for (const source of [
    `{{a ?? ${' '.repeat(2_000_000)}`,
    '{{a ?? '.repeat(250_000),
    `{{a ?? ${'x '.repeat(1_000_000)}`,
  ]) {
    const start = performance.now();
    expect(rewriteFallbacks(source)).toBe(source);
    expect(performance.now() - start).toBeLessThan(10_000);
  }
});
