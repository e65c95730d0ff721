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

// ---------------------------------------------------------------------------------------------------------------
// Where a query lives (docs/architecture.md#query-ownership). Each table has one owning package, declared in the
// architecture page's table → package map (parsed here, so the page and the check cannot drift). A module that
// writes a table is a `queries/` module of the table's owner; when its statement or transaction must also write
// another package's table (an outbox row, a timeline entry, an erase's cascade), that (table, package) pair is
// declared in the map's "also written by" column. `packages/db` keeps the schema, the client, migrations and the
// shared SQL fragments that several owners use.

/**
 * The modules of `packages/db/src/queries` that stay there: SQL fragments and helpers used by the queries of
 * several owning packages (checked: imported by modules of at least two owners).
 */
const SHARED_FRAGMENTS: Record<string, string> = {
  'batch-upsert': 'the contact merge rule (the upsert by address), for contact writes, imports, tracks and sends',
  'data-patch': 'splitting a contact `data` patch into set and unset parts, for every statement that upserts contacts',
  keyset: 'keyset pagination over `(created_at, id)` for every list endpoint',
  like: 'escaping a search term for `LIKE`',
  named: 'named (prepared) statements on the pool',
  'queued-emails':
    'queuing an email (row and first timeline entry), for campaign test sends, double opt-ins and workflow sends',
  'reputation-counts': 'counting an outcome into the hourly reputation buckets, from sending, feedback and campaigns',
  'send-quota': "the SES account's sends in the last 24 hours, for the quota guard and the campaign feeding",
  'suppression-rule':
    'the suppression rule (who is held back, and why) that accepted sends, claims, fan-outs and workflow steps apply',
  'tracking-rule': "an email's tracking (its override, else its project's mode), for every statement writing emails",
  'webhook-delivery-ref': 'the reference to a delivery row that every announcing change returns',
  webhooks: 'the webhook outbox: an event is written as delivery rows in the transaction of the change announcing it',
};

interface TableOwner {
  owner: string;
  alsoWrittenBy: string[];
}

/** The table → package map of docs/architecture.md: `| \`t1\`, \`t2\` | \`owner\` | \`pkg\`, … |` rows. */
function ownershipMap(): Map<string, TableOwner> {
  const page = readFileSync(path.join(ROOT, 'docs', 'architecture.md'), 'utf8');
  const section = /^### Query ownership\n([\s\S]*?)(?=^#{1,3} )/m.exec(page);
  if (!section) throw new Error('docs/architecture.md has no "### Query ownership" section');
  const map = new Map<string, TableOwner>();
  const names = (cell: string) => [...cell.matchAll(/`([a-z_-]+)`/g)].map((m) => m[1]);
  for (const line of section[1].split('\n')) {
    const cells = line.split('|').slice(1, -1);
    if (cells.length !== 3 || !cells[0].includes('`')) continue;
    const [owner] = names(cells[1]);
    for (const table of names(cells[0])) {
      if (map.has(table)) throw new Error(`docs/architecture.md maps ${table} twice`);
      map.set(table, { owner, alsoWrittenBy: names(cells[2]) });
    }
  }
  return map;
}

/** Schema export name → table name, from `export const x = pgTable('name', …)` in packages/db/src/schema. */
function schemaTables(): Map<string, string> {
  const tables = new Map<string, string>();
  for (const file of sourceFiles(path.join(ROOT, 'packages', 'db', 'src', 'schema'))) {
    for (const m of readFileSync(file, 'utf8').matchAll(/export const (\w+) = pg(Table|View)\(\s*'([a-z_]+)'/g)) {
      tables.set(m[1], m[3]);
    }
  }
  return tables;
}

const SCHEMA = schemaTables();
const TABLE_NAMES = new Set(SCHEMA.values());

/**
 * The tables a module writes, parsed from its source: Drizzle's `.insert(t)`, `.update(t)`, `.delete(t)` on a
 * schema table, and in SQL text (string and template literals, comments left out) `insert into t`, `update t`,
 * `delete from t`, where `t` may also be a schema table interpolated as `${t}`.
 */
function writtenTables(file: string): Set<string> {
  const text = readFileSync(file, 'utf8');
  const writes = new Set<string>();
  if (!/\b(insert|update|delete)\b/i.test(text)) return writes;
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const sqlTexts: string[] = [];
  const tableOf = (e: ts.Expression) => (ts.isIdentifier(e) ? SCHEMA.get(e.text) : undefined);
  const visit = (node: ts.Node) => {
    if (
      ts.isCallExpression(node) &&
      ts.isPropertyAccessExpression(node.expression) &&
      ['insert', 'update', 'delete'].includes(node.expression.name.text) &&
      node.arguments.length === 1
    ) {
      const table = tableOf(node.arguments[0]);
      if (table) writes.add(table);
    }
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) sqlTexts.push(node.text);
    if (ts.isTemplateExpression(node)) {
      sqlTexts.push(
        node.head.text + node.templateSpans.map((s) => ` ${tableOf(s.expression) ?? '$x'} ${s.literal.text}`).join(''),
      );
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  for (const text of sqlTexts) {
    for (const m of text.matchAll(/\b(?:insert\s+into|update|delete\s+from)\s+([a-z_]+)/gi)) {
      if (TABLE_NAMES.has(m[1])) writes.add(m[1]);
    }
  }
  return writes;
}

const isQueryModule = (file: string) => path.basename(path.dirname(file)) === 'queries' && !isTest(file);
const dbQueries = path.join(ROOT, 'packages', 'db', 'src', 'queries');
const moduleName = (file: string) => path.basename(file, '.ts');

test('the query ownership map names every table once, with an existing owner', () => {
  const map = ownershipMap();
  const problems: string[] = [];
  for (const table of TABLE_NAMES) if (!map.has(table)) problems.push(`${table} has no owner`);
  for (const [table, { owner, alsoWrittenBy }] of map) {
    if (!TABLE_NAMES.has(table)) problems.push(`${table} is mapped but is no table of the schema`);
    for (const p of [owner, ...alsoWrittenBy]) if (!packages.has(p)) problems.push(`${table}: no package ${p}`);
    if (alsoWrittenBy.includes(owner)) problems.push(`${table}: ${owner} is its owner and listed as another writer`);
  }
  expect(problems).toEqual([]);
});

test("a table is written only by its owner's queries, or by a writer the map declares", () => {
  const map = ownershipMap();
  const problems: string[] = [];
  const used = new Set<string>();
  for (const w of ws) {
    for (const file of sourceFiles(path.join(w.dir, 'src')).filter((f) => !isTest(f))) {
      const writes = writtenTables(file);
      if (writes.size === 0) continue;
      // The schema and migrations define tables; db's shared fragments are checked by the next test.
      if (w.name === 'db') continue;
      if (!isQueryModule(file)) {
        problems.push(`${rel(file)} writes ${[...writes].join(', ')} outside a queries/ module`);
        continue;
      }
      let home = false;
      for (const table of writes) {
        const entry = map.get(table);
        if (!entry) continue;
        if (entry.owner === w.name) home = true;
        else if (entry.alsoWrittenBy.includes(w.name)) used.add(`${table}:${w.name}`);
        else problems.push(`${rel(file)} writes ${table}, owned by ${entry.owner}`);
      }
      // A package owning no table (a cross-cutting pass such as retention) writes only where the map lists it.
      const ownsTables = [...map.values()].some((e) => e.owner === w.name);
      if (!home && ownsTables)
        problems.push(`${rel(file)} writes no table of its own package (${[...writes].join(', ')})`);
    }
  }
  // A declared writer that writes nothing is a stale permission.
  for (const [table, { alsoWrittenBy }] of map) {
    for (const p of alsoWrittenBy) {
      if (!used.has(`${table}:${p}`)) problems.push(`${table}: ${p} is declared as a writer but writes it nowhere`);
    }
  }
  expect(problems).toEqual([]);
});

test('every module of packages/db/src/queries is a shared fragment used by several owners', () => {
  const problems: string[] = [];
  const modules = sourceFiles(dbQueries).filter((f) => !isTest(f));
  const names = new Set(modules.map(moduleName));
  for (const name of names) {
    if (!(name in SHARED_FRAGMENTS))
      problems.push(`packages/db/src/queries/${name}.ts belongs to the package owning the table it writes`);
  }
  for (const name of Object.keys(SHARED_FRAGMENTS)) {
    if (!names.has(name)) problems.push(`${name} is listed but packages/db/src/queries/${name}.ts is gone`);
  }
  // Who uses each fragment: the package of each importing module (db's own modules, the other fragments, do not
  // count).
  const owners = new Map<string, Set<string>>();
  for (const w of ws) {
    if (w.name === 'db') continue;
    for (const file of sourceFiles(path.join(w.dir, 'src')).filter((f) => !isTest(f))) {
      for (const spec of specifiers(file)) {
        const m = /^@mailroom\/db\/queries\/([a-z-]+)$/.exec(spec);
        if (m && m[1] in SHARED_FRAGMENTS) owners.set(m[1], (owners.get(m[1]) ?? new Set()).add(w.name));
      }
    }
  }
  for (const name of Object.keys(SHARED_FRAGMENTS)) {
    const users = [...(owners.get(name) ?? [])].sort();
    if (users.length < 2) problems.push(`${name} is used by ${users.join(', ') || 'no package'}: move it to its user`);
  }
  expect(problems).toEqual([]);
});
