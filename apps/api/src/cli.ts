/**
 * Operator CLI (`npm run cli -- <command> [flags]`). Prints JSON on success; exits 1 with a message on error.
 * `npm run cli -- --help` lists every command with its flags; `npm run cli -- help <command>` explains one. The
 * commands, their flags and their help come from one table, `CLI_COMMANDS` (cli-commands.ts), which
 * docs/self-hosting/cli.md is generated from too.
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { AppError, errorMessage } from '@mailroom/platform/errors';
import { isUuid } from '@mailroom/platform/ids';
import { loadConfig } from '@mailroom/config/config';
import { createDatabase } from '@mailroom/db/client';
import { CLI_COMMANDS, commandHelp, overviewHelp, usageLine, type CliCommand } from './cli-commands';

/** parseArgs options: every flag of every command (a flag means the same wherever it appears). */
function options(): Record<string, { type: 'string' | 'boolean' }> {
  const out: Record<string, { type: 'string' | 'boolean' }> = { help: { type: 'boolean' } };
  for (const c of CLI_COMMANDS) for (const f of c.flags) out[f.name] = { type: f.value ? 'string' : 'boolean' };
  return out;
}

const byName = (name: string): CliCommand | undefined => CLI_COMMANDS.find((c) => c.name === name);

/**
 * The help text `argv` asks for, or undefined when it asks for none: `--help` or `-h` or `help` alone (every
 * command), `help <command>` or `<command> --help` (that command).
 *
 * @throws Error naming the unknown command for `help <unknown>`.
 */
export function cliHelp(argv: string[]): string | undefined {
  const words = argv.filter((a) => !a.startsWith('-'));
  const asked = argv.includes('--help') || argv.includes('-h') || words[0] === 'help';
  if (!asked) return undefined;
  const name = (words[0] === 'help' ? words.slice(1) : words).join(' ');
  if (!name) return overviewHelp();
  const command = byName(name);
  if (!command) throw new Error(`unknown command "${name}"\n\n${overviewHelp()}`);
  return commandHelp(command);
}

/**
 * Runs one CLI command. @returns the JSON-serialisable result. @throws {@link AppError} or usage errors.
 *
 * @param progress - where long commands (`import plunk`) report progress lines (default: stderr).
 */
export async function runCli(
  argv: string[],
  env: Record<string, string | undefined>,
  progress: (line: string) => void = (line) => process.stderr.write(line + '\n'),
): Promise<unknown> {
  const { positionals, values } = parseArgs({ args: argv, allowPositionals: true, options: options() });
  const command = byName(positionals.join(' '));
  if (!command) throw new Error(overviewHelp());
  const config = loadConfig(env);
  const database = createDatabase({ url: config.databaseUrl, poolSize: 1, applicationName: 'mailroom-cli' });
  const usage = (message: string) => new Error(`${message}\nusage: ${usageLine(command)}`);
  const project = () => {
    const id = values.project;
    if (typeof id !== 'string' || !isUuid(id)) throw usage('--project ID is required (a project id)');
    return id;
  };
  try {
    return await command.run({ values, config, database, project, usage, progress });
  } finally {
    await database.close();
  }
}

if (require.main === module) {
  const argv = process.argv.slice(2);
  let help: string | undefined;
  try {
    help = cliHelp(argv);
  } catch (err) {
    process.stderr.write(`${errorMessage(err)}\n`);
    process.exit(1);
  }
  if (help !== undefined) {
    process.stdout.write(help + '\n');
  } else {
    runCli(argv, process.env)
      .then((result) => {
        process.stdout.write(JSON.stringify(result, null, 2) + '\n');
      })
      .catch((err: Error) => {
        process.stderr.write(`${err instanceof AppError ? `${err.code}: ` : ''}${err.message}\n`);
        process.exit(1);
      });
  }
}
