/**
 * `npm run docs:generate`: writes the generated documents (docs/api/errors.md, docs/openapi.json,
 * docs/self-hosting/configuration.md, docs/self-hosting/cli.md) from their sources. With `--check` it writes
 * nothing and exits 1 naming each file that differs from its source.
 *
 * @module
 */
import { mkdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { GENERATED_DOCUMENTS } from './docs/documents';

const ROOT = path.resolve(__dirname, '..');
const check = process.argv.includes('--check');
const stale: string[] = [];
for (const doc of GENERATED_DOCUMENTS) {
  const file = path.join(ROOT, doc.path);
  const text = doc.render();
  const current = existsSync(file) ? readFileSync(file, 'utf8') : undefined;
  if (current === text) continue;
  if (check) {
    stale.push(doc.path);
    continue;
  }
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, text);
  console.log(`wrote ${doc.path}`);
}
if (stale.length > 0) {
  console.error(`stale: ${stale.join(', ')}; run \`npm run docs:generate\` and commit the result`);
  process.exit(1);
}
