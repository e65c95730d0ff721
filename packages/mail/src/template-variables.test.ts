import { missingVariables, templateVariables } from './template-variables';
import { TemplateSyntaxError } from './templates';

const paths = (source: string) => templateVariables(source).map((v) => v.path);

test('plain, raw, dotted and fallback variables; helpers are not variables', () => {
  expect(templateVariables('Hi {{name}} {{{banner}}} {{user.city}} {{first ?? "there"}} {{{raw ?? x}}}')).toEqual([
    { path: 'name', hasDefault: false },
    { path: 'banner', hasDefault: false },
    { path: 'user.city', hasDefault: false },
    { path: 'first', hasDefault: true },
    { path: 'raw', hasDefault: true },
  ]);
  expect(paths('{{lookup obj key}} {{log note}} {{this.a}} {{[b c].d}} {{this}} {{@index}}')).toEqual([
    'obj',
    'key',
    'note',
    'a',
    'b c.d',
  ]);
});

test('blocks: if keeps the context, with moves it, each items are relative (but @root and ../ climb back)', () => {
  expect(paths('{{#if vip}}{{coupon}}{{else}}{{plain}}{{/if}}')).toEqual(['vip', 'coupon', 'plain']);
  expect(paths('{{#with user}}{{name}} {{../site}}{{/with}}')).toEqual(['user', 'user.name', 'site']);
  expect(paths('{{#each items}}{{title}} {{@root.shop}} {{../currency}}{{else}}{{empty}}{{/each}}')).toEqual([
    'items',
    'shop',
    'currency',
    'empty',
  ]);
  expect(paths('{{#each items}}{{#if on}}{{../../x}}{{/if}}{{/each}}')).toEqual(['items', 'x']);
  expect(paths('{{#each rows as |row|}}{{row.a}}{{/each}}{{#with user as |u|}}{{u.name}}{{/with}}')).toEqual([
    'rows',
    'user',
  ]);
  expect(paths('{{#section}}{{inside}}{{/section}}')).toEqual(['section']);
  expect(paths('{{#if (lookup flags "beta")}}x{{/if}}')).toEqual(['flags']);
});

test('missing: absent or null, part by part; a variable with a default everywhere is never missing', () => {
  const ctx = { name: 'Ann', user: { city: null, zip: '1' }, list: [1], empty: '' };
  expect(
    missingVariables(['{{name}} {{user.city}} {{user.zip}} {{user.zip.x}} {{list.[0]}} {{empty}} {{gone}}'], ctx),
  ).toEqual(['user.city', 'user.zip.x', 'gone']);
  expect(missingVariables(['{{first ?? "x"}}'], {})).toEqual([]);
  expect(missingVariables(['{{first ?? "x"}}', '{{first}}'], {})).toEqual(['first']);
  expect(missingVariables(['{{toString}} {{constructor.name}}'], {})).toEqual(['toString', 'constructor.name']);
});

test('bad syntax throws TemplateSyntaxError', () => {
  expect(() => templateVariables('{{#if x}}')).toThrow(TemplateSyntaxError);
});
