/**
 * The test tiers (`jest.config.js` projects, listed in `test/support/tiers.js`) cover every test file exactly
 * once: asked for each project's files (`jest --listTests --selectProjects <tier>`, Jest's own selection), every
 * `*.test.ts` of the repository is in one and only one. And no file named in a tier list is gone (a renamed test
 * would otherwise leave its tier silently).
 */
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

// eslint-disable-next-line @typescript-eslint/no-require-imports
const tiers = require('../support/tiers') as Record<'UNIT' | 'SLOW' | 'INTEGRATION' | 'E2E', string[]>;

const ROOT = path.resolve(__dirname, '..', '..');
const TIERS = ['unit', 'integration', 'e2e', 'slow'];
const SKIP = new Set(['node_modules', 'dist', '.git', 'coverage']);

/** Every `*.test.ts` under `dir`, relative to the root. */
function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (SKIP.has(entry.name)) return [];
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(full);
    return entry.name.endsWith('.test.ts') ? [path.relative(ROOT, full)] : [];
  });
}

/** The files Jest runs for one tier, relative to the root. */
async function listed(tier: string): Promise<string[]> {
  const { stdout } = await promisify(execFile)(
    process.execPath,
    [require.resolve('jest/bin/jest'), '--listTests', '--json', '--selectProjects', tier],
    { cwd: ROOT, maxBuffer: 16 * 1024 * 1024 },
  );
  return (JSON.parse(stdout.slice(stdout.indexOf('['))) as string[]).map((f) => path.relative(ROOT, f));
}

test('every test file belongs to exactly one tier', async () => {
  const all = ['packages', 'apps', 'test'].flatMap((d) => testFiles(path.join(ROOT, d)));
  expect(all.length).toBeGreaterThan(100);
  const byTier = await Promise.all(TIERS.map(listed));
  const homes = new Map<string, string[]>(all.map((f) => [f, []]));
  byTier.forEach((files, i) => {
    for (const f of files) homes.set(f, [...(homes.get(f) ?? []), TIERS[i]]);
  });
  const wrong = [...homes].filter(([, in_]) => in_.length !== 1).map(([f, in_]) => `${f}: ${in_.join(', ') || 'none'}`);
  expect(wrong).toEqual([]);
  // The unit tier (the first) is the one a developer runs all day: it stays a real share of the tests.
  expect(byTier[0].length).toBeGreaterThan(20);
}, 120_000);

test('every file a tier names exists', () => {
  const named = [...tiers.UNIT, ...tiers.SLOW, ...tiers.INTEGRATION, ...tiers.E2E].filter((g) => !/[*?{[]/.test(g));
  expect(named.filter((f) => !existsSync(path.join(ROOT, f)))).toEqual([]);
});
