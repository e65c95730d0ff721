import {
  assertTemplate,
  ContentRenderError,
  renderContent,
  renderContext,
  splitVariables,
  TemplateSyntaxError,
} from './templates';
import { rewriteFallbacks } from './fallbacks';
import { newTextSlots } from './text-slots';

const html = (body: string, ctx: Record<string, unknown>) =>
  renderContent({ subject: 's', body, format: 'html' }, ctx).html;

describe('template language', () => {
  test('{{var}} escapes HTML, {{{var}}} does not', () => {
    expect(html('{{x}}|{{{x}}}', { x: '<a href="y">&</a>' })).toBe(
      '&lt;a href&#x3D;&quot;y&quot;&gt;&amp;&lt;/a&gt;|<a href="y">&</a>',
    );
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
    const r = renderContent(
      { subject: 'Re: {{x}}\n{{y}}', body: 'b', format: 'html' },
      { x: 'A & B <c>', y: 'z\r\nBcc: evil' },
    );
    expect(r.subject).toBe('Re: A & B <c> z Bcc: evil');
  });

  test('markdown bodies become HTML after substitution; the text part is derived from the HTML', () => {
    const r = renderContent(
      { subject: 's', body: '# Hi {{n}}\n\n[link](https://example.com)', format: 'markdown' },
      { n: '<x>' },
    );
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
    expect(
      splitVariables({
        a: 1,
        b: { value: 2, persistent: false },
        c: { value: 3, persistent: true },
        d: { value: 4 },
        e: null,
      }),
    ).toEqual({
      render: { a: 1, b: 2, c: 3, d: { value: 4 }, e: null },
      persist: { a: 1, c: 3, d: { value: 4 }, e: null },
    });
  });
});

describe('variables stay text (HTML and Markdown bodies)', () => {
  const md = (body: string, ctx: Record<string, unknown>) =>
    renderContent({ subject: 's', body, format: 'markdown' }, ctx).html;
  const vectors: Array<[string, string]> = [
    ['link', '[Verify your account](https://attacker.test/phish)'],
    ['javascript: link', '[Verify](javascript:alert(1))'],
    ['image (tracking pixel)', '![](https://tracker.test/p.gif)'],
    ['autolink', '<https://attacker.test/a> https://attacker.test/b www.attacker.test x@attacker.test'],
    ['raw HTML', '<a href="https://attacker.test">x</a><img src="https://tracker.test/p.gif">'],
    ['block structure', '\n\n# Heading\n\n> quote\n\n    code'],
  ];
  test.each(vectors)('Markdown: %s in data is shown as written', (_what, value) => {
    const out = md('Hello {{name}}, welcome.', { name: value });
    expect(out).not.toMatch(/<(a|img|h1|blockquote|pre)\b/);
    expect(out).not.toMatch(/\s(href|src)=["']/);
  });
  test.each(vectors)('HTML: %s in data is shown as written', (_what, value) => {
    const out = renderContent({ subject: 's', body: '<p>Hello {{name}}</p>', format: 'html' }, { name: value }).html;
    expect(out).not.toMatch(/<(a|img)\b/);
  });

  test('a variable in a link or image URL keeps working, but never as a script or data URL', () => {
    expect(md('[Go]({{url}})', { url: 'https://ok.test/a_b?x=1' })).toContain('href="https://ok.test/a_b?x&#x3D;1"');
    for (const url of [
      'javascript:alert(1)',
      ' JaVaScRiPt:alert(1)',
      'java\tscript:alert(1)',
      'data:text/html;base64,PHNjcmlwdD4=',
      'vbscript:x',
    ]) {
      expect(md('[Go]({{url}}) ![i]({{url}})', { url })).toBe('<p><a href="#">Go</a> <img src="#" alt="i"></p>\n');
      expect(
        renderContent(
          { subject: 's', body: '<a href="{{url}}">a</a><a href={{url}}>b</a><img src = "{{url}}">', format: 'html' },
          { url },
        ).html,
      ).toBe('<a href="#">a</a><a href=#>b</a><img src = "#">');
    }
    // The same words as text stay as they are.
    expect(md('{{url}}', { url: 'data: 5 items' })).toBe('<p>data: 5 items</p>\n');
  });

  test('each, with, lookup, fallbacks and raw outputs render as before', () => {
    const out = renderContent(
      {
        subject: 's',
        body: '{{#each items}}<li>{{this}} {{@index}} {{../name}}</li>{{/each}}{{#with user}}{{first}}{{/with}} {{lookup user "first"}} {{x ?? "d<"}} {{{raw}}}',
        format: 'html',
      },
      { items: ['<a>', 'b'], name: 'N&', user: { first: 'U<' }, raw: '<b>r</b>' },
    ).html;
    expect(out).toBe('<li>&lt;a&gt; 0 N&amp;</li><li>b 1 N&amp;</li>U&lt; U&lt; d&lt; <b>r</b>');
  });

  test('a raw value that nests too deep for the converters is a ContentRenderError, not a RangeError', () => {
    expect(() =>
      renderContent({ subject: 's', body: '{{{deep}}}', format: 'html' }, { deep: '<div>'.repeat(20_000) }),
    ).toThrow(ContentRenderError);
  });
});

describe('text slots', () => {
  test('every render draws a nonce of its own (64 random bits)', () => {
    const prefixes = new Set<string>();
    for (let i = 0; i < 3000; i++) {
      const { prefix } = newTextSlots();
      expect(prefix).toMatch(/^mrv[0-9a-f]{16}n$/);
      prefixes.add(prefix);
    }
    expect(prefixes.size).toBe(3000);
  });

  test('a value shaped like a slot token, or another render’s token, stays as written', () => {
    const other = `${newTextSlots().prefix}0e`;
    const lookalike = 'mrv0123456789abcdefn0e';
    expect(html('<p>{{a}} {{b}} {{c}}</p>', { a: other, b: lookalike, c: '<b>' })).toBe(
      `<p>${other} ${lookalike} &lt;b&gt;</p>`,
    );
    expect(html('<a href="{{u}}">x</a> {{u}}', { u: 'javascript:alert(1)' })).toBe(
      '<a href="#">x</a> javascript:alert(1)',
    );
  });
});

describe('renderContext', () => {
  test('plunk_id and plunk_email come from the contact; data cannot replace them or unsubscribeUrl', () => {
    const ctx = renderContext({
      contact: { id: 'c-1', email: 'ann@x.test', data: { plunk_id: 'stored', plan: 'pro' } },
      variables: { plunk_id: 'forged', plunk_email: 'forged@x.test', unsubscribeUrl: 'https://evil.test', name: 'Ann' },
      unsubscribeUrl: 'https://mail.test/unsubscribe/t',
    });
    expect(ctx).toEqual({
      email: 'ann@x.test',
      plan: 'pro',
      name: 'Ann',
      unsubscribeUrl: 'https://mail.test/unsubscribe/t',
      plunk_id: 'c-1',
      plunk_email: 'ann@x.test',
    });
    expect(renderContent({ subject: '{{plunk_email}}', body: '{{plunk_id}}', format: 'html' }, ctx)).toMatchObject({
      subject: 'ann@x.test',
      html: 'c-1',
    });
    expect(renderContext({ variables: { plunk_id: 'x' }, unsubscribeUrl: 'u' })).toEqual({ unsubscribeUrl: 'u' });
  });
});

describe('plain-text alternative', () => {
  test('the same HTML gives the same text again (cached), other HTML its own, an unsubscribe link its own', () => {
    const body = '<h1>News</h1><p>{{greeting}}, see <a href="https://x.test/a">this</a>.</p>';
    const render = (greeting: string, unsubscribeUrl = 'https://mail.test/u/t') =>
      renderContent({ subject: 's', body, format: 'html' }, { greeting, unsubscribeUrl });
    const first = render('Hello');
    expect(first.text).toContain('Hello, see this [https://x.test/a].');
    expect(render('Hello')).toEqual(first);
    expect(render('Bye').text).toContain('Bye, see this');
    const linked = (token: string) =>
      renderContent(
        { subject: 's', body: '<p>{{greeting}} <a href="{{unsubscribeUrl}}">stop</a></p>', format: 'html' },
        { greeting: 'Hi', unsubscribeUrl: `https://mail.test/u/${token}` },
      ).text;
    expect(linked('one')).toContain('stop [https://mail.test/u/one]');
    expect(linked('two')).toContain('stop [https://mail.test/u/two]');
  });
});
