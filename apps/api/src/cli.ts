/**
 * Operator CLI (`npm run cli -- …`). Prints JSON on success; exits 1 with a message on error.
 *
 *   project create --name NAME              → { id, name, publicKey, secretKey, testPublicKey, testSecretKey }
 *   project rotate-keys --project ID [--mode live|test]
 *                                           → new keys of that mode (default live); the old ones of that mode
 *                                              stay valid for KEY_ROTATION_GRACE_HOURS. `--mode test` on a project
 *                                              made before test mode issues its first sk_test_/pk_test_ pair
 *   project keys --project ID               → the project's keys: id, kind, mode, prefix, dates, active, scope,
 *                                              allowedDomains
 *   project create-key --project ID --scope sending [--domains a.com,b.com] [--mode live|test]
 *                                           → a send-only secret key (POST /v1/send and SMTP only), optionally only
 *                                              from the listed domains of the project; `key` is shown once
 *   project revoke-key --project ID --key K → revokes one key at once; K is the key, its prefix (as `project keys`
 *                                              lists it) or its id. Revoking a current key prints a replacement of
 *                                              the same kind and mode (`replacementKey`, shown once)
 *   project disable|enable --project ID
 *   project guardrails --project ID [--min-sample N] [--max-hard-bounce-rate R] [--max-complaint-rate R]
 *                                           → the project's campaign guardrails (overrides, effective, defaults);
 *                                              each flag sets that setting, `default` clears it
 *   project retention --project ID [--email-content-days N] [--email-days N] [--event-days N] [--webhook-days N]
 *                     [--workflow-execution-days N] [--inbound-days N]
 *                                           → the project's data retention (overrides, effective, defaults), days;
 *                                              each flag sets that setting, `default` clears it
 *   domain add --project ID --domain example.com [--verified]
 *   dev setup [--domain example.com]        → a development project owning the domain (verified), with fresh
 *                                              keys (earlier keys stay valid for the rotation grace period)
 *   project import-keys --project ID --secret-key sk_… [--public-key pk_…]
 *                                           → stores keys brought from elsewhere (hashed); 409 if already in use
 *   import plunk --database-url postgres://… [--batch-size N]
 *                                           → imports a Plunk v2 database (README "Moving in from Plunk");
 *                                              progress on stderr, the summary (JSON) on stdout
 *
 * @module
 */
import { parseArgs } from 'node:util';
import { AppError } from '@mailroom/platform/errors';
import { isUuid } from '@mailroom/platform/ids';
import { loadConfig } from '@mailroom/config/config';
import { createDatabase } from '@mailroom/db/client';
import { domainOwner } from '@mailroom/db/queries/projects';
import { importFromPlunk } from '@mailroom/plunk-import/run';
import { adminOps } from './routes/admin';
import { createKeyOp, importKeysOp } from './routes/admin-keys';
import { guardrailOps } from './routes/admin-guardrails';
import { retentionOps } from './routes/admin-retention';

/** The CLI flags of `project retention` and the settings they set. */
const RETENTION_FLAGS = [
  ['email-content-days', 'emailContentDays'],
  ['email-days', 'emailDays'],
  ['event-days', 'eventDays'],
  ['webhook-days', 'webhookDays'],
  ['workflow-execution-days', 'workflowExecutionDays'],
  ['inbound-days', 'inboundDays'],
] as const;

const USAGE = `usage:
  npm run cli -- project create --name NAME
  npm run cli -- project rotate-keys --project ID [--mode live|test]
  npm run cli -- project keys --project ID
  npm run cli -- project create-key --project ID --scope sending [--domains a.com,b.com] [--mode live|test]
  npm run cli -- project revoke-key --project ID --key KEY|PREFIX|KEY_ID
  npm run cli -- project disable --project ID
  npm run cli -- project enable --project ID
  npm run cli -- project guardrails --project ID [--min-sample N|default] [--max-hard-bounce-rate R|default] [--max-complaint-rate R|default]
  npm run cli -- project retention --project ID [--email-content-days N|default] [--email-days N|default] [--event-days N|default] [--webhook-days N|default] [--workflow-execution-days N|default] [--inbound-days N|default]
  npm run cli -- domain add --project ID --domain DOMAIN [--verified]
  npm run cli -- dev setup [--domain example.com]
  npm run cli -- project import-keys --project ID --secret-key sk_... [--public-key pk_...]
  npm run cli -- import plunk --database-url postgres://... [--batch-size N]`;

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
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      name: { type: 'string' },
      project: { type: 'string' },
      key: { type: 'string' },
      mode: { type: 'string' },
      scope: { type: 'string' },
      domains: { type: 'string' },
      domain: { type: 'string' },
      verified: { type: 'boolean' },
      'secret-key': { type: 'string' },
      'public-key': { type: 'string' },
      'database-url': { type: 'string' },
      'batch-size': { type: 'string' },
      'min-sample': { type: 'string' },
      'max-hard-bounce-rate': { type: 'string' },
      'max-complaint-rate': { type: 'string' },
      'email-content-days': { type: 'string' },
      'email-days': { type: 'string' },
      'event-days': { type: 'string' },
      'webhook-days': { type: 'string' },
      'workflow-execution-days': { type: 'string' },
      'inbound-days': { type: 'string' },
    },
  });
  const command = positionals.join(' ');
  const config = loadConfig(env);
  const database = createDatabase({ url: config.databaseUrl, poolSize: 1, applicationName: 'mailroom-cli' });
  const project = () => {
    if (!values.project || !isUuid(values.project)) throw new Error(`--project ID is required (a project id)\n${USAGE}`);
    return values.project;
  };
  try {
    switch (command) {
      case 'project create':
        if (!values.name?.trim()) throw new Error(`--name is required\n${USAGE}`);
        return await adminOps.createProject(database.db, values.name.trim());
      case 'project rotate-keys': {
        const mode = values.mode ?? 'live';
        if (mode !== 'live' && mode !== 'test') throw new Error(`--mode must be live or test\n${USAGE}`);
        return await adminOps.rotateKeys(database.db, project(), config.keyRotationGraceHours, mode);
      }
      case 'project keys':
        return await adminOps.listKeys(database.db, project());
      case 'project create-key': {
        if (values.scope !== 'sending') throw new Error(`--scope sending is required (the only restricted scope)\n${USAGE}`);
        const mode = values.mode ?? 'live';
        if (mode !== 'live' && mode !== 'test') throw new Error(`--mode must be live or test\n${USAGE}`);
        const domains = values.domains === undefined ? undefined : values.domains.split(',').map((d) => d.trim()).filter((d) => d !== '');
        return await createKeyOp(database.db, project(), { scope: 'sending', domains, mode });
      }
      case 'project revoke-key':
        if (!values.key?.trim()) throw new Error(`--key is required (the key, its prefix as listed or its id)\n${USAGE}`);
        return await adminOps.revokeKey(database.db, project(), values.key);
      case 'project disable':
      case 'project enable':
        return await adminOps.setDisabled(database.db, project(), command === 'project disable');
      case 'project guardrails': {
        const patch: Record<string, unknown> = {};
        for (const [flag, field] of [['min-sample', 'minSample'], ['max-hard-bounce-rate', 'maxHardBounceRate'], ['max-complaint-rate', 'maxComplaintRate']] as const) {
          const v = values[flag]?.trim();
          // Not a number: passed on as text, so the 422 names the setting and its rule.
          if (v !== undefined) patch[field] = v === 'default' ? null : /^(\d+(\.\d*)?|\.\d+)$/.test(v) ? Number(v) : v;
        }
        if (Object.keys(patch).length === 0) return await guardrailOps.get(database.db, config.guardrails, project());
        return await guardrailOps.set(database.db, config.guardrails, project(), patch);
      }
      case 'project retention': {
        const patch: Record<string, unknown> = {};
        for (const [flag, field] of RETENTION_FLAGS) {
          const v = values[flag]?.trim();
          // Not a whole number: passed on as text, so the 422 names the setting and its rule.
          if (v !== undefined) patch[field] = v === 'default' ? null : /^\d+$/.test(v) ? Number(v) : v;
        }
        if (Object.keys(patch).length === 0) return await retentionOps.get(database.db, config.retention, project());
        return await retentionOps.set(database.db, config.retention, project(), patch);
      }
      case 'domain add': {
        if (!values.domain) throw new Error(`--domain is required\n${USAGE}`);
        const d = await adminOps.addDomain(database.db, project(), values.domain, values.verified ?? false);
        return { id: d.id, projectId: d.projectId, domain: d.domain, verified: d.verified };
      }
      case 'project import-keys':
        if (!values['secret-key']) throw new Error(`--secret-key is required\n${USAGE}`);
        return await importKeysOp(database.db, project(), { secretKey: values['secret-key'], publicKey: values['public-key'] });
      case 'import plunk': {
        const url = values['database-url'];
        if (!url || !/^postgres(ql)?:\/\//.test(url)) throw new Error(`--database-url postgres://… (the Plunk database) is required\n${USAGE}`);
        const batchSize = values['batch-size'] === undefined ? undefined : Number(values['batch-size']);
        if (batchSize !== undefined && !(Number.isInteger(batchSize) && batchSize >= 1 && batchSize <= 10_000)) {
          throw new Error(`--batch-size must be a whole number from 1 to 10000\n${USAGE}`);
        }
        const last = new Map<string, number>();
        return await importFromPlunk(database.db, url, {
          batchSize,
          onProgress: (kind, done, total) => {
            // One line per kind per ~10% (and its last batch), so 100k contacts print a dozen lines, not fifty.
            const step = Math.max(1, Math.ceil(total / 10));
            if (done < total && Math.floor(done / step) === last.get(kind)) return;
            last.set(kind, Math.floor(done / step));
            progress(`import plunk: ${kind} ${done}/${total}`);
          },
        });
      }
      case 'dev setup': {
        const domain = values.domain ?? 'example.com';
        const owner = await domainOwner(database.db, domain);
        const project = owner
          ? await adminOps.rotateKeys(database.db, owner, config.keyRotationGraceHours)
          : await adminOps.createProject(database.db, 'Development');
        await adminOps.addDomain(database.db, project.id, domain, true);
        return { ...project, domain };
      }
      default:
        throw new Error(USAGE);
    }
  } finally {
    await database.close();
  }
}

if (require.main === module) {
  runCli(process.argv.slice(2), process.env)
    .then((result) => {
      process.stdout.write(JSON.stringify(result, null, 2) + '\n');
    })
    .catch((err: Error) => {
      process.stderr.write(`${err instanceof AppError ? `${err.code}: ` : ''}${err.message}\n`);
      process.exit(1);
    });
}
