/**
 * The one template implementation: Handlebars, extended with Plunk's fallback form.
 *
 * - `{{var}}` HTML-escaped, `{{{var}}}` raw, dotted paths `{{user.name}}` (Handlebars semantics);
 * - `{{var ?? default}}` / `{{{var ?? default}}}`: `default` when `var` is missing, null or empty
 *   (the default may be bare text or quoted: `{{name ?? "there"}}`; `./fallbacks`).
 *
 * In a body, escaped values stay text in HTML and in Markdown alike, and never put a script or data URL in a link
 * (`./text-slots`). Subjects are rendered without HTML escaping (they are header text; the MIME composer encodes
 * them per RFC 2047). Compiled templates are cached by source, since campaign mail renders one source many times, and
 * the plain-text alternative by the HTML it was made from (bounded; see `textCache`).
 * The context every render uses is built by {@link renderContext}.
 *
 * @module
 */
import Handlebars from 'handlebars';
import { marked } from 'marked';
import { compile as compileHtmlToText } from 'html-to-text';
import type { FieldError } from '@mailroom/platform/errors';
import { rewriteFallbacks } from './fallbacks';
import { fillTextSlots, newTextSlots, registerTextHelper, routeEscapedOutputs } from './text-slots';
import { errorMessage } from '@mailroom/platform/errors';

const hbs = Handlebars.create();

// Compiled once: compiling html-to-text's selector options per call was ~9% of the worker's CPU (profiled).
const htmlToText = compileHtmlToText({ wordwrap: 78, selectors: [{ selector: 'img', format: 'skip' }] });

hbs.registerHelper('__fallback', (value: unknown, fallback: unknown) =>
  value === undefined || value === null || value === '' ? fallback : value,
);
registerTextHelper(hbs);

/** Raised when a template does not parse; `message` says where. */
export class TemplateSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateSyntaxError';
  }
}

/**
 * Raised when content parses but cannot be rendered (nesting deeper than the Markdown or HTML-to-text
 * converters can recurse, typically from a raw `{{{var}}}` value): retrying cannot help.
 */
export class ContentRenderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ContentRenderError';
  }
}

/**
 * Plain-text alternatives by the HTML they were made from: a campaign whose body renders alike for every recipient
 * converts it once. html-to-text is a pure function of the HTML (its options are fixed above). At most
 * `TEXT_CACHE_ENTRIES` entries and `TEXT_CACHE_BYTES` bytes (HTML and text as UTF-16, so 2 bytes a character),
 * least recently used out first; an HTML over `TEXT_CACHE_BYTES / 16` is never kept, nor one holding its email's own
 * unsubscribe URL (no other email can render it).
 */
const textCache = new Map<string, string>();
const TEXT_CACHE_ENTRIES = 64;
const TEXT_CACHE_BYTES = 8 * 1024 * 1024;
let textCacheBytes = 0;

function plainText(html: string, unique: unknown): string {
  const cacheable =
    html.length * 2 <= TEXT_CACHE_BYTES / 16 && !(typeof unique === 'string' && unique && html.includes(unique));
  if (!cacheable) return htmlToText(html);
  const hit = textCache.get(html);
  if (hit !== undefined) {
    textCache.delete(html);
    textCache.set(html, hit);
    return hit;
  }
  const text = htmlToText(html);
  textCache.set(html, text);
  textCacheBytes += (html.length + text.length) * 2;
  while (textCache.size > TEXT_CACHE_ENTRIES || textCacheBytes > TEXT_CACHE_BYTES) {
    const [oldHtml, oldText] = textCache.entries().next().value!;
    textCache.delete(oldHtml);
    textCacheBytes -= (oldHtml.length + oldText.length) * 2;
  }
  return text;
}

type Compiled = (context: object, options?: { data?: object }) => string;
const cache = new Map<string, Compiled>();
const CACHE_MAX = 500;

function compile(source: string, escape: boolean): Compiled {
  const key = (escape ? 'h:' : 't:') + source;
  const hit = cache.get(key);
  if (hit) return hit;
  let fn: Compiled;
  try {
    const rewritten = rewriteFallbacks(source);
    // A body's escaped outputs become text slots (./text-slots); subjects and JSON bodies are not escaped at all.
    const input = escape ? routeEscapedOutputs(hbs.parseWithoutProcessing(rewritten)) : rewritten;
    const tpl = hbs.compile(input, { noEscape: !escape, strict: false });
    // Handlebars compiles lazily: force the parse now so syntax errors surface here, not at send time.
    tpl({});
    fn = (ctx, options) =>
      tpl(ctx, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false, ...options });
  } catch (err) {
    throw new TemplateSyntaxError(errorMessage(err).split('\n').slice(0, 3).join(' ').trim());
  }
  if (cache.size >= CACHE_MAX) cache.delete(cache.keys().next().value!);
  cache.set(key, fn);
  return fn;
}

/**
 * Checks that a template source parses.
 *
 * @throws {@link TemplateSyntaxError}
 */
export function assertTemplate(source: string): void {
  compile(source, true);
}

/**
 * Syntax errors of template sources, as field errors.
 *
 * @param sources - field name → template source (`undefined` entries are skipped).
 * @param fieldName - maps a source's key to the reported field (e.g. `template` when it came from a template).
 */
export function templateSyntaxErrors(
  sources: Record<string, string | undefined>,
  fieldName: (key: string) => string = (key) => key,
): FieldError[] {
  const errors: FieldError[] = [];
  for (const [key, source] of Object.entries(sources)) {
    if (source === undefined) continue;
    try {
      assertTemplate(source);
    } catch (err) {
      if (!(err instanceof TemplateSyntaxError)) throw err;
      errors.push({ field: fieldName(key), message: `template syntax error: ${err.message}`, code: 'custom' });
    }
  }
  return errors;
}

/** Body source language: HTML, or Markdown converted to HTML after variables are substituted. */
export type BodyFormat = 'html' | 'markdown';

/** A rendered message: subject (plain text), HTML body and its plain-text alternative. */
export interface RenderedContent {
  subject: string;
  html: string;
  text: string;
}

/**
 * Renders subject and body against `context` (built by {@link renderContext}).
 *
 * @param content - template sources; `format` says whether `body` is HTML or Markdown.
 * @param context - variables; values may be nested objects addressed with dotted paths.
 * @throws {@link TemplateSyntaxError} when a source does not parse; {@link ContentRenderError} when the result
 *   nests too deep for the converters.
 */
export function renderContent(
  content: { subject: string; body: string; format: BodyFormat },
  context: Record<string, unknown>,
): RenderedContent {
  const subject = compile(
    content.subject,
    false,
  )(context)
    .replace(/[\r\n]+/g, ' ')
    .trim();
  const slots = newTextSlots();
  const rendered = compile(content.body, true)(context, { data: { textSlots: slots } });
  try {
    const markup = content.format === 'markdown' ? marked.parse(rendered, { async: false }) : rendered;
    const html = fillTextSlots(markup, slots);
    return { subject, html, text: plainText(html, context.unsubscribeUrl) };
  } catch (err) {
    // marked and html-to-text recurse once per nesting level; acceptance limits the sources (content-limits.ts),
    // but a raw `{{{var}}}` value can still nest deeper.
    if (err instanceof RangeError) throw new ContentRenderError('the body nests too deeply to render');
    throw err;
  }
}

/** Variables the platform sets in every render; request and contact data cannot replace them. */
export const PLATFORM_VARIABLES = ['unsubscribeUrl', 'plunk_id', 'plunk_email'] as const;

/**
 * The one render context of an email (and of a preview): the contact's `email` and stored data, the request's
 * variables over them, then the platform's variables, which data never replaces: `unsubscribeUrl`, and Plunk's
 * `plunk_id` (the contact's id) and `plunk_email` (its address).
 *
 * @param a.contact - the recipient contact; without one (a preview with no contact) `email`, `plunk_id` and
 *   `plunk_email` are absent.
 */
export function renderContext(a: {
  contact?: { id: string | null; email: string; data?: Record<string, unknown> | null };
  variables?: Record<string, unknown>;
  unsubscribeUrl: string;
}): Record<string, unknown> {
  const { contact } = a;
  const context: Record<string, unknown> = {
    ...(contact ? { email: contact.email, ...(contact.data ?? {}) } : {}),
    ...(a.variables ?? {}),
  };
  for (const key of PLATFORM_VARIABLES) delete context[key];
  context.unsubscribeUrl = a.unsubscribeUrl;
  if (contact) {
    context.plunk_id = contact.id ?? '';
    context.plunk_email = contact.email;
  }
  return context;
}

/**
 * Unwraps Plunk's `{ value, persistent }` variables into plain values for rendering.
 *
 * @returns `render`: every variable; `persist`: only those to store on the contact (not `persistent: false`).
 */
export function splitVariables(data: Record<string, unknown> | undefined): {
  render: Record<string, unknown>;
  persist: Record<string, unknown>;
} {
  const render: Record<string, unknown> = {};
  const persist: Record<string, unknown> = {};
  for (const [key, raw] of Object.entries(data ?? {})) {
    const wrapped =
      raw !== null &&
      typeof raw === 'object' &&
      !Array.isArray(raw) &&
      'value' in raw &&
      'persistent' in raw &&
      typeof (raw as { persistent: unknown }).persistent === 'boolean' &&
      Object.keys(raw).length === 2;
    const value = wrapped ? (raw as { value: unknown }).value : raw;
    render[key] = value;
    if (!wrapped || (raw as { persistent: boolean }).persistent) persist[key] = value;
  }
  return { render, persist };
}

function jsonEscapeStrings(value: unknown, depth = 0): unknown {
  if (typeof value === 'string') return JSON.stringify(value).slice(1, -1);
  if (depth > 20 || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map((v) => jsonEscapeStrings(v, depth + 1));
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, jsonEscapeStrings(v, depth + 1)]));
}

/**
 * Renders a JSON body template (workflow WEBHOOK steps): the same language, but every string value is inserted
 * JSON-string-escaped instead of HTML-escaped, so `"{{contact.name}}"` is always one valid JSON string whatever the
 * data holds (quotes, backslashes, newlines). Numbers and booleans are inserted as written.
 *
 * @throws {@link TemplateSyntaxError} when the source does not parse.
 */
export function renderJsonTemplate(source: string, context: Record<string, unknown>): string {
  return compile(source, false)(jsonEscapeStrings(context) as object);
}
