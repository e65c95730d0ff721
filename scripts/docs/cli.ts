/**
 * docs/self-hosting/cli.md: every command of the operator CLI with its flags, from the CLI's own command table
 * (`CLI_COMMANDS` in apps/api/src/cli-commands.ts), which also parses the flags and prints `--help`.
 *
 * @module
 */
import { CLI_COMMANDS, usageLine } from '../../apps/api/src/cli-commands';
import { GENERATED_NOTICE } from './notice';

const cell = (s: string) => s.replace(/\|/g, '\\|');

/** docs/self-hosting/cli.md's text. */
export function cliMarkdown(): string {
  const sections = CLI_COMMANDS.map((c) => {
    const flags = c.flags.length
      ? `| Flag | Required | Description |\n| --- | --- | --- |\n${c.flags
          .map((f) => `| \`--${f.name}${f.value ? ` ${cell(f.value)}` : ''}\` | ${f.required ? 'yes' : 'no'} | ${cell(f.description)} |`)
          .join('\n')}\n\n`
      : '';
    return `## ${c.name}\n\n\`\`\`sh\n${usageLine(c)}\n\`\`\`\n\n${c.summary}\n\n${flags}Prints: ${c.output}.\n`;
  });
  return `# CLI

${GENERATED_NOTICE('the CLI\'s command table, `CLI_COMMANDS` in apps/api/src/cli-commands.ts')}

\`npm run cli -- <command> [flags]\` runs one operator command against the database in \`DATABASE_URL\` (it reads the
same environment as the API; see configuration.md). It prints JSON on success and exits 1 with a message on error.
In a container: \`docker compose run --rm api node apps/api/dist/cli.js <command> [flags]\`.

\`npm run cli -- --help\` lists the commands; \`npm run cli -- help <command>\` explains one.

${sections.join('\n')}`;
}
