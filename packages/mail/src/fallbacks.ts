/**
 * Plunk's fallback form `{{var ?? default}}` / `{{{var ?? default}}}`, rewritten into a Handlebars helper call
 * (`{{__fallback var "default"}}`) before Handlebars parses the source.
 *
 * The rewrite is a single left-to-right scan with one precomputed table, linear in the source length: the
 * regular expression it replaces (`\s*(.*?)\s*(\}?\}\})` after the `??`) backtracked cubically, so `{{a ?? `
 * followed by 3,000 spaces held the event loop for seconds. It matches exactly what that expression matched:
 *
 * - `{{` or `{{{`, optional whitespace, a path (`[A-Za-z_$@][\w$-]*(\.[\w$-]+)*`), optional whitespace, `??`;
 * - then the default: from the first non-whitespace character up to the first `}}` after it, without the
 *   whitespace before that `}}`, on one line (the default holds no line break; whitespace before `}}` may);
 * - closed by `}}}` when three braces follow, else `}}`; when the opening and closing brace counts differ the
 *   text is left as it is;
 * - a default in matching quotes (`"there"`, `'there'`) loses its quotes.
 *
 * "Whitespace" and "line break" are those of ECMAScript's `\s` and `.`.
 *
 * @module
 */

function isSpace(c: number): boolean {
  return (
    c === 32 ||
    (c >= 9 && c <= 13) ||
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

function isLineTerminator(c: number): boolean {
  return c === 10 || c === 13 || c === 0x2028 || c === 0x2029;
}

function isLetter(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122);
}

/** `[\w$-]` */
function isPathChar(c: number): boolean {
  return isLetter(c) || (c >= 48 && c <= 57) || c === 95 || c === 36 || c === 45;
}

/** `[A-Za-z_$@]` */
function isPathStart(c: number): boolean {
  return isLetter(c) || c === 95 || c === 36 || c === 64;
}

const OPEN = 123; // {
const CLOSE = 125; // }
const QUESTION = 63; // ?

/**
 * For each position `w`: where a default starting at `w` ends (the first `b >= w` followed by optional whitespace
 * and `}}`, with no line break in `[w, b)`), or -1. One backward pass.
 */
function defaultEnds(s: string): Int32Array {
  const n = s.length;
  const end = new Int32Array(n + 1).fill(-1);
  let wsEndNext = n;
  for (let k = n - 1; k >= 0; k--) {
    const c = s.charCodeAt(k);
    const wsEnd = isSpace(c) ? wsEndNext : k;
    const closes = s.charCodeAt(wsEnd) === CLOSE && s.charCodeAt(wsEnd + 1) === CLOSE;
    end[k] = closes ? k : isLineTerminator(c) ? -1 : end[k + 1];
    wsEndNext = wsEnd;
  }
  return end;
}

/** Rewrites every `{{a ?? b}}` of `source` into a `__fallback` helper call (see the module notes); linear time. */
export function rewriteFallbacks(source: string): string {
  if (!source.includes('??')) return source;
  const n = source.length;
  let ends: Int32Array | undefined;
  const skipSpace = (j: number) => {
    while (j < n && isSpace(source.charCodeAt(j))) j++;
    return j;
  };

  /** The fallback opened by `braces` braces at `i`: its replacement and where it ends, or undefined. */
  const matchAt = (i: number, braces: 2 | 3): { text: string; end: number } | undefined => {
    for (let k = 0; k < braces; k++) if (source.charCodeAt(i + k) !== OPEN) return undefined;
    let j = skipSpace(i + braces);
    const pathStart = j;
    if (!isPathStart(source.charCodeAt(j))) return undefined;
    j++;
    while (j < n && isPathChar(source.charCodeAt(j))) j++;
    while (source.charCodeAt(j) === 46 && isPathChar(source.charCodeAt(j + 1))) {
      j += 2;
      while (j < n && isPathChar(source.charCodeAt(j))) j++;
    }
    const path = source.slice(pathStart, j);
    j = skipSpace(j);
    if (source.charCodeAt(j) !== QUESTION || source.charCodeAt(j + 1) !== QUESTION) return undefined;
    const w = skipSpace(j + 2);
    ends ??= defaultEnds(source);
    const b = ends[w];
    if (b < 0) return undefined;
    const c = skipSpace(b);
    const closing = source.charCodeAt(c + 2) === CLOSE ? 3 : 2;
    const end = c + closing;
    if (closing !== braces) return { text: source.slice(i, end), end };
    const rawDefault = source.slice(w, b);
    const quoted =
      rawDefault.length >= 2 &&
      (rawDefault[0] === '"' || rawDefault[0] === "'") &&
      rawDefault[rawDefault.length - 1] === rawDefault[0];
    const value = quoted ? rawDefault.slice(1, -1) : rawDefault;
    const brace = '{'.repeat(braces);
    return { text: `${brace}__fallback ${path} ${JSON.stringify(value)}${'}'.repeat(braces)}`, end };
  };

  let out = '';
  let copied = 0;
  let i = source.indexOf('{{');
  while (i !== -1) {
    const m = matchAt(i, 3) ?? matchAt(i, 2);
    if (m) {
      out += source.slice(copied, i) + m.text;
      copied = m.end;
      i = source.indexOf('{{', m.end);
    } else {
      i = source.indexOf('{{', i + 1);
    }
  }
  return copied === 0 ? source : out + source.slice(copied);
}
