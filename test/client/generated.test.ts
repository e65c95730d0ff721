/**
 * The typed client stays true to the API: its checked-in generated types are what openapi-typescript makes of the
 * OpenAPI document the code serves now, its runtime imports nothing a browser lacks, and its published build
 * loads both as an ES module and through `require` in plain Node.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import ts from 'typescript';

const ROOT = path.resolve(__dirname, '..', '..');
const CLIENT = path.join(ROOT, 'packages/client');
const TYPES = path.join(CLIENT, 'generated/schema.d.ts');

/** Runs `npm run client:generate -- --check [--file f]` (openapi-typescript is ESM-only inside: tsx runs it). */
function check(file?: string) {
  const args = [
    '--import',
    'tsx',
    path.join(ROOT, 'scripts/client-generate.ts'),
    '--check',
    ...(file ? ['--file', file] : []),
  ];
  return spawnSync(process.execPath, args, {
    cwd: ROOT,
    encoding: 'utf8',
    env: { ...process.env, NODE_NO_WARNINGS: '1', TSX_TSCONFIG_PATH: path.join(ROOT, 'tsconfig.json') },
  });
}

test('packages/client/generated/schema.d.ts is up to date with the OpenAPI document (else: npm run client:generate)', () => {
  const run = check();
  expect({ status: run.status, stderr: run.stderr }).toEqual({ status: 0, stderr: '' });
});

test('the check fails on a generated file that no longer matches, naming the line', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'client-types-'));
  try {
    const stale = path.join(dir, 'schema.d.ts');
    writeFileSync(stale, readFileSync(TYPES, 'utf8').replace('"/v1/send": {', '"/v1/sent": {'));
    const run = check(stale);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/stale at line \d+: run npm run client:generate/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('the client runtime imports only openapi-fetch and its own modules (no Node built-ins)', () => {
  const src = path.join(CLIENT, 'src');
  const imports = readdirSync(src)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .flatMap((f) =>
      ts.preProcessFile(readFileSync(path.join(src, f), 'utf8'), true, true).importedFiles.map((i) => i.fileName),
    );
  expect(
    imports.filter((spec) => spec !== 'openapi-fetch' && !spec.startsWith('./') && spec !== '../generated/schema'),
  ).toEqual([]);
});

test('the built package loads as an ES module and through require, with the same exports', () => {
  execFileSync('npm', ['run', 'build', '-w', 'packages/client'], { cwd: ROOT, stdio: 'pipe' });
  const run = (code: string, type: 'module' | 'commonjs') =>
    execFileSync(process.execPath, [`--input-type=${type}`, '-e', code], { cwd: ROOT, encoding: 'utf8' }).trim();
  const esm = run(`import * as m from '@mailroom/client'; console.log(Object.keys(m).sort().join(','))`, 'module');
  const cjs = run(`console.log(Object.keys(require('@mailroom/client')).sort().join(','))`, 'commonjs');
  expect(esm.split(',')).toEqual(
    expect.arrayContaining(['createMailroomClient', 'paginate', 'unwrap', 'withIdempotencyKey', 'MailroomError']),
  );
  expect(cjs).toBe(esm);
  const made = run(
    `import { createMailroomClient } from '@mailroom/client'; console.log(typeof createMailroomClient({ apiKey: 'pk_x', baseUrl: 'http://127.0.0.1:1' }).POST)`,
    'module',
  );
  expect(made).toBe('function');
});
