/**
 * Escaped variables (`{{var}}`) of a body stay text whatever the body's language. The body is rendered with
 * every escaped output replaced by an opaque slot token (letters and digits only, with a random per-render
 * nonce); Markdown, when the body is Markdown, is converted with the tokens in place; only then are the tokens
 * replaced by the values, HTML-escaped. So a value such as `[Verify](https://attacker.test)`, `![](https://t/p.gif)`,
 * `<https://attacker.test>` or `<b>x</b>` is shown as written, in HTML and in Markdown bodies alike, and never
 * becomes a link, an image, an autolink or markup.
 *
 * A value that lands where a URL is read (inside a tag, or right after `=` as an attribute value) and whose scheme
 * is `javascript:`, `vbscript:` or `data:` (after dropping the control characters and spaces browsers ignore
 * there) is replaced by `#`: no rendered body carries a script or data URL taken from a variable.
 *
 * Raw outputs (`{{{var}}}`) are left as they are: they insert markup (HTML, or Markdown in a Markdown body) by the
 * template author's choice.
 *
 * @module
 */
import { randomBytes } from 'node:crypto';
import Handlebars from 'handlebars';

/** The helper escaped outputs are routed through. */
export const TEXT_HELPER = '__text';

type Expression = hbs.AST.Expression;

function walk(statements: hbs.AST.Statement[]): void {
  for (const statement of statements) {
    if (statement.type === 'MustacheStatement') {
      const m = statement as hbs.AST.MustacheStatement;
      if (!m.escaped) continue;
      let inner: Expression;
      if (m.params.length === 0 && !m.hash) {
        // `{{"name"}}` / `{{true}}` look a property up by that name (Handlebars' transformLiteralToPath).
        const p = m.path as Expression & { original?: unknown; value?: unknown };
        inner =
          p.type === 'PathExpression' || p.type === 'SubExpression'
            ? p
            : ({
                type: 'PathExpression',
                data: false,
                depth: 0,
                parts: [String(p.original ?? p.value)],
                original: String(p.original ?? p.value),
                loc: p.loc,
              } as hbs.AST.PathExpression);
      } else {
        inner = {
          type: 'SubExpression',
          path: m.path,
          params: m.params,
          hash: m.hash,
          loc: m.loc,
        } as hbs.AST.SubExpression;
      }
      m.path = {
        type: 'PathExpression',
        data: false,
        depth: 0,
        parts: [TEXT_HELPER],
        original: TEXT_HELPER,
        loc: m.loc,
      };
      m.params = [inner];
      m.hash = undefined as unknown as hbs.AST.Hash;
    } else if (statement.type === 'BlockStatement') {
      const b = statement as hbs.AST.BlockStatement;
      walk(b.program?.body ?? []);
      walk(b.inverse?.body ?? []);
    }
  }
}

/** Routes every escaped output of a parsed program through {@link TEXT_HELPER} (in place). */
export function routeEscapedOutputs(program: hbs.AST.Program): hbs.AST.Program {
  walk(program.body);
  return program;
}

/** One render's slots: the values in order, and the token prefix (`mrv<nonce>n`; a token is `<prefix><index>e`). */
export interface TextSlots {
  prefix: string;
  values: unknown[];
}

/**
 * Random bytes for the renders' nonces, drawn from the system's CSPRNG a pool at a time: one `randomBytes` call per
 * 512 renders, not one each (a call cost about as much as the rest of a small email's slot filling). Each nonce is
 * still 64 fresh random bits, used once.
 */
const NONCE_BYTES = 8;
const noncePool = { bytes: Buffer.alloc(0), at: 0 };

function nextNonce(): string {
  if (noncePool.at + NONCE_BYTES > noncePool.bytes.length) {
    noncePool.bytes = randomBytes(NONCE_BYTES * 512);
    noncePool.at = 0;
  }
  const nonce = noncePool.bytes.toString('hex', noncePool.at, noncePool.at + NONCE_BYTES);
  noncePool.at += NONCE_BYTES;
  return nonce;
}

/** Fresh slots for one render: a nonce of 64 random bits no other render shares. */
export function newTextSlots(): TextSlots {
  return { prefix: `mrv${nextNonce()}n`, values: [] };
}

/** Registers {@link TEXT_HELPER} on a Handlebars environment: it stores the value and outputs its token. */
export function registerTextHelper(env: typeof Handlebars): void {
  env.registerHelper(TEXT_HELPER, (value: unknown, options: { data?: { textSlots?: TextSlots } }) => {
    const slots = options?.data?.textSlots;
    if (!slots) return value;
    slots.values.push(value);
    return new env.SafeString(`${slots.prefix}${slots.values.length - 1}e`);
  });
}

/** Any render's slot token: `mrv`, the 16 hex digits of its nonce, `n`, the value's index, `e`. */
const ANY_TOKEN = /mrv([0-9a-f]{16})n(\d+)e/g;

const DANGEROUS_SCHEME = /^(?:javascript|vbscript|data):/;

/** Whether a URL read by a browser from `value` would run script or carry inline data. */
export function isDangerousUrl(value: string): boolean {
  // Browsers drop leading C0 controls and spaces, and tabs and line breaks anywhere in the scheme.
  return DANGEROUS_SCHEME.test(
    value
      .slice(0, 64)
      .replace(/[\u0000-\u0020]/g, '')
      .toLowerCase(),
  );
}

/** Is the text just before `pos` an attribute's `=` (with optional spaces and an opening quote)? Looks back 16 characters at most. */
function afterEquals(html: string, pos: number): boolean {
  let i = pos - 1;
  const stop = Math.max(0, pos - 16);
  if (i >= 0 && (html[i] === '"' || html[i] === "'")) i--;
  while (i >= stop && /\s/.test(html[i])) i--;
  return i >= 0 && html[i] === '=';
}

/**
 * Replaces the tokens of `slots` in `html` by their values, HTML-escaped as Handlebars escapes `{{var}}`; a value
 * in a URL position with a script or data scheme becomes `#` (see the module notes). One pass, linear in `html`.
 */
export function fillTextSlots(html: string, slots: TextSlots): string {
  if (slots.values.length === 0) return html;
  let scanned = 0;
  let inTag = false;
  // One pattern for every render (a pattern made per render from its prefix was compiled anew each time: as much
  // CPU as the rest of a small email's composing); a token of another nonce is left as it is, as that pattern would.
  return html.replace(ANY_TOKEN, (whole: string, nonce: string, index: string, offset: number) => {
    if (`mrv${nonce}n` !== slots.prefix) return whole;
    // Whether the token is inside a tag: the last `<` or `>` before it. The text between tokens is read once, by
    // the native `lastIndexOf` over it (a loop over its characters in JavaScript cost more than the render).
    const between = html.slice(scanned, offset);
    const lt = between.lastIndexOf('<');
    const gt = between.lastIndexOf('>');
    if (lt !== gt) inTag = lt > gt;
    scanned = offset;
    const value = slots.values[Number(index)];
    const text = Handlebars.escapeExpression(value as string);
    if ((inTag || afterEquals(html, offset)) && isDangerousUrl(String(text))) return '#';
    return text;
  });
}
