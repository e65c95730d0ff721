/**
 * `npm run client:generate`: writes the typed client's generated types (`packages/client/generated/schema.d.ts`)
 * from the API's current OpenAPI document.
 *
 * `-- --check` writes nothing: it exits 1, naming the first differing line, when the checked-in file is stale
 * (the test suite runs it). `--file <path>` checks or writes another file than the package's.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLIENT_TYPES_FILE, clientTypesSource, currentOpenApiDocument } from './client-types';

async function main(argv: string[]): Promise<number> {
  const check = argv.includes('--check');
  const fileArg = argv.indexOf('--file');
  const file = fileArg >= 0 && argv[fileArg + 1] ? path.resolve(argv[fileArg + 1]) : CLIENT_TYPES_FILE;
  const doc = currentOpenApiDocument();
  const source = await clientTypesSource(doc);
  const shown = path.relative(process.cwd(), file);
  if (!check) {
    writeFileSync(file, source);
    console.log(`wrote ${shown} (${Object.keys(doc.paths).length} paths)`);
    return 0;
  }
  const expected = source.split('\n');
  const actual = readFileSync(file, 'utf8').split('\n');
  const first = expected.findIndex((line, i) => actual[i] !== line);
  if (first === -1 && actual.length === expected.length) {
    console.log(`${shown} is up to date`);
    return 0;
  }
  const at = first === -1 ? Math.min(actual.length, expected.length) : first;
  console.error(
    `${shown} is stale at line ${at + 1}: run npm run client:generate\n  checked in: ${actual[at] ?? '(end of file)'}\n  generated:  ${expected[at] ?? '(end of file)'}`,
  );
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err: unknown) => {
    console.error(err);
    process.exit(2);
  },
);
