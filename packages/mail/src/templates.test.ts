import { assertTemplate, renderContent, splitVariables, TemplateSyntaxError } from './templates';
import { rewriteFallbacks } from './fallbacks';

const html = (body: string, ctx: Record<string, unknown>) => renderContent({ subject: 's', body, format: 'html' }, ctx).html;

describe('template language', () => {
  test('{{var}} escapes HTML, {{{var}}} does not', () => {
    expect(html('{{x}}|{{{x}}}', { x: '<a href="y">&</a>' })).toBe('&lt;a href&#x3D;&quot;y&quot;&gt;&amp;&lt;/a&gt;|<a href="y">&</a>');
  });

  test('dotted paths, missing values render empty', () => {
    expect(html('{{user.name}}/{{user.missing}}/{{nope.deep}}', { user: { name: 'Ann' } })).toBe('Ann//');
  });

  test('Plunk fallbacks: bare, quoted, raw; used for missing, null and empty values', () => {
    expect(html('{{name ?? there}}', {})).toBe('there');
    expect(html('{{name ?? "dear friend"}}', { name: null })).toBe('dear friend');
    expect(html("{{ name ?? 'x' }}", { name: '' })).toBe('x');
    expect(html('{{name ?? x}}', { name: 'Bo' })).toBe('Bo');
    expect(html('{{{banner ?? "<b>hi</b>"}}}', {})).toBe('<b>hi</b>');
    expect(html('{{tag ?? "<i>"}}', {})).toBe('&lt;i&gt;');
    expect(html('{{user.first ?? "you"}}', { user: {} })).toBe('you');
    expect(rewriteFallbacks('{{a ?? b}} {{{c ?? d}}}')).toBe('{{__fallback a "b"}} {{{__fallback c "d"}}}');
  });

  test('subjects are not HTML-escaped and cannot carry line breaks', () => {
    const r = renderContent({ subject: 'Re: {{x}}\n{{y}}', body: 'b', format: 'html' }, { x: 'A & B <c>', y: 'z\r\nBcc: evil' });
    expect(r.subject).toBe('Re: A & B <c> z Bcc: evil');
  });

  test('markdown bodies become HTML after substitution; the text part is derived from the HTML', () => {
    const r = renderContent({ subject: 's', body: '# Hi {{n}}\n\n[link](https://example.com)', format: 'markdown' }, { n: '<x>' });
    expect(r.html).toContain('<h1>Hi &lt;x&gt;</h1>');
    expect(r.text).toContain('HI <X>');
    expect(r.text).toContain('link [https://example.com]');
  });

  test('prototype properties are not reachable', () => {
    expect(html('{{constructor.name}}{{__proto__}}', {})).toBe('');
  });

  test('syntax errors are reported as TemplateSyntaxError', () => {
    expect(() => assertTemplate('{{#if x}}')).toThrow(TemplateSyntaxError);
    expect(() => assertTemplate('{{x')).toThrow(TemplateSyntaxError);
    expect(() => assertTemplate('plain {{x}} {{{y}}} {{z ?? w}}')).not.toThrow();
  });

  test('splitVariables: persistent:false values render but are not stored', () => {
    expect(splitVariables({ a: 1, b: { value: 2, persistent: false }, c: { value: 3, persistent: true }, d: { value: 4 }, e: null })).toEqual({
      render: { a: 1, b: 2, c: 3, d: { value: 4 }, e: null },
      persist: { a: 1, c: 3, d: { value: 4 }, e: null },
    });
  });
});
