/**
 * The generated documents: each file under docs/ that `npm run docs:generate` writes, and the function that renders
 * it. A test compares each checked-in file with its rendering, so a change to a source that is not followed by
 * `npm run docs:generate` fails `npm test`.
 *
 * @module
 */
import { cliMarkdown } from './cli';
import { configurationMarkdown } from './configuration';
import { errorsMarkdown } from './errors';
import { openApiJson } from './openapi';

/** A generated document: its path (relative to the repository) and its text. */
export interface GeneratedDocument {
  path: string;
  render: () => string;
}

export const GENERATED_DOCUMENTS: GeneratedDocument[] = [
  { path: 'docs/api/errors.md', render: errorsMarkdown },
  { path: 'docs/openapi.json', render: openApiJson },
  { path: 'docs/self-hosting/configuration.md', render: configurationMarkdown },
  { path: 'docs/self-hosting/cli.md', render: cliMarkdown },
];
