/**
 * `npm run client:generate`: writes the typed client's generated types from the API's current OpenAPI document
 * (and the document itself beside them, for other generators).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { CLIENT_TYPES_FILE, clientTypesSource, currentOpenApiDocument } from './client-types';

async function main(): Promise<void> {
  const doc = await currentOpenApiDocument();
  writeFileSync(CLIENT_TYPES_FILE, await clientTypesSource(doc));
  console.log(`wrote ${path.relative(process.cwd(), CLIENT_TYPES_FILE)} (${Object.keys(doc.paths).length} paths)`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
