/**
 * Reads the code blocks of the documentation that tests run: a fenced block right after an HTML comment
 * `<!-- snippet: NAME -->` in a markdown file.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The repository's root directory. */
export const ROOT = path.resolve(__dirname, '../..');

/**
 * The code of the fenced block marked `<!-- snippet: name -->` in `file` (relative to the repository root).
 *
 * @throws Error when the marker is missing, appears twice, or is not followed by a fenced block.
 */
export function snippet(file: string, name: string): string {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const marker = `<!-- snippet: ${name} -->`;
  const at = text.indexOf(marker);
  if (at < 0) throw new Error(`${file} has no ${marker}`);
  if (text.indexOf(marker, at + marker.length) >= 0) throw new Error(`${file} has ${marker} twice`);
  const m = /^\s*(`{3,})[^\n]*\n([\s\S]*?)\n\1[ \t]*$/m.exec(text.slice(at + marker.length));
  if (!m || m.index > 2) throw new Error(`${marker} in ${file} is not followed by a fenced code block`);
  return m[2];
}
