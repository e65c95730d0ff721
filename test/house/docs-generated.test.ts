/**
 * The generated documents (docs/api/errors.md, docs/openapi.json, docs/self-hosting/configuration.md,
 * docs/self-hosting/cli.md) match their sources, and the sources cover what the code does: every variable the
 * configuration reads is documented, every CLI command and flag is in the help, the OpenAPI document describes
 * the headers, error codes, request examples and webhook events the API really has.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '@mailroom/config/config';
import { errorCatalog } from '@mailroom/platform/errors';
import { bodyValidator } from '@mailroom/platform/validation';
import { WEBHOOK_EVENT_TYPES } from '@mailroom/webhooks/webhooks';
import { GENERATED_DOCUMENTS } from '../../scripts/docs/documents';
import { configVariables } from '../../scripts/docs/configuration';
import { documentedRoutes, openApiDocument } from '../../scripts/docs/openapi';
import { CLI_COMMANDS } from '../../apps/api/src/cli-commands';
import { cliHelp } from '../../apps/api/src/cli';

const ROOT = path.resolve(__dirname, '..', '..');

describe('generated documents are current', () => {
  test.each(GENERATED_DOCUMENTS.map((d) => [d.path, d] as const))('%s', (file, doc) => {
    const current = readFileSync(path.join(ROOT, file), 'utf8');
    if (current !== doc.render()) {
      throw new Error(`${file} is stale: its source changed. Run \`npm run docs:generate\` and commit the result.`);
    }
  });
});

describe('configuration.md covers the configuration', () => {
  /** Every variable name loadConfig reads from an empty environment (and so from any). */
  function variablesRead(): Set<string> {
    const read = new Set<string>();
    const env = new Proxy<Record<string, string | undefined>>(
      {},
      {
        get: (_t, name) => {
          if (typeof name === 'string') read.add(name);
          return undefined;
        },
      },
    );
    loadConfig(env);
    return read;
  }

  test('every variable the configuration reads is documented once, and every documented one is read', () => {
    const documented = configVariables().map((v) => v.name);
    expect(documented.filter((n, i) => documented.indexOf(n) !== i)).toEqual([]);
    const read = [...variablesRead()].sort();
    const missing = read.filter((n) => !documented.includes(n));
    if (missing.length > 0) {
      throw new Error(
        `read but not documented: ${missing.join(', ')}; describe each in the TSDoc of its slice's …Config interface, then run \`npm run docs:generate\``,
      );
    }
    expect(documented.filter((n) => !read.includes(n))).toEqual([]);
  });

  test("each variable has a process, a group and a description; the defaults are the slices'", () => {
    const vars = configVariables();
    for (const v of vars) {
      expect({ name: v.name, processes: v.processes.length > 0, described: v.description.length > 5 }).toEqual({
        name: v.name,
        processes: true,
        described: true,
      });
    }
    const byName = new Map(vars.map((v) => [v.name, v]));
    expect(byName.get('PORT')).toMatchObject({ default: '8080', group: 'api', processes: ['api'] });
    expect(byName.get('DATABASE_URL')).toMatchObject({ group: 'required' });
    expect(byName.get('WORKER_HEALTH_PORT')).toMatchObject({ default: '8081', group: 'worker', processes: ['worker'] });
    expect(byName.get('RETENTION_EMAIL_DAYS')).toMatchObject({ default: '365' });
    const md = readFileSync(path.join(ROOT, 'docs/self-hosting/configuration.md'), 'utf8');
    for (const v of vars) expect(md).toContain(`| \`${v.name}\` |`);
  });
});

describe('CLI help and cli.md', () => {
  test('--help lists every command with every flag, project guardrails and project retention included', () => {
    const help = cliHelp(['--help'])!;
    expect(cliHelp(['help'])).toBe(help);
    for (const c of CLI_COMMANDS) {
      expect(help).toContain(c.name);
      for (const f of c.flags) expect(help).toContain(`--${f.name}`);
    }
    expect(help).toMatch(/project guardrails --project ID \[--min-sample N\|default\]/);
    expect(help).toMatch(/project retention --project ID \[--email-content-days N\|default\]/);
    expect(cliHelp(['project', 'keys'])).toBeUndefined();
  });

  test('help <command> and <command> --help explain one command; an unknown one is named', () => {
    const one = cliHelp(['help', 'project', 'retention'])!;
    expect(one).toMatch(/^usage: npm run cli -- project retention --project ID/);
    expect(one).toContain('--workflow-execution-days N|default');
    expect(cliHelp(['project', 'retention', '--help'])).toBe(one);
    expect(() => cliHelp(['help', 'project', 'explode'])).toThrow('unknown command "project explode"');
  });

  test('cli.md has a section per command with each flag', () => {
    const md = readFileSync(path.join(ROOT, 'docs/self-hosting/cli.md'), 'utf8');
    for (const c of CLI_COMMANDS) {
      expect(md).toContain(`## ${c.name}\n`);
      for (const f of c.flags) expect(md).toContain(`\`--${f.name}`);
    }
  });
});

describe('docs/api/errors.md', () => {
  test('lists every code with its status and whether it is retryable', () => {
    const md = readFileSync(path.join(ROOT, 'docs/api/errors.md'), 'utf8');
    for (const [code, info] of Object.entries(errorCatalog)) {
      expect(md).toContain(`| \`${code}\` | ${info.status} | ${info.retryable ? 'yes' : 'no'} |`);
    }
  });
});

describe('OpenAPI document', () => {
  const doc = openApiDocument();
  type Response = { headers?: Record<string, unknown>; $ref?: string };
  type Operation = {
    operationId: string;
    responses: Record<string, Response>;
    requestBody?: { content: Record<string, { example?: unknown }> };
    parameters?: Array<{ name: string }>;
  };
  const operations = Object.entries(doc.paths).flatMap(([p, item]) =>
    Object.entries(item as Record<string, Operation>).map(([method, op]) => ({ path: p, method, op })),
  );
  const resolve = (r: Response): Response =>
    r.$ref ? (doc.components.responses as Record<string, Response>)[r.$ref.split('/').pop()!] : r;

  test("info.version is package.json's; the error schema has retryable", () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string };
    expect(doc.info.version).toBe(pkg.version);
    expect(doc.components.schemas.Error.properties.error.required).toContain('retryable');
  });

  test('every response carries X-Request-Id; 429 and 503 carry Retry-After; every operation documents 500 and 503', () => {
    for (const { path: p, method, op } of operations) {
      expect({ p, method, has503: '503' in op.responses }).toEqual({ p, method, has503: true });
      for (const [status, raw] of Object.entries(op.responses)) {
        const headers = resolve(raw).headers ?? {};
        expect({ p, method, status, requestId: 'X-Request-Id' in headers }).toEqual({
          p,
          method,
          status,
          requestId: true,
        });
        if (status === '429' || status === '503')
          expect({ p, method, status, retryAfter: 'Retry-After' in headers }).toEqual({
            p,
            method,
            status,
            retryAfter: true,
          });
      }
    }
  });

  test('key routes: RateLimit-* on their answers, Idempotent-Replayed on an idempotent success, error codes per status', () => {
    const send = (doc.paths['/v1/send'] as Record<string, Operation>).post;
    expect(Object.keys(send.responses['202'].headers!)).toEqual(
      expect.arrayContaining([
        'RateLimit-Limit',
        'RateLimit-Remaining',
        'RateLimit-Reset',
        'Idempotent-Replayed',
        'X-Request-Id',
      ]),
    );
    const limited = resolve(send.responses['429']) as Response & {
      description: string;
      content: Record<string, { schema: { allOf: unknown[] } }>;
    };
    expect(limited.description).toContain('`RATE_LIMITED` (retryable)');
    expect(JSON.stringify(limited.content['application/json'].schema)).toContain('"retryable":{"const":true}');
    const invalid = resolve(send.responses['422']) as Response & { description: string };
    expect(invalid.description).toContain('`VALIDATION_ERROR` (not retryable)');
    expect(invalid.description).toContain('`IDEMPOTENCY_CONFLICT`');
    expect(Object.keys(resolve(send.responses['401']).headers!)).not.toContain('RateLimit-Limit');
  });

  test("every JSON request body has an example that the route's own validator accepts", () => {
    const routes = documentedRoutes();
    let checked = 0;
    const refused: string[] = [];
    for (const r of routes.filter((x) => x.body)) {
      const p = r.path.replace(/:(\w+)/g, '{$1}');
      const op = (doc.paths[p] as Record<string, Operation>)[r.method];
      const example = op.requestBody?.content['application/json'].example;
      expect({ op: op.operationId, example: example !== undefined }).toEqual({ op: op.operationId, example: true });
      try {
        bodyValidator(r.body!)(structuredClone(example));
      } catch (err) {
        refused.push(
          `${op.operationId}: its example ${JSON.stringify(example)} is refused: ${JSON.stringify((err as { options?: { errors?: unknown } }).options?.errors ?? String(err))}`,
        );
      }
      checked++;
    }
    expect(refused).toEqual([]);
    expect(checked).toBeGreaterThan(30);
  });

  test('webhooks: one per event type the platform emits, each with its payload schema', () => {
    expect(Object.keys(doc.webhooks).sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    for (const type of WEBHOOK_EVENT_TYPES) {
      const schema = (
        doc.webhooks[type] as {
          post: {
            requestBody: {
              content: {
                'application/json': { schema: { properties: { type: { const: string }; data: { type: string } } } };
              };
            };
          };
        }
      ).post.requestBody.content['application/json'].schema;
      expect(schema.properties.type.const).toBe(type);
      expect(schema.properties.data.type).toBe('object');
    }
  });

  test('POST /webhooks/sns is documented beside /webhooks/ses', () => {
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/webhooks/ses', '/webhooks/sns']));
  });
});
