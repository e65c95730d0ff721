/**
 * The operator CLI's command table (`npm run cli -- <command> [flags]`): each command's name, what it does, its
 * flags and what it prints, and the function that runs it. `--help`, `help <command>` and docs/self-hosting/cli.md
 * are all rendered from this table, so they cannot drift from what the CLI accepts.
 *
 * @module
 */
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { domainOwner } from '@mailroom/projects/queries/projects';
import { importFromPlunk } from '@mailroom/plunk-import/run';
import { adminOps } from '@mailroom/projects/admin';
import { createKeyOp, importKeysOp } from '@mailroom/projects/admin-keys';
import { guardrailOps } from './routes/admin-guardrails';
import { retentionOps } from './routes/admin-retention';
import { connectionOps } from './routes/admin-connections';
import { trackingOps } from './routes/admin-tracking';

/** One flag of a command. */
export interface CliFlag {
  /** Without the leading `--`. */
  name: string;
  /** Placeholder of its value (`ID`, `N`); absent for a boolean switch. */
  value?: string;
  required?: boolean;
  description: string;
}

/** What a command's `run` gets: its parsed flags, the configuration, the database and the progress sink. */
export interface CliContext {
  values: Record<string, string | boolean | undefined>;
  config: Config;
  database: Database;
  /** The `--project` id; throws a usage error when it is missing or not a UUID. */
  project: () => string;
  /** A usage error for this command (`message` + its usage line). */
  usage: (message: string) => Error;
  progress: (line: string) => void;
}

/** One command of the table. */
export interface CliCommand {
  /** The words that name it, e.g. `project create`. */
  name: string;
  summary: string;
  flags: CliFlag[];
  /** What it prints on success (JSON on stdout). */
  output: string;
  run: (ctx: CliContext) => Promise<unknown>;
}

const projectFlag: CliFlag = { name: 'project', value: 'ID', required: true, description: 'the project id (a UUID)' };
const str = (v: string | boolean | undefined): string | undefined => (typeof v === 'string' ? v : undefined);

/** The flags of `project retention` and the settings they set. */
const RETENTION_FLAGS = [
  ['email-content-days', 'emailContentDays', 'days an email keeps its content (subject, body, data)'],
  ['email-days', 'emailDays', 'days an email row is kept'],
  ['event-days', 'eventDays', 'days a contact event is kept'],
  ['webhook-days', 'webhookDays', 'days a webhook delivery is kept'],
  ['workflow-execution-days', 'workflowExecutionDays', 'days a finished workflow execution is kept'],
  ['inbound-days', 'inboundDays', 'days a received (inbound) message is kept'],
] as const;

/** The flags of `project guardrails` and the settings they set. */
const GUARDRAIL_FLAGS = [
  ['min-sample', 'minSample', 'N', "outcomes (deliveries, bounces, complaints) before a campaign's rates are judged"],
  [
    'max-hard-bounce-rate',
    'maxHardBounceRate',
    'R',
    'hard bounces per outcome (a fraction, 0–1) above which a campaign pauses',
  ],
  [
    'max-complaint-rate',
    'maxComplaintRate',
    'R',
    'complaints per outcome (a fraction, 0–1) above which a campaign pauses',
  ],
] as const;

/**
 * A settings patch from flags: `default` clears a setting (null); a number is passed as a number; anything else is
 * passed on as text, so the 422 names the setting and its rule.
 */
function patchOf(
  values: CliContext['values'],
  flags: ReadonlyArray<readonly [string, string, ...string[]]>,
  number: RegExp,
): Record<string, unknown> {
  const patch: Record<string, unknown> = {};
  for (const [flag, field] of flags) {
    const v = str(values[flag])?.trim();
    if (v !== undefined) patch[field] = v === 'default' ? null : number.test(v) ? Number(v) : v;
  }
  return patch;
}

/** Every command, in the order `--help` lists them. */
export const CLI_COMMANDS: CliCommand[] = [
  {
    name: 'project create',
    summary: 'Creates a project with its live and test key pairs.',
    flags: [{ name: 'name', value: 'NAME', required: true, description: "the project's name" }],
    output: '{ id, name, publicKey, secretKey, testPublicKey, testSecretKey } (keys are shown once)',
    run: async ({ values, database, usage }) => {
      const name = str(values.name)?.trim();
      if (!name) throw usage('--name is required');
      return adminOps.createProject(database.db, name);
    },
  },
  {
    name: 'project rotate-keys',
    summary:
      'Issues new keys of one mode; the old ones of that mode stay valid for KEY_ROTATION_GRACE_HOURS. `--mode test` on a project made before test mode issues its first sk_test_/pk_test_ pair.',
    flags: [projectFlag, { name: 'mode', value: 'live|test', description: 'which keys to rotate (default live)' }],
    output: 'the new keys of that mode',
    run: async ({ values, config, database, project, usage }) => {
      const mode = str(values.mode) ?? 'live';
      if (mode !== 'live' && mode !== 'test') throw usage('--mode must be live or test');
      return adminOps.rotateKeys(database.db, project(), config.keyRotationGraceHours, mode);
    },
  },
  {
    name: 'project keys',
    summary: "Lists the project's keys (never the keys themselves).",
    flags: [projectFlag],
    output: 'per key: id, kind, mode, prefix, dates, active, scope, allowedDomains',
    run: ({ database, project }) => adminOps.listKeys(database.db, project()),
  },
  {
    name: 'project create-key',
    summary:
      "Issues a send-only secret key (POST /v1/send and SMTP only), optionally restricted to some of the project's sending domains (each covers its subdomains).",
    flags: [
      projectFlag,
      {
        name: 'scope',
        value: 'sending',
        required: true,
        description: "the key's scope (`sending` is the only restricted scope)",
      },
      {
        name: 'domains',
        value: 'a.com,b.com',
        description: "the sending domains the key may send from (default: all of the project's)",
      },
      { name: 'mode', value: 'live|test', description: 'a live or a test key (default live)' },
    ],
    output: '{ id, key, kind, mode, scope, allowedDomains } (the key is shown once)',
    run: async ({ values, database, project, usage }) => {
      if (str(values.scope) !== 'sending') throw usage('--scope sending is required (the only restricted scope)');
      const mode = str(values.mode) ?? 'live';
      if (mode !== 'live' && mode !== 'test') throw usage('--mode must be live or test');
      const list = str(values.domains);
      const domains =
        list === undefined
          ? undefined
          : list
              .split(',')
              .map((d) => d.trim())
              .filter((d) => d !== '');
      return createKeyOp(database.db, project(), { scope: 'sending', domains, mode });
    },
  },
  {
    name: 'project revoke-key',
    summary:
      'Revokes one key at once. Revoking a current key prints a replacement of the same kind and mode (shown once).',
    flags: [
      projectFlag,
      {
        name: 'key',
        value: 'KEY|PREFIX|KEY_ID',
        required: true,
        description: 'the key, its prefix (as `project keys` lists it) or its id',
      },
    ],
    output: 'the revoked key, with `replacementKey` when it was a current one',
    run: async ({ values, database, project, usage }) => {
      const key = str(values.key);
      if (!key?.trim()) throw usage('--key is required (the key, its prefix as listed or its id)');
      return adminOps.revokeKey(database.db, project(), key);
    },
  },
  {
    name: 'project disable',
    summary: 'Disables a project: its keys get 403 PROJECT_DISABLED until it is enabled again.',
    flags: [projectFlag],
    output: 'the project',
    run: ({ database, project }) => adminOps.setDisabled(database.db, project(), true),
  },
  {
    name: 'project enable',
    summary: 'Enables a disabled project.',
    flags: [projectFlag],
    output: 'the project',
    run: ({ database, project }) => adminOps.setDisabled(database.db, project(), false),
  },
  {
    name: 'project guardrails',
    summary:
      "Shows or sets the project's campaign guardrails. Without setting flags it only shows them; each flag sets that setting, `default` clears it.",
    flags: [
      projectFlag,
      ...GUARDRAIL_FLAGS.map(([name, , value, description]) => ({ name, value: `${value}|default`, description })),
    ],
    output: '{ overrides, effective, defaults }',
    run: async ({ values, config, database, project }) => {
      const patch = patchOf(values, GUARDRAIL_FLAGS, /^(\d+(\.\d*)?|\.\d+)$/);
      if (Object.keys(patch).length === 0) return guardrailOps.get(database.db, config.guardrails, project());
      return guardrailOps.set(database.db, config.guardrails, project(), patch);
    },
  },
  {
    name: 'project retention',
    summary:
      "Shows or sets the project's data retention, in days. Without setting flags it only shows it; each flag sets that setting, `default` clears it.",
    flags: [
      projectFlag,
      ...RETENTION_FLAGS.map(([name, , description]) => ({ name, value: 'N|default', description })),
    ],
    output: '{ overrides, effective, defaults } (days)',
    run: async ({ values, config, database, project }) => {
      const patch = patchOf(values, RETENTION_FLAGS, /^\d+$/);
      if (Object.keys(patch).length === 0) return retentionOps.get(database.db, config.retention, project());
      return retentionOps.set(database.db, config.retention, project(), patch);
    },
  },
  {
    name: 'project connection',
    summary:
      "Binds the project's mail (its domains without a binding of their own) to a delivery connection of SES_CONNECTIONS; `none` unbinds it.",
    flags: [
      projectFlag,
      {
        name: 'connection',
        value: 'NAME|none',
        required: true,
        description: 'a configured connection name (`default`: the single-connection variables)',
      },
    ],
    output: '{ projectId, connection }',
    run: async ({ values, config, database, project, usage }) => {
      const name = str(values.connection)?.trim();
      if (!name) throw usage('--connection is required (a connection name, or none)');
      return connectionOps.bindProject(database.db, config.sesConnections, project(), name === 'none' ? null : name);
    },
  },
  {
    name: 'project tracking',
    summary:
      "Shows or sets the project's open and click tracking: ALL, MARKETING_ONLY or NONE. Without --mode it only shows it.",
    flags: [projectFlag, { name: 'mode', value: 'ALL|MARKETING_ONLY|NONE', description: 'the tracking mode to set' }],
    output: '{ projectId, trackingMode }',
    run: async ({ values, database, project }) => {
      const mode = str(values.mode)?.trim();
      return mode ? trackingOps.set(database.db, project(), mode) : trackingOps.get(database.db, project());
    },
  },
  {
    name: 'project import-keys',
    summary:
      'Stores keys brought from elsewhere (a Plunk project), hashed, so clients keep their keys; 409 CONFLICT if a key is already in use.',
    flags: [
      projectFlag,
      { name: 'secret-key', value: 'sk_…', required: true, description: 'the secret key to keep' },
      { name: 'public-key', value: 'pk_…', description: 'the public key to keep' },
    ],
    output: 'the stored keys (prefixes)',
    run: async ({ values, database, project, usage }) => {
      const secretKey = str(values['secret-key']);
      if (!secretKey) throw usage('--secret-key is required');
      return importKeysOp(database.db, project(), { secretKey, publicKey: str(values['public-key']) });
    },
  },
  {
    name: 'domain add',
    summary: 'Adds a sending domain to a project (`--verified` marks it verified without DNS, for development).',
    flags: [
      projectFlag,
      { name: 'domain', value: 'DOMAIN', required: true, description: 'the domain, e.g. example.com' },
      { name: 'verified', description: 'mark it verified at once' },
    ],
    output: '{ id, projectId, domain, verified }',
    run: async ({ values, database, project, usage }) => {
      const domain = str(values.domain);
      if (!domain) throw usage('--domain is required');
      const d = await adminOps.addDomain(database.db, project(), domain, values.verified === true);
      return { id: d.id, projectId: d.projectId, domain: d.domain, verified: d.verified };
    },
  },
  {
    name: 'domain connection',
    summary:
      "Binds a sending domain's mail to a delivery connection of SES_CONNECTIONS; `none` unbinds it (its project's binding, else the default, applies).",
    flags: [
      { name: 'domain', value: 'DOMAIN', required: true, description: 'the sending domain' },
      { name: 'connection', value: 'NAME|none', required: true, description: 'a configured connection name' },
    ],
    output: '{ domain, connection }',
    run: async ({ values, config, database, usage }) => {
      const domain = str(values.domain)?.trim();
      const name = str(values.connection)?.trim();
      if (!domain) throw usage('--domain is required');
      if (!name) throw usage('--connection is required (a connection name, or none)');
      return connectionOps.bindDomain(database.db, config.sesConnections, domain, name === 'none' ? null : name);
    },
  },
  {
    name: 'dev setup',
    summary:
      'A development project owning the domain (verified), with fresh keys; earlier keys stay valid for the rotation grace period. `npm run dev` runs it.',
    flags: [{ name: 'domain', value: 'DOMAIN', description: 'the domain (default example.com)' }],
    output: '{ id, …keys, domain }',
    run: async ({ values, config, database }) => {
      const domain = str(values.domain) ?? 'example.com';
      const owner = await domainOwner(database.db, domain);
      const project = owner
        ? await adminOps.rotateKeys(database.db, owner, config.keyRotationGraceHours)
        : await adminOps.createProject(database.db, 'Development');
      await adminOps.addDomain(database.db, project.id, domain, true);
      return { ...project, domain };
    },
  },
  {
    name: 'import plunk',
    summary: 'Imports a Plunk v2 database (projects, contacts, templates, campaigns, history); progress on stderr.',
    flags: [
      {
        name: 'database-url',
        value: 'postgres://…',
        required: true,
        description: "the Plunk database's connection string",
      },
      { name: 'batch-size', value: 'N', description: 'rows per statement, 1–10000' },
    ],
    output: 'the import summary',
    run: async ({ values, database, usage, progress }) => {
      const url = str(values['database-url']);
      if (!url || !/^postgres(ql)?:\/\//.test(url))
        throw usage('--database-url postgres://… (the Plunk database) is required');
      const raw = str(values['batch-size']);
      const batchSize = raw === undefined ? undefined : Number(raw);
      if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 10_000)) {
        throw usage('--batch-size must be a whole number from 1 to 10000');
      }
      const last = new Map<string, number>();
      return importFromPlunk(database.db, url, {
        batchSize,
        onProgress: (kind, done, total) => {
          // One line per kind per ~10% (and its last batch), so 100k contacts print a dozen lines, not fifty.
          const step = Math.max(1, Math.ceil(total / 10));
          if (done < total && Math.floor(done / step) === last.get(kind)) return;
          last.set(kind, Math.floor(done / step));
          progress(`import plunk: ${kind} ${done}/${total}`);
        },
      });
    },
  },
];

/** A command's usage line: `npm run cli -- project keys --project ID [--mode live|test]`. */
export function usageLine(c: CliCommand): string {
  const flags = c.flags.map((f) => {
    const text = f.value ? `--${f.name} ${f.value}` : `--${f.name}`;
    return f.required ? text : `[${text}]`;
  });
  return ['npm run cli --', c.name, ...flags].join(' ');
}

/** `--help`: every command's usage line and summary. */
export function overviewHelp(): string {
  const lines = ['usage: npm run cli -- <command> [flags]', '       npm run cli -- help <command>', '', 'commands:'];
  for (const c of CLI_COMMANDS) lines.push(`  ${usageLine(c).replace('npm run cli -- ', '')}`, `      ${c.summary}`);
  lines.push(
    '',
    'Prints JSON on success; exits 1 with a message on error. Reads the same environment as the API (DATABASE_URL, …).',
  );
  return lines.join('\n');
}

/** `help <command>`: its usage, summary, flags and output. */
export function commandHelp(c: CliCommand): string {
  const width = Math.max(...c.flags.map((f) => `--${f.name}${f.value ? ` ${f.value}` : ''}`.length), 0);
  const flags = c.flags.map(
    (f) =>
      `  ${`--${f.name}${f.value ? ` ${f.value}` : ''}`.padEnd(width)}  ${f.required ? '(required) ' : ''}${f.description}`,
  );
  return [
    `usage: ${usageLine(c)}`,
    '',
    c.summary,
    ...(flags.length ? ['', 'flags:', ...flags] : []),
    '',
    `prints: ${c.output}`,
  ].join('\n');
}
