/**
 * The house rules of the layout (docs/architecture.md#layout), checked on the source tree itself so that a change that
 * breaks one fails CI instead of drifting:
 * - apps sit above packages: no package imports an app;
 * - packages form an acyclic graph, declared in their package.json files and mirrored by tsconfig references;
 * - no `export *` barrels: an import names the module it uses (`@mailroom/<package>/<module>`), and a package lists
 *   the modules it offers in its package.json `exports` (what the built images resolve at run time);
 * - every package and app declares each npm package it imports;
 * - no source file over 400 lines.
 */
import { builtinModules } from 'node:module';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');
const MAX_LINES = 400;
const BUILTINS = new Set(builtinModules);

interface Workspace {
  /** `platform`, `db`, … for packages; `api`, `worker` for apps. */
  name: string;
  kind: 'package' | 'app';
  dir: string;
  manifest: {
    name: string;
    dependencies?: Record<string, string>;
    exports?: Record<string, { types: string; default: string }>;
  };
}

function workspaces(): Workspace[] {
  const out: Workspace[] = [];
  for (const [kind, folder] of [
    ['package', 'packages'],
    ['app', 'apps'],
  ] as const) {
    for (const name of readdirSync(path.join(ROOT, folder))) {
      const dir = path.join(ROOT, folder, name);
      if (!existsSync(path.join(dir, 'package.json')) || !existsSync(path.join(dir, 'src'))) continue;
      out.push({
        name,
        kind,
        dir,
        manifest: JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as Workspace['manifest'],
      });
    }
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  const files: string[] = [];
  for (const entry of readdirSync(dir)) {
    const p = path.join(dir, entry);
    if (statSync(p).isDirectory()) files.push(...sourceFiles(p));
    else if (p.endsWith('.ts')) files.push(p);
  }
  return files;
}

const isTest = (file: string) => file.endsWith('.test.ts');
const rel = (file: string) => path.relative(ROOT, file);

/** Every module specifier a file imports (static, dynamic and `require`). */
function specifiers(file: string): string[] {
  return ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles.map((f) => f.fileName);
}

/** The npm package a bare specifier belongs to (`@scope/name` or `name`), or undefined for builtins and relative paths. */
function npmPackage(spec: string): string | undefined {
  if (spec.startsWith('.') || spec.startsWith('node:')) return undefined;
  const parts = spec.split('/');
  const name = spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
  return BUILTINS.has(name) ? undefined : name;
}

const ws = workspaces();
const packages = new Map(ws.filter((w) => w.kind === 'package').map((w) => [w.name, w]));

test('no source file is over 400 lines', () => {
  const long = ws
    .flatMap((w) => sourceFiles(path.join(w.dir, 'src')))
    .filter((f) => !isTest(f))
    .map((f) => ({
      file: rel(f),
      lines: readFileSync(f, 'utf8')
        .split('\n')
        .filter((_, i, all) => i < all.length - 1 || all[i] !== '').length,
    }))
    .filter((f) => f.lines > MAX_LINES);
  expect(long).toEqual([]);
});

test('no export * barrels', () => {
  const barrels = ws
    .flatMap((w) => sourceFiles(path.join(w.dir, 'src')))
    .filter((f) => /^export \* from/m.test(readFileSync(f, 'utf8')))
    .map(rel);
  expect(barrels).toEqual([]);
});

test('packages never import apps, and reach other packages only through their declared modules', () => {
  const problems: string[] = [];
  for (const w of ws) {
    for (const file of sourceFiles(path.join(w.dir, 'src'))) {
      for (const spec of specifiers(file)) {
        if (
          w.kind === 'package' &&
          (/^@mailroom\/(api|worker)(\/|$)/.test(spec) ||
            (spec.startsWith('.') && path.resolve(path.dirname(file), spec).startsWith(path.join(ROOT, 'apps'))))
        ) {
          problems.push(`${rel(file)} imports the app module ${spec}`);
        }
        // A package's own tests may use the shared test support (databases, SES emulator); its code may not.
        if (
          !isTest(file) &&
          spec.startsWith('.') &&
          !path.resolve(path.dirname(file), spec).startsWith(w.dir + path.sep)
        ) {
          problems.push(`${rel(file)} reaches outside its workspace by path: ${spec}`);
        }
        const m = /^@mailroom\/([^/]+)\/(.+)$/.exec(spec);
        if (!m) {
          if (/^@mailroom\//.test(spec))
            problems.push(`${rel(file)} imports a whole package (${spec}): name the module`);
          continue;
        }
        const target = packages.get(m[1]);
        if (!target) problems.push(`${rel(file)} imports ${spec}: no package ${m[1]}`);
        else if (target !== w && !target.manifest.exports?.[`./${m[2]}`])
          problems.push(`${rel(file)} imports ${spec}, which ${target.manifest.name} does not export`);
      }
    }
  }
  expect(problems).toEqual([]);
});

test('every package.json export points at a module that exists', () => {
  const missing: string[] = [];
  for (const p of packages.values()) {
    for (const [sub, target] of Object.entries(p.manifest.exports ?? {})) {
      const src = path.join(p.dir, 'src', target.default.replace(/^\.\/dist\//, '').replace(/\.js$/, '.ts'));
      if (!existsSync(src)) missing.push(`${p.manifest.name} ${sub} → ${rel(src)}`);
    }
  }
  expect(missing).toEqual([]);
});

test('every workspace declares the npm packages it imports (tests may use the root devDependencies)', () => {
  const undeclared: string[] = [];
  for (const w of ws) {
    const declared = new Set(Object.keys(w.manifest.dependencies ?? {}));
    for (const file of sourceFiles(path.join(w.dir, 'src')).filter((f) => !isTest(f))) {
      for (const spec of specifiers(file)) {
        const name = npmPackage(spec);
        if (name && !declared.has(name))
          undeclared.push(`${rel(file)}: ${name} is not in ${w.manifest.name}'s dependencies`);
      }
    }
  }
  expect([...new Set(undeclared)]).toEqual([]);
});

test('the package graph is acyclic and tsconfig references mirror the declared dependencies', () => {
  const deps = (w: Workspace) =>
    Object.keys(w.manifest.dependencies ?? {})
      .filter((d) => d.startsWith('@mailroom/'))
      .map((d) => d.slice('@mailroom/'.length))
      .sort();
  const cycles: string[] = [];
  const visit = (name: string, stack: string[]) => {
    if (stack.includes(name)) {
      cycles.push([...stack.slice(stack.indexOf(name)), name].join(' → '));
      return;
    }
    const p = packages.get(name);
    if (p) for (const d of deps(p)) visit(d, [...stack, name]);
  };
  for (const name of packages.keys()) visit(name, []);
  expect([...new Set(cycles)]).toEqual([]);

  for (const w of ws) {
    const tsconfig = JSON.parse(readFileSync(path.join(w.dir, 'tsconfig.json'), 'utf8')) as {
      references?: { path: string }[];
    };
    const refs = (tsconfig.references ?? []).map((r) => path.basename(r.path)).sort();
    expect({ workspace: w.manifest.name, references: refs }).toEqual({
      workspace: w.manifest.name,
      references: deps(w),
    });
  }
});
