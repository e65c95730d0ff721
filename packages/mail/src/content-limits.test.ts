import { marked } from 'marked';
import { compile } from 'html-to-text';
import {
  CONTENT_LIMITS,
  contentLimitErrors,
  htmlNestingDepth,
  markdownNestingDepth,
  markdownShape,
} from './content-limits';

const LIMIT = CONTENT_LIMITS.nestingDepth;
const fields = (errors: { field: string }[]) => errors.map((e) => e.field);

describe('nesting depth', () => {
  test('HTML: elements as htmlparser2 nests them (void elements and implied end tags do not nest)', () => {
    expect(htmlNestingDepth('<div><p>a<b>b</b></p></div>')).toBe(3);
    expect(htmlNestingDepth('<p>x'.repeat(1000))).toBe(1);
    expect(htmlNestingDepth('<div>' + '<br><img src=x>'.repeat(1000) + '</div>')).toBe(2);
    expect(htmlNestingDepth('<div>'.repeat(5000))).toBe(5000);
    expect(htmlNestingDepth('<div>'.repeat(5000), LIMIT)).toBe(LIMIT + 1);
  });

  test('Markdown: block quotes, list items (markers and indentation) and emphasis', () => {
    expect(
      markdownNestingDepth('# Hi\n\n*a* **b** _c_ ~~d~~\n\n- a\n  - b\n    - c\n\n> q\n> > q\n\n***\n\n1. x'),
    ).toBe(3);
    expect(markdownNestingDepth('>'.repeat(5000) + ' x')).toBe(5000);
    expect(markdownNestingDepth('> '.repeat(300) + 'x')).toBe(300);
    expect(markdownNestingDepth('- '.repeat(300) + 'x')).toBe(300);
    expect(
      markdownNestingDepth(Array.from({ length: 250 }, (_, i) => `${'  '.repeat(i)}- x`).join('\n')),
    ).toBeGreaterThan(LIMIT);
    expect(markdownNestingDepth('**'.repeat(2500) + 'x' + '**'.repeat(2500))).toBe(5000);
    expect(markdownNestingDepth('a*b '.repeat(1000))).toBeLessThan(LIMIT);
  });

  test('the limit is far below where the converters overflow, and what it accepts renders', () => {
    const h2t = compile({ wordwrap: 78 });
    const html = '<div>'.repeat(LIMIT) + 'x' + '</div>'.repeat(LIMIT);
    expect(contentLimitErrors({ body: html }, 'html')).toEqual([]);
    expect(() => h2t(html)).not.toThrow();
    const md = '> '.repeat(LIMIT) + 'x';
    expect(contentLimitErrors({ body: md }, 'markdown')).toEqual([]);
    expect(() => h2t(marked.parse(md, { async: false }))).not.toThrow();
  });
});

describe('contentLimitErrors', () => {
  test('refuses each vector naming the field', () => {
    expect(fields(contentLimitErrors({ body: '<blockquote>'.repeat(5000) }, 'markdown'))).toEqual(['body']);
    expect(fields(contentLimitErrors({ body: '<div>'.repeat(5000) }, 'html'))).toEqual(['body']);
    expect(fields(contentLimitErrors({ body: '>'.repeat(5000) + ' x' }, 'markdown'))).toEqual(['body']);
    // Markdown structure means nothing in an HTML body.
    expect(contentLimitErrors({ body: '>'.repeat(5000) + ' x' }, 'html')).toEqual([]);
    expect(
      contentLimitErrors({ subject: 's'.repeat(999), body: 'b'.repeat(CONTENT_LIMITS.bodyChars + 1) }, 'html'),
    ).toEqual([
      { field: 'subject', message: expect.stringContaining('998'), code: 'too_big' },
      { field: 'body', message: expect.stringContaining('2000000'), code: 'too_big' },
    ]);
    expect(
      fields(contentLimitErrors({ body: '<div>'.repeat(300) }, 'html', { subject: 'template', body: 'template' })),
    ).toEqual(['template']);
  });

  test('Markdown paragraphs: link openings and emphasis runs (what marked takes super-linear time on)', () => {
    expect(markdownShape('[a]('.repeat(10)).paragraphLinkOpenings).toBe(10);
    expect(markdownShape('[a](b)\n\n'.repeat(1000)).paragraphLinkOpenings).toBe(1);
    expect(fields(contentLimitErrors({ body: '[a]('.repeat(2500) }, 'markdown'))).toEqual(['body']);
    expect(fields(contentLimitErrors({ body: '_a'.repeat(50_000) }, 'markdown'))).toEqual(['body']);
    expect(contentLimitErrors({ body: 'see [a](b) and *c*.\n\n'.repeat(10_000) }, 'markdown')).toEqual([]);
  });
});
