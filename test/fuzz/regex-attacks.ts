/**
 * Regular expressions of the source tree and adversarial inputs for them (for the regex timing test).
 *
 * - {@link sourceRegexes}: every regex literal, every `new RegExp('…', '…')` with literal arguments and every
 *   schema `pattern: '…'` (ajv compiles those with the `u` flag) in the TypeScript sources under the given
 *   folders, read with the TypeScript parser, with file and line.
 * - {@link attackInputs}: inputs of about `size` characters built from the regex's own syntax tree (regexpp):
 *   for every unbounded quantifier, a prefix that leads the regex up to it (the shortest text matching what comes
 *   before it), then one character the quantified part accepts, repeated, then a character that makes the match
 *   fail; plus every probe character repeated on its own. That is the shape of catastrophic-backtracking attacks
 *   (prefix · pump^n · suffix): a regex whose time grows faster than the input shows it on one of them.
 */
import fs from 'node:fs';
import path from 'node:path';
import ts from 'typescript';
import { RegExpParser, type AST } from '@eslint-community/regexpp';

/** One regex found in the sources. */
export interface SourceRegex {
  /** `file:line` */
  where: string;
  source: string;
  flags: string;
  kind: 'literal' | 'new RegExp' | 'schema pattern';
}

function sourceFiles(dir: string, ext: '.ts' | '.js'): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'node_modules' && entry.name !== 'dist') out.push(...sourceFiles(full, ext));
    } else if (entry.name.endsWith(ext) && !entry.name.endsWith(`.test${ext}`) && !entry.name.endsWith('.d.ts')) {
      out.push(full);
    }
  }
  return out;
}

/**
 * The regexes of every non-test `.ts` file under `dirs` (paths relative to `root`), or of every `.js` file with
 * `ext: '.js'` (a dependency's build).
 */
export function sourceRegexes(root: string, dirs: string[], ext: '.ts' | '.js' = '.ts'): SourceRegex[] {
  const found: SourceRegex[] = [];
  for (const dir of dirs) {
    for (const file of sourceFiles(path.join(root, dir), ext)) {
      const text = fs.readFileSync(file, 'utf8');
      const sf = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
      const where = (n: ts.Node) =>
        `${path.relative(root, file)}:${sf.getLineAndCharacterOfPosition(n.getStart()).line + 1}`;
      const visit = (n: ts.Node): void => {
        if (n.kind === ts.SyntaxKind.RegularExpressionLiteral) {
          const literal = n.getText();
          const slash = literal.lastIndexOf('/');
          found.push({
            where: where(n),
            source: literal.slice(1, slash),
            flags: literal.slice(slash + 1),
            kind: 'literal',
          });
        } else if (
          ts.isNewExpression(n) &&
          n.expression.getText() === 'RegExp' &&
          n.arguments?.[0] &&
          ts.isStringLiteralLike(n.arguments[0])
        ) {
          const flags = n.arguments[1] && ts.isStringLiteralLike(n.arguments[1]) ? n.arguments[1].text : '';
          found.push({ where: where(n), source: n.arguments[0].text, flags, kind: 'new RegExp' });
        } else if (
          ts.isPropertyAssignment(n) &&
          n.name.getText() === 'pattern' &&
          ts.isStringLiteralLike(n.initializer)
        ) {
          found.push({ where: where(n), source: n.initializer.text, flags: 'u', kind: 'schema pattern' });
        }
        ts.forEachChild(n, visit);
      };
      visit(sf);
    }
  }
  return found;
}

/** Characters tried wherever a character class or set has to be sampled. */
export const PROBES = [
  'a',
  'Z',
  '0',
  '9',
  '_',
  ' ',
  '\t',
  '\n',
  '\r',
  '.',
  ',',
  '-',
  '+',
  '@',
  ':',
  ';',
  '/',
  '\\',
  '%',
  '"',
  "'",
  '<',
  '>',
  '=',
  '&',
  '{',
  '}',
  '[',
  ']',
  '(',
  ')',
  '?',
  '*',
  '!',
  '#',
  '$',
  '^',
  '|',
  '~',
  '`',
  '\u00e9',
  '\u00a0',
  '\u2028',
  '\u0000',
  '\u{1F600}',
];

/** Characters that end a pumped run (a failing suffix makes a backtracking engine try every split). */
const BREAKERS = ['\u0000', '!\n'];

type Node = AST.Node;

/**
 * Builds the adversarial inputs of one regex (see the module notes).
 *
 * @param size - the length of each input, in UTF-16 units (about).
 * @returns distinct inputs with a short label each.
 */
export function attackInputs(source: string, flags: string, size: number): { label: string; input: string }[] {
  const unicode = flags.includes('u') || flags.includes('v');
  const pattern = new RegExpParser({ ecmaVersion: 2025 }).parsePattern(source, 0, source.length, {
    unicode,
    unicodeSets: flags.includes('v'),
  });
  const matchFlags = flags.replace(/[gy]/g, '');
  const accepts = new Map<string, string[]>();
  /** The probe characters a class-like node accepts on its own. */
  const accepted = (n: Node): string[] => {
    let hit = accepts.get(n.raw);
    if (!hit) {
      let re: RegExp | undefined;
      try {
        re = new RegExp(`^(?:${n.raw})$`, matchFlags);
      } catch {
        re = undefined;
      }
      hit = re ? PROBES.filter((c) => re.test(c)) : [];
      accepts.set(n.raw, hit);
    }
    return hit;
  };
  /** The shortest text matching `n` (best effort: lookarounds and back-references give ''). */
  const sample = (n: Node): string => {
    switch (n.type) {
      case 'Character':
        return String.fromCodePoint(n.value);
      case 'CharacterSet':
      case 'CharacterClass':
      case 'ExpressionCharacterClass':
        return accepted(n)[0] ?? '';
      case 'Quantifier':
        return sample(n.element).repeat(Math.min(n.min, 3));
      case 'Group':
      case 'CapturingGroup':
      case 'Pattern':
        return n.alternatives.map((a) => sample(a)).sort((x, y) => x.length - y.length)[0] ?? '';
      case 'Alternative':
        return n.elements.map(sample).join('');
      default:
        return '';
    }
  };
  /** The text leading up to `target`: for each alternative on the way down, the samples of the elements before it. */
  const prefixOf = (target: Node): string => {
    let prefix = '';
    let child: Node = target;
    for (let parent = target.parent; parent; child = parent, parent = parent.parent) {
      if (parent.type === 'Alternative') {
        const before = parent.elements.slice(0, parent.elements.indexOf(child as AST.Element));
        prefix = before.map(sample).join('') + prefix;
      }
    }
    return prefix;
  };
  const inputs = new Map<string, string>();
  const add = (label: string, prefix: string, pump: string, suffix: string) => {
    if (!pump) return;
    const input = prefix + pump.repeat(Math.max(1, Math.ceil((size - prefix.length) / pump.length))) + suffix;
    if (![...inputs.values()].includes(input)) inputs.set(label, input);
  };
  const quantifiers: AST.Quantifier[] = [];
  const walk = (n: Node): void => {
    if (n.type === 'Quantifier') quantifiers.push(n);
    const kids: Node[] =
      'alternatives' in n
        ? n.alternatives
        : 'elements' in n && Array.isArray(n.elements)
          ? n.elements
          : 'element' in n
            ? [n.element]
            : [];
    kids.forEach(walk);
  };
  walk(pattern);
  for (const q of quantifiers) {
    if (q.max < 2) continue;
    const prefix = prefixOf(q);
    const element = q.element;
    const pumps =
      element.type === 'Character' || element.type === 'CharacterSet' || element.type === 'CharacterClass'
        ? accepted(element).slice(0, 4)
        : [sample(element)];
    for (const pump of pumps)
      for (const end of BREAKERS)
        add(`${q.raw} after ${JSON.stringify(prefix)} pumping ${JSON.stringify(pump)}`, prefix, pump, end);
  }
  for (const c of PROBES) add(`${JSON.stringify(c)} repeated`, '', c, BREAKERS[0]);
  return [...inputs.entries()].map(([label, input]) => ({ label, input }));
}
