/**
 * Which variables a template uses, read from the template engine's own parse tree (Handlebars' AST, after the
 * `{{var ?? default}}` rewrite of `templates.ts`), and which of them a rendering context lacks: what
 * `POST /templates/{id}/render` reports as `missingVariables`.
 *
 * Scope rules follow Handlebars 4: `{{#with user}}{{name}}{{/with}}` uses `user.name`; inside `{{#each}}` (and a
 * section such as `{{#items}}…{{/items}}`) paths are relative to an item and are not reported, except `@root.x`
 * and `../x` paths that climb back to a known context. `{{#if}}`/`{{#unless}}` keep the context. A variable is
 * used wherever it appears, in a branch that may not render too.
 *
 * @module
 */
import Handlebars from 'handlebars';
import { rewriteFallbacks } from './fallbacks';
import { TemplateSyntaxError } from './templates';
import { errorMessage } from '@mailroom/platform/errors';

type Node = hbs.AST.Node;
type Expression = hbs.AST.Expression;
type PathExpression = hbs.AST.PathExpression;

/** Helpers the template language has (Handlebars' built-ins and the `??` fallback). */
const HELPERS = new Set([
  'if',
  'unless',
  'each',
  'with',
  'lookup',
  'log',
  'helperMissing',
  'blockHelperMissing',
  '__fallback',
]);
/** Block helpers that keep the current context. */
const SAME_CONTEXT = new Set(['if', 'unless']);

/** One variable a template uses: its dotted path from the root context. */
export interface TemplateVariable {
  /** Dotted path from the root context, e.g. `user.name`. */
  path: string;
  /** Every use of it has a `??` default (`{{name ?? "there"}}`), so it renders something when missing. */
  hasDefault: boolean;
}

/** A context level: the path prefix it stands for, or `null` when unknown (an item of `#each`). */
type Scope = string[] | null;

function isPath(e: Node | undefined): e is PathExpression {
  return e?.type === 'PathExpression';
}

/**
 * Variables a template source uses, in order of first use. `this`, `@index`, `@key`, block parameters and paths
 * inside `#each` items are not variables of the root context and are left out.
 *
 * @throws {@link TemplateSyntaxError} when the source does not parse.
 */
export function templateVariables(source: string): TemplateVariable[] {
  let program: hbs.AST.Program;
  try {
    program = Handlebars.parse(rewriteFallbacks(source));
  } catch (err) {
    throw new TemplateSyntaxError(errorMessage(err).split('\n').slice(0, 3).join(' ').trim());
  }
  const found = new Map<string, TemplateVariable>();
  const use = (path: string[] | undefined, hasDefault: boolean) => {
    if (!path || path.length === 0) return;
    const key = path.join('.');
    const seen = found.get(key);
    if (seen) seen.hasDefault &&= hasDefault;
    else found.set(key, { path: key, hasDefault });
  };
  /** The root-context path of a path expression seen at `scopes`, or undefined when it is not one. */
  const resolve = (p: PathExpression, scopes: Scope[]): string[] | undefined => {
    if (p.data) return p.parts[0] === 'root' ? p.parts.slice(1) : undefined;
    const scope = scopes[Math.max(0, scopes.length - 1 - p.depth)];
    return scope ? [...scope, ...p.parts] : undefined;
  };
  const expression = (e: Expression | undefined, scopes: Scope[], hasDefault = false) => {
    if (isPath(e)) use(resolve(e, scopes), hasDefault);
    else if (e?.type === 'SubExpression') call(e as hbs.AST.SubExpression, scopes);
  };
  /** A mustache, sub-expression or block opening: a helper call (its arguments are used) or a variable. */
  const call = (
    node: { path: PathExpression | Expression; params: Expression[]; hash?: hbs.AST.Hash },
    scopes: Scope[],
  ) => {
    const name =
      isPath(node.path) && !node.path.data && node.path.depth === 0 && node.path.parts.length === 1
        ? node.path.parts[0]
        : undefined;
    const helper = name !== undefined && HELPERS.has(name);
    if (!helper && node.params.length === 0 && !node.hash) expression(node.path, scopes);
    node.params.forEach((param, i) => expression(param, scopes, name === '__fallback' && i === 0));
    for (const pair of node.hash?.pairs ?? []) expression(pair.value, scopes);
  };
  const walk = (body: hbs.AST.Statement[], scopes: Scope[]) => {
    for (const statement of body) {
      if (statement.type === 'MustacheStatement') call(statement as hbs.AST.MustacheStatement, scopes);
      if (statement.type !== 'BlockStatement') continue;
      const block = statement as hbs.AST.BlockStatement;
      const name = isPath(block.path) && block.path.parts.length === 1 ? block.path.parts[0] : undefined;
      const sameContext = name !== undefined && SAME_CONTEXT.has(name);
      let inner: Scope = null;
      if (name !== undefined && HELPERS.has(name)) {
        call(block, scopes);
        const subject = block.params[0];
        // `{{#with user}}`: paths inside are under `user` (unless it names the context: `as |u|`).
        if (name === 'with' && isPath(subject) && !block.program.blockParams?.length)
          inner = resolve(subject, scopes) ?? null;
      } else {
        // A section (`{{#items}}…{{/items}}`): its name is a variable; what it iterates over is unknown.
        expression(block.path, scopes);
      }
      walk(block.program.body, sameContext ? scopes : [...scopes, inner]);
      if (block.inverse) walk(block.inverse.body, scopes);
    }
  };
  walk(program.body, [[]]);
  return [...found.values()];
}

function present(context: Record<string, unknown>, path: string): boolean {
  let value: unknown = context;
  for (const part of path.split('.')) {
    if (value === null || typeof value !== 'object' || !Object.prototype.hasOwnProperty.call(value, part)) return false;
    value = (value as Record<string, unknown>)[part];
  }
  return value !== undefined && value !== null;
}

/**
 * The variables the sources use without a `??` default that `context` lacks (absent, or null), in order of first
 * use, each once. A path is looked up part by part in own properties, as the renderer does.
 *
 * @param sources - template sources (subject, body).
 * @throws {@link TemplateSyntaxError} when a source does not parse.
 */
export function missingVariables(sources: string[], context: Record<string, unknown>): string[] {
  const all = new Map<string, boolean>();
  for (const source of sources) {
    for (const v of templateVariables(source)) all.set(v.path, (all.get(v.path) ?? true) && v.hasDefault);
  }
  return [...all.entries()]
    .filter(([path, hasDefault]) => !hasDefault && !present(context, path))
    .map(([path]) => path);
}
