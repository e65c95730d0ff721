/**
 * Size and nesting limits of message content, checked wherever a subject or body is taken (`/v1/send`,
 * templates, campaigns, previews, the Plunk import) so that what is accepted can be rendered.
 *
 * - Subject: at most 998 characters, RFC 5322 §2.1.1's line limit (the rendered subject is one header line
 *   before folding).
 * - Body: at most 2,000,000 characters (the request body limit leaves room for attachments; SES takes 40 MB).
 * - Nesting: at most {@link CONTENT_LIMITS}`.nestingDepth` levels of HTML elements (as htmlparser2, the parser
 *   of the plain-text conversion, builds them), of Markdown block containers (block quotes and list items), and of
 *   Markdown emphasis delimiters. marked's tokenizer and html-to-text's converter recurse once per level: about
 *   2,300 nested elements or 2,500 nested block quotes overflow the stack (measured with Node 20's default stack).
 * - Markdown paragraphs: at most 200 link openings `](` and 2,000 emphasis delimiter runs each. marked 15 takes
 *   cubic time in the first (2,500 unclosed `[a](`, 10 KB, ran over a minute) and quadratic in the second
 *   (50,000 `_a`: 17 s); at the limits it takes tens of milliseconds.
 *
 * The depth measures are single passes without recursion and are upper bounds of the renderers' recursion.
 *
 * @module
 */
import { Parser } from 'htmlparser2';
import type { FieldError } from '@mailroom/platform/errors';

/** The limits (characters, levels). */
export const CONTENT_LIMITS = {
  subjectChars: 998,
  bodyChars: 2_000_000,
  nestingDepth: 200,
  /** Per Markdown paragraph: link destinations opened (`](`); marked 15's link rule is cubic in them. */
  paragraphLinkOpenings: 200,
  /** Per Markdown paragraph: emphasis delimiter runs (`*`, `_`, `~`); marked 15 is quadratic in them. */
  paragraphDelimiterRuns: 2_000,
} as const;

class DeepEnough extends Error {}

/**
 * The deepest nesting of HTML elements in `html`, as htmlparser2 opens and closes them (void elements and implied
 * end tags included). Stops counting once `stopAbove` is passed.
 */
export function htmlNestingDepth(html: string, stopAbove = Infinity): number {
  let depth = 0;
  let max = 0;
  const parser = new Parser(
    {
      onopentag() {
        depth++;
        if (depth > max) max = depth;
        if (max > stopAbove) throw new DeepEnough();
      },
      onclosetag() {
        depth--;
      },
    },
    { decodeEntities: false },
  );
  try {
    parser.write(html);
    parser.end();
  } catch (err) {
    if (!(err instanceof DeepEnough)) throw err;
  }
  return max;
}

/** Skips up to three spaces of indentation (a tab counts as four columns); @returns [next index, columns]. */
function indentation(s: string, i: number, end: number): [number, number] {
  let cols = 0;
  while (i < end) {
    const c = s.charCodeAt(i);
    if (c === 32) cols += 1;
    else if (c === 9) cols += 4 - (cols % 4);
    else break;
    i++;
  }
  return [i, cols];
}

/** A list marker at `i` (`-`, `+`, `*`, or 1–9 digits and `.` or `)`, then a space, a tab or the line's end): its length, else 0. */
function listMarker(s: string, i: number, end: number): number {
  let j = i;
  const c = s.charCodeAt(j);
  if (c === 45 || c === 43 || c === 42) j++;
  else {
    while (j < end && j - i < 9 && s.charCodeAt(j) >= 48 && s.charCodeAt(j) <= 57) j++;
    if (j === i || (s.charCodeAt(j) !== 46 && s.charCodeAt(j) !== 41)) return 0;
    j++;
  }
  const next = s.charCodeAt(j);
  return j >= end || next === 32 || next === 9 ? j - i : 0;
}

const EMPHASIS = new Set([42, 95, 126]); // * _ ~

function isBlank(c: number): boolean {
  return Number.isNaN(c) || c === 32 || c === 9 || c === 10 || c === 13;
}

/**
 * An upper bound of the nesting marked builds from Markdown source `md`: per line, the block quote (`>`) and list
 * markers it opens plus half its indentation when it starts a list item or block quote (a nested list needs two
 * more columns per level); per paragraph, emphasis delimiters opened and not yet closed (`*`, `_`, `~` runs that
 * can open count their length, runs that can only close take it back). Raw HTML in Markdown is measured by
 * {@link htmlNestingDepth}.
 */
export function markdownNestingDepth(md: string): number {
  return markdownShape(md).depth;
}

/**
 * One pass over Markdown source: {@link markdownNestingDepth}'s `depth`, and the most link openings (`](`) and
 * emphasis delimiter runs found in one paragraph (what marked's inline rules take super-linear time on).
 */
export function markdownShape(md: string): {
  depth: number;
  paragraphLinkOpenings: number;
  paragraphDelimiterRuns: number;
} {
  let max = 0;
  let open = 0;
  let links = 0;
  let runs = 0;
  let maxLinks = 0;
  let maxRuns = 0;
  let lineStart = 0;
  const n = md.length;
  while (lineStart <= n) {
    let lineEnd = md.indexOf('\n', lineStart);
    if (lineEnd === -1) lineEnd = n;
    const [start, cols] = indentation(md, lineStart, lineEnd);
    let i = start;
    if (i === lineEnd || (i === lineEnd - 1 && md.charCodeAt(i) === 13)) open = links = runs = 0; // a blank line ends the paragraph
    let containers = 0;
    for (;;) {
      if (md.charCodeAt(i) === 62) {
        containers++;
        i++;
      } else {
        const marker = i < lineEnd ? listMarker(md, i, lineEnd) : 0;
        if (marker === 0) break;
        containers++;
        i += marker;
      }
      i = indentation(md, i, lineEnd)[0];
    }
    if (containers > 0) max = Math.max(max, containers + Math.floor(cols / 2));
    for (let k = i; k < lineEnd;) {
      const c = md.charCodeAt(k);
      if (!EMPHASIS.has(c)) {
        if (c === 93 && md.charCodeAt(k + 1) === 40) maxLinks = Math.max(maxLinks, ++links);
        k++;
        continue;
      }
      maxRuns = Math.max(maxRuns, ++runs);
      let e = k;
      while (e < lineEnd && md.charCodeAt(e) === c) e++;
      const canOpen = !isBlank(md.charCodeAt(e)) && e < lineEnd;
      const canClose = k > lineStart && !isBlank(md.charCodeAt(k - 1));
      if (canOpen && (!canClose || open === 0)) open += e - k;
      else if (canClose) open = Math.max(0, open - (e - k));
      max = Math.max(max, open);
      k = e;
    }
    lineStart = lineEnd + 1;
  }
  return { depth: max, paragraphLinkOpenings: maxLinks, paragraphDelimiterRuns: maxRuns };
}

/** Source language of a body. */
export type ContentFormat = 'html' | 'markdown';

/**
 * The limit errors of a subject and body as accepted: lengths, then nesting depth (HTML for both formats, since
 * Markdown passes raw HTML through; Markdown's own for `markdown`).
 *
 * @param fields - field names to report (`{ subject: 'subject', body: 'body' }` unless given; a template's
 *   content reports `template`).
 */
export function contentLimitErrors(
  content: { subject?: string; body?: string },
  format: ContentFormat,
  fields: { subject: string; body: string } = { subject: 'subject', body: 'body' },
): FieldError[] {
  const errors: FieldError[] = [];
  const { subject, body } = content;
  const L = CONTENT_LIMITS;
  if (subject !== undefined && subject.length > L.subjectChars) {
    errors.push({
      field: fields.subject,
      message: `must be at most ${L.subjectChars} characters (RFC 5322 line length)`,
      code: 'too_big',
    });
  }
  if (body === undefined) return errors;
  if (body.length > L.bodyChars) {
    errors.push({ field: fields.body, message: `must be at most ${L.bodyChars} characters`, code: 'too_big' });
    return errors;
  }
  const html = htmlNestingDepth(body, L.nestingDepth);
  const markdown =
    format === 'markdown' ? markdownShape(body) : { depth: 0, paragraphLinkOpenings: 0, paragraphDelimiterRuns: 0 };
  if (html > L.nestingDepth || markdown.depth > L.nestingDepth) {
    const what = html > L.nestingDepth ? 'HTML elements' : 'Markdown block quotes, lists or emphasis';
    errors.push({ field: fields.body, message: `nests ${what} deeper than ${L.nestingDepth} levels`, code: 'too_big' });
  } else if (markdown.paragraphLinkOpenings > L.paragraphLinkOpenings) {
    errors.push({
      field: fields.body,
      message: `has a Markdown paragraph with more than ${L.paragraphLinkOpenings} links`,
      code: 'too_big',
    });
  } else if (markdown.paragraphDelimiterRuns > L.paragraphDelimiterRuns) {
    errors.push({
      field: fields.body,
      message: `has a Markdown paragraph with more than ${L.paragraphDelimiterRuns} emphasis markers (*, _, ~)`,
      code: 'too_big',
    });
  }
  return errors;
}
