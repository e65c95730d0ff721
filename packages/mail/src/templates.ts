/**
 * The one template implementation: Handlebars, extended with Plunk's fallback form.
 *
 * - `{{var}}` HTML-escaped, `{{{var}}}` raw, dotted paths `{{user.name}}` (Handlebars semantics);
 * - `{{var ?? default}}` / `{{{var ?? default}}}`: `default` when `var` is missing, null or empty
 *   (the default may be bare text or quoted: `{{name ?? "there"}}`).
 *
 * Subjects are rendered without HTML escaping (they are header text; the MIME composer encodes them per
 * RFC 2047). Compiled templates are cached by source, since campaign mail renders one source many times.
 *
 * @module
 */
import Handlebars from 'handlebars';
import { marked } from 'marked';
import { compile as compileHtmlToText } from 'html-to-text';
import type { FieldError } from '@mailroom/platform/errors';

const hbs = Handlebars.create();

// Compiled once: compiling html-to-text's selector options per call was ~9% of the worker's CPU (profiled).
const htmlToText = compileHtmlToText({ wordwrap: 78, selectors: [{ selector: 'img', format: 'skip' }] });

hbs.registerHelper('__fallback', (value: unknown, fallback: unknown) =>
  value === undefined || value === null || value === '' ? fallback : value,
);

/** Raised when a template does not parse; `message` says where. */
export class TemplateSyntaxError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TemplateSyntaxError';
  }
}

const FALLBACK = /(\{\{\{?)\s*([A-Za-z_$@][\w$-]*(?:\.[\w$-]+)*)\s*\?\?\s*(.*?)\s*(\}?\}\})/g;

/** Rewrites `{{a ?? b}}` into a Handlebars helper call; exported for tests. */
export function rewriteFallbacks(source: string): string {
  return source.replace(FALLBACK, (whole, open: string, path: string, rawDefault: string, close: string) => {
    if (open.length !== close.length) return whole;
    const quoted = /^(["'])(.*)\1$/s.exec(rawDefault);
    const value = quoted ? quoted[2] : rawDefault;
    return `${open}__fallback ${path} ${JSON.stringify(value)}${close}`;
  });
}

type Compiled = (context: object) => string;
const cache = new Map<string, Compiled>();
const CACHE_MAX = 500;

function compile(source: string, escape: boolean): Compiled {
  const key = (escape ? 'h:' : 't:') + source;
  const hit = cache.get(key);
  if (hit) return hit;
  let fn: Compiled;
  try {
    const tpl = hbs.compile(rewriteFallbacks(source), { noEscape: !escape, strict: false });
    // Handlebars compiles lazily: force the parse now so syntax errors surface here, not at send time.
    tpl({});
    fn = (ctx) => tpl(ctx, { allowProtoPropertiesByDefault: false, allowProtoMethodsByDefault: false });
  } catch (err) {
    throw new TemplateSyntaxError((err as Error).message.split('\n').slice(0, 3).join(' ').trim());
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
 * Renders subject and body against `context`.
 *
 * @param content - template sources; `format` says whether `body` is HTML or Markdown.
 * @param context - variables; values may be nested objects addressed with dotted paths.
 * @throws {@link TemplateSyntaxError} when a source does not parse.
 */
export function renderContent(
  content: { subject: string; body: string; format: BodyFormat },
  context: Record<string, unknown>,
): RenderedContent {
  const subject = compile(content.subject, false)(context).replace(/[\r\n]+/g, ' ').trim();
  const rendered = compile(content.body, true)(context);
  const html = content.format === 'markdown' ? (marked.parse(rendered, { async: false })) : rendered;
  const text = htmlToText(html);
  return { subject, html, text };
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
      raw !== null && typeof raw === 'object' && !Array.isArray(raw) && 'value' in raw && 'persistent' in raw &&
      typeof (raw as { persistent: unknown }).persistent === 'boolean' && Object.keys(raw).length === 2;
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
