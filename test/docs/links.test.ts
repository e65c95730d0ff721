/**
 * Every relative link and heading anchor in the documentation resolves: README.md, the other top-level markdown
 * files and docs/**.md are checked together by `remark-validate-links` (a missing file, a missing heading in this
 * file or another, a missing line of a source file). The library is ESM-only, so it runs as its CLI in a child
 * process rather than inside Jest's CommonJS modules.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './snippets';

/** The markdown files to check, relative to the repository root. */
function markdownFiles(): string[] {
  const top = readdirSync(ROOT).filter((f) => f.endsWith('.md'));
  const docs = (readdirSync(path.join(ROOT, 'docs'), { recursive: true }) as string[])
    .filter((f) => f.endsWith('.md'))
    .map((f) => path.join('docs', f));
  return [...top, ...docs].sort();
}

test('the documentation set holds README.md and the docs index', () => {
  const files = markdownFiles();
  expect(files).toContain('README.md');
  expect(files).toContain(path.join('docs', 'README.md'));
});

test('every relative link and anchor resolves', () => {
  const cli = path.join(ROOT, 'node_modules', 'remark-cli', 'cli.js');
  const r = spawnSync(
    process.execPath,
    [cli, '--no-config', '--no-ignore', '--no-color', '--no-stdout', '--frail', '--quiet', '--use', 'remark-validate-links=repository:false', ...markdownFiles()],
    { cwd: ROOT, encoding: 'utf8', timeout: 120_000 },
  );
  if (r.error) throw r.error;
  // Problems are reported on stderr, one line per link under the file that holds it.
  if (r.status !== 0) throw new Error(`broken links or anchors:\n${r.stderr}${r.stdout}`);
  expect(r.status).toBe(0);
});
