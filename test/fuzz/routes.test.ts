/**
 * Property-based fuzz test (docs/architecture.md#what-ci-proves): every operation of the OpenAPI document is driven
 * with hostile input that fast-check generates from the operation's own schemas: U+0000 in strings, keys, query values
 * and path segments; JSON nested up to 10,000 levels; out-of-range and non-decimal numbers; over-long strings; wrong
 * types; unknown and missing fields; bodies whose Content-Encoding does not decode or is unknown; hostile path ids.
 *
 * Every generated request is invalid by construction, so for each one the test asserts: no 5xx; a 4xx with the
 * standard error body (and, for VALIDATION_ERROR / INVALID_PARAMETERS, `errors[]` naming each field); and nothing
 * written: the fingerprint of every row the project owns (`snapshot.ts`) is the same before and after.
 *
 * Deterministic: the seed is fixed (FUZZ_SEED overrides it; FUZZ_RUNS sets the runs per operation) and printed
 * with the number of inputs tried and the count per status. A failure prints the seed, the fast-check path and
 * the counterexample, so `FUZZ_SEED=… npx jest test/fuzz` replays it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import fc from 'fast-check';
import {
  ADMIN_TOKEN,
  createTestProject,
  isolatedDatabase,
  startTestApi,
  testConfig,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { fromSchema, type Gen, type Schema } from './schema-arbitrary';
import { BODY_MUTATIONS, Deep, mutateBody, outOfRange, serialize, type BodyMutation } from './mutations';
import { changedTables, projectSnapshot, type Snapshot } from './snapshot';
import { expressServerOptions } from '../../apps/api/src/http/server-classes';

const SEED = Number(process.env.FUZZ_SEED ?? 15_2026);
const RUNS = Number(process.env.FUZZ_RUNS ?? 50);
/** FUZZ_ONLY: a regular expression of operationIds to fuzz (to replay one). */
const ONLY = new RegExp(process.env.FUZZ_ONLY ?? '.');

interface Parameter {
  name: string;
  in: 'query' | 'path' | 'header';
  required?: boolean;
  schema: Schema;
}

interface Operation {
  method: string;
  path: string;
  operationId: string;
  parameters?: Parameter[];
  requestBody?: { content: Record<string, { schema?: Schema }> };
  security?: Array<Record<string, unknown>>;
}

/**
 * Operations whose body is not fuzzed, and why (their path and query parameters still are):
 * - `importContacts`: bad rows of an import are accepted on purpose and reported per row by the worker;
 *   a hostile file is stored as an import, so "nothing written" does not apply to its body.
 */
const BODY_NOT_FUZZED = new Set(['importContacts']);

type QueryMutation = 'q-nul' | 'q-number' | 'q-range' | 'q-repeat' | 'q-filter';
const ENCODING_MUTATIONS = ['bad-encoding', 'unknown-encoding', 'compressed-hostile', 'wrong-content-type'] as const;
type Kind = BodyMutation | QueryMutation | (typeof ENCODING_MUTATIONS)[number] | 'p-bad' | 'text-garbage';

/** Path segments no path parameter accepts (already percent-encoded as they go on the wire). */
const BAD_PATH = [
  'not-a-uuid',
  '%00',
  'a%00b%40c.test',
  '%E0%A4%A',
  'x'.repeat(3000),
  '%2e%2e%2f%2e%2e',
  '%20',
  '1e2',
  '-1',
  'null',
  'a%40b%40c',
  '%F0%9F%92%A9',
  '0x10',
  '%0A',
];

const NUMERIC_TEXT = [
  '1e2',
  '0x10',
  '%205',
  '5%20',
  '5.0',
  '+5',
  '0b11',
  'Infinity',
  'NaN',
  '',
  '-0.5',
  '99999999999999999999999',
  '1%2C000',
];

interface Built {
  method: string;
  path: string;
  headers: Record<string, string>;
  body?: Buffer;
  what: string;
}

interface Answer {
  status: number;
  json?: Record<string, unknown>;
  text: string;
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

function send(port: number, b: Built): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method: b.method.toUpperCase(),
        path: b.path,
        agent,
        headers: { ...b.headers, ...(b.body ? { 'Content-Length': String(b.body.length) } : {}) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          let json: Record<string, unknown> | undefined;
          if (/json/.test(String(res.headers['content-type']))) json = JSON.parse(text) as Record<string, unknown>;
          resolve({ status: res.statusCode!, json, text });
        });
      },
    );
    req.on('error', reject);
    req.end(b.body);
  });
}

function paramText(v: unknown): string {
  return encodeURIComponent(typeof v === 'string' ? v : JSON.stringify(v));
}

/** What kinds of hostile input an operation can be given. */
function kindsOf(op: Operation): Kind[] {
  const kinds: Kind[] = [];
  const json = op.requestBody?.content['application/json']?.schema;
  if (json && !BODY_NOT_FUZZED.has(op.operationId)) kinds.push(...BODY_MUTATIONS, ...ENCODING_MUTATIONS);
  if (op.requestBody?.content['text/plain']) kinds.push('text-garbage', 'bad-encoding', 'unknown-encoding');
  const query = (op.parameters ?? []).filter((p) => p.in === 'query');
  if (query.some((p) => p.schema.type === 'string')) kinds.push('q-nul');
  if (query.some((p) => p.schema.type === 'integer' || p.schema.type === 'number')) kinds.push('q-number', 'q-repeat');
  if (query.some((p) => outOfRange(p.schema).length > 0)) kinds.push('q-range');
  if (query.some((p) => p.name === 'filter')) kinds.push('q-filter');
  if ((op.parameters ?? []).some((p) => p.in === 'path')) kinds.push('p-bad');
  return kinds;
}

interface Input {
  kind: Kind;
  body: Gen | null;
  query: Record<string, string>;
  pathValues: Record<string, string>;
  pick: number;
  deepDepth: number;
  deepShape: 'array' | 'object';
  compressor: number;
  idempotencyKey: string | null;
}

function inputArb(op: Operation, kinds: Kind[]): fc.Arbitrary<Input> {
  const bodySchema = op.requestBody?.content['application/json']?.schema;
  const params = op.parameters ?? [];
  const queryArb = fc.record(
    Object.fromEntries(
      params
        .filter((p) => p.in === 'query' && p.schema.type !== undefined)
        .map((p) => {
          const arb = fromSchema(p.schema).map((g) =>
            typeof g.value === 'string' ? g.value : JSON.stringify(g.value),
          );
          return [p.name, p.required ? arb : fc.option(arb, { nil: undefined })];
        }),
    ) as Record<string, fc.Arbitrary<string>>,
  );
  const pathArb = fc.record(
    Object.fromEntries(
      params
        .filter((p) => p.in === 'path')
        .map((p) => [
          p.name,
          p.schema.format === 'uuid' || p.name.endsWith('Id') || p.name === 'id'
            ? fc.uuid()
            : fc.constantFrom('x@example.com', 'A'.repeat(43)),
        ]),
    ),
  );
  return fc.record({
    kind: fc.constantFrom(...kinds),
    body: bodySchema ? fromSchema(bodySchema) : fc.constant(null),
    query: queryArb.map(
      (q) => Object.fromEntries(Object.entries(q).filter(([, v]) => v !== undefined)) as Record<string, string>,
    ),
    pathValues: pathArb,
    pick: fc.nat({ max: 1_000_000 }),
    deepDepth: fc.constantFrom(33, 34, 64, 1000, 10_000),
    deepShape: fc.constantFrom('array' as const, 'object' as const),
    compressor: fc.nat({ max: 5 }),
    idempotencyKey: fc.option(fc.uuid(), { nil: null }),
  });
}

/** Builds the HTTP request of one input. */
function build(op: Operation, input: Input, auth: string | undefined): Built {
  const params = op.parameters ?? [];
  const headers: Record<string, string> = {};
  if (auth) headers.Authorization = auth;
  if (input.idempotencyKey && params.some((p) => p.in === 'header' && p.name === 'Idempotency-Key'))
    headers['Idempotency-Key'] = input.idempotencyKey;
  const pathValues = { ...input.pathValues };
  const encoded = new Set<string>(); // path values already percent-encoded (the hostile ones)
  const queryPairs: string[] = Object.entries(input.query).map(([k, v]) => `${k}=${paramText(v)}`);
  let body: Buffer | undefined;
  let what: string = input.kind;
  const pickFrom = <T>(xs: T[]) => xs[input.pick % xs.length];
  const jsonBody = (v: unknown) => {
    headers['Content-Type'] = 'application/json';
    body = Buffer.from(serialize(v));
  };
  const mutated = (kind: BodyMutation) => mutateBody(input.body!, kind, input.pick, input.deepDepth, input.deepShape);

  switch (input.kind) {
    case 'nul-string':
    case 'nul-key':
    case 'deep':
    case 'unknown-field':
    case 'wrong-type':
    case 'out-of-range':
    case 'missing-required': {
      const m = mutated(input.kind);
      jsonBody(m.body);
      what = m.what;
      break;
    }
    case 'bad-encoding': {
      const plain = Buffer.from(input.body ? serialize(input.body.value) : 'garbage');
      const variants: Array<[string, Buffer]> = [
        ['gzip', Buffer.from('not gzip at all, not even close')],
        ['gzip', gzipSync(plain).subarray(0, Math.max(10, Math.floor(gzipSync(plain).length / 2)))],
        ['deflate', Buffer.from([0x78, 0x9c, 0xff, 0xff, 0x00, 0x01, 0x02])],
        ['br', Buffer.from('this is certainly not a brotli stream')],
        ['gzip', Buffer.alloc(0)],
        ['deflate', gzipSync(plain)],
      ];
      const [enc, bytes] = variants[input.compressor % variants.length];
      headers['Content-Type'] = op.requestBody?.content['application/json'] ? 'application/json' : 'text/plain';
      headers['Content-Encoding'] = enc;
      body = bytes;
      what = `undecodable ${enc} body (${bytes.length} bytes)`;
      break;
    }
    case 'unknown-encoding': {
      const enc = ['compress', 'zstd', 'x-fuzz', 'gzip, br', 'identity, gzip', 'exi'][input.compressor % 6];
      headers['Content-Type'] = op.requestBody?.content['application/json'] ? 'application/json' : 'text/plain';
      headers['Content-Encoding'] = enc;
      body = Buffer.from(input.body ? serialize(input.body.value) : '{}');
      what = `unknown Content-Encoding ${enc}`;
      break;
    }
    case 'compressed-hostile': {
      const m = mutated(BODY_MUTATIONS[input.pick % BODY_MUTATIONS.length]);
      const [enc, compress] = (
        [
          ['gzip', gzipSync],
          ['deflate', deflateSync],
          ['br', brotliCompressSync],
        ] as const
      )[input.compressor % 3];
      headers['Content-Type'] = 'application/json';
      headers['Content-Encoding'] = enc;
      body = compress(Buffer.from(serialize(m.body)));
      what = `${enc}-compressed: ${m.what}`;
      break;
    }
    case 'wrong-content-type': {
      headers['Content-Type'] = pickFrom([
        'text/plain',
        'application/x-www-form-urlencoded',
        'multipart/form-data; boundary=x',
        'application/xml',
      ]);
      body = Buffer.from(input.body ? serialize(input.body.value) : '{}');
      what = `JSON sent as ${headers['Content-Type']}`;
      break;
    }
    case 'text-garbage': {
      headers['Content-Type'] = 'text/plain; charset=UTF-8';
      const texts = [
        'not json',
        serialize(new Deep(input.deepDepth, input.deepShape)),
        JSON.stringify({
          Type: 'Notification',
          MessageId: '\u0000',
          TopicArn: 'arn:aws:sns:us-east-1:1:t\u0000',
          Message: '{}',
        }),
        JSON.stringify({ Type: 'SubscriptionConfirmation', SubscribeURL: 'http://127.0.0.1:1/\u0000' }),
        '{"Type":' + '9'.repeat(400) + '}',
        '\u0000'.repeat(50),
      ];
      body = Buffer.from(texts[input.compressor % texts.length]);
      what = `SNS body: ${texts[input.compressor % texts.length].slice(0, 40)}`;
      break;
    }
    case 'q-nul':
    case 'q-number':
    case 'q-range':
    case 'q-repeat':
    case 'q-filter': {
      const query = params.filter((p) => p.in === 'query');
      const fits: Record<typeof input.kind, (p: Parameter) => boolean> = {
        'q-nul': (p) => p.schema.type === 'string',
        'q-number': (p) => p.schema.type === 'integer' || p.schema.type === 'number',
        'q-repeat': (p) => p.schema.type === 'integer' || p.schema.type === 'number',
        'q-range': (p) => outOfRange(p.schema).length > 0,
        'q-filter': (p) => p.name === 'filter',
      };
      const p = pickFrom(query.filter(fits[input.kind]));
      const others = queryPairs.filter((q) => !q.startsWith(`${p.name}=`));
      let value: string;
      if (input.kind === 'q-nul') value = `${paramText(input.query[p.name] ?? 'x').slice(0, 20)}%00`;
      else if (input.kind === 'q-number') value = pickFrom(NUMERIC_TEXT);
      else if (input.kind === 'q-repeat') value = `1&${p.name}=2`;
      else if (input.kind === 'q-range') value = paramText(pickFrom(outOfRange(p.schema)));
      else {
        const filters = [
          // At most 200 deep here: a URL over Node's 16 KB header limit is refused by Node itself (431, no body).
          serialize(new Deep(Math.min(input.deepDepth, 200), input.deepShape)),
          JSON.stringify([{ field: 'email', operator: 'equals', value: 'a\u0000' }]),
          JSON.stringify([{ field: 'event.signup', operator: 'greaterThan', value: 1e20 }]),
          JSON.stringify([{ field: 'event.signup', operator: 'lessThan', value: -1e20 }]),
          JSON.stringify([{ field: 'createdAt', operator: 'greaterThan', value: '0000-01-01' }]),
          JSON.stringify([{ field: 'data.x\u0000', operator: 'exists' }]),
          JSON.stringify({ logic: 'AND', groups: [{ filters: [{ field: 'data.a', operator: 'in', value: [] }] }] }),
        ];
        value = paramText(filters[input.compressor % filters.length]);
      }
      queryPairs.splice(0, queryPairs.length, ...others, `${p.name}=${value}`);
      what = `${input.kind}: ${p.name}=${value.slice(0, 60)}`;
      break;
    }
    case 'p-bad': {
      const names = params.filter((p) => p.in === 'path').map((p) => p.name);
      const name = names[input.pick % names.length];
      pathValues[name] = BAD_PATH[(Math.floor(input.pick / names.length) + input.compressor) % BAD_PATH.length]!;
      encoded.add(name);
      what = `path ${name}=${pathValues[name].slice(0, 40)}`;
      // A body, if the operation takes one, stays a plausible one: the path alone must be refused.
      if (input.body && op.requestBody?.content['application/json']) jsonBody(input.body.value);
      break;
    }
  }
  const path = op.path.replace(/\{(\w+)\}/g, (_m, name: string) =>
    encoded.has(name) ? pathValues[name] : encodeURIComponent(pathValues[name]),
  );
  return { method: op.method, path: queryPairs.length ? `${path}?${queryPairs.join('&')}` : path, headers, body, what };
}

/** Problems with one answer (empty: as required). */
function problems(a: Answer): string[] {
  const out: string[] = [];
  if (a.status >= 500) out.push(`status ${a.status}`);
  else if (a.status < 400) out.push(`hostile input accepted with ${a.status}`);
  if (!a.json) return [...out, `not a JSON error body: ${a.text.slice(0, 80)}`];
  const e = a.json.error as
    | {
        code?: unknown;
        message?: unknown;
        statusCode?: unknown;
        errors?: Array<{ field?: unknown; message?: unknown; code?: unknown }>;
      }
    | undefined;
  if (a.json.success !== false || !e) return [...out, 'no standard error body'];
  if (typeof e.code !== 'string' || typeof e.message !== 'string' || e.statusCode !== a.status)
    out.push('error.code/message/statusCode missing or wrong');
  if (a.json.code !== e.code || a.json.message !== e.message || typeof a.json.timestamp !== 'string')
    out.push('top-level code/message/timestamp missing');
  if (e.code === 'VALIDATION_ERROR' || e.code === 'INVALID_PARAMETERS') {
    if (!Array.isArray(e.errors) || e.errors.length === 0) out.push(`${e.code} without errors[]`);
    else if (
      e.errors.some(
        (x) =>
          typeof x.field !== 'string' || x.field === '' || typeof x.message !== 'string' || typeof x.code !== 'string',
      )
    )
      out.push('errors[] item without field/message/code');
  }
  return out;
}

let api: TestApi;
let server: http.Server;
let port: number;
let iso: { url: string; drop: () => Promise<void> };

beforeAll(async () => {
  // A database of its own: the admin routes' "nothing written" check counts every project, and the other test
  // files create projects in the shared database while this one runs.
  iso = await isolatedDatabase();
  api = await startTestApi(testConfig({ DATABASE_URL: iso.url, RATE_LIMIT_PER_MINUTE: '10000000' }));
  server = http.createServer(expressServerOptions(api.app), api.app);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  port = (server.address() as AddressInfo).port;
});

afterAll(async () => {
  agent.destroy();
  await new Promise((resolve) => server.close(resolve));
  await api.close();
  await iso.drop();
});

test('every operation refuses hostile input with a 4xx naming the field, and stores nothing', async () => {
  const doc = (await send(port, { method: 'get', path: '/openapi.json', headers: {}, what: '' })).json as {
    paths: Record<string, Record<string, Omit<Operation, 'method' | 'path'>>>;
  };
  const all: Operation[] = Object.entries(doc.paths).flatMap(([path, methods]) =>
    Object.entries(methods).map(([method, op]) => ({ ...op, method, path })),
  );
  expect(all.length).toBeGreaterThan(50);
  const operations = all.filter((op) => ONLY.test(op.operationId));

  const byStatus = new Map<number, number>();
  const byKind = new Map<string, number>();
  const failures: string[] = [];
  const skipped: string[] = [];
  let tried = 0;
  const started = Date.now();

  for (const op of operations) {
    const kinds = kindsOf(op);
    const seed = SEED + all.indexOf(op);
    if (kinds.length === 0) {
      // No body, query or path input to make hostile (e.g. GET /admin/stats): headers and keys are covered by
      // the auth tests.
      skipped.push(`${op.method.toUpperCase()} ${op.path}`);
      continue;
    }
    const project: TestProject = await createTestProject(api.database);
    const scheme = Object.keys(op.security?.[0] ?? {})[0];
    const auth = scheme === 'apiKey' ? project.auth : scheme === 'adminToken' ? `Bearer ${ADMIN_TOKEN}` : undefined;
    const projectCount = async () =>
      (await api.database.pool.query<{ n: string }>('select count(*) as n from projects')).rows[0].n;
    const details = await fc.check(
      fc.asyncProperty(inputArb(op, kinds), async (input) => {
        const req = build(op, input, auth);
        const before: Snapshot = await projectSnapshot(api.database, project.id);
        const projectsBefore = scheme === 'adminToken' ? await projectCount() : '';
        const answer = await send(port, req);
        tried++;
        byStatus.set(answer.status, (byStatus.get(answer.status) ?? 0) + 1);
        byKind.set(input.kind, (byKind.get(input.kind) ?? 0) + 1);
        const found = problems(answer);
        const changed = changedTables(before, await projectSnapshot(api.database, project.id));
        if (changed.length > 0) found.push(`rows written in ${changed.join(', ')}`);
        if (scheme === 'adminToken' && (await projectCount()) !== projectsBefore) found.push('a project was created');
        if (found.length > 0) {
          throw new Error(
            `${req.method.toUpperCase()} ${req.path.slice(0, 200)} [${req.what}] → ${answer.status} ${answer.text.slice(0, 300)}: ${found.join('; ')}`,
          );
        }
      }),
      // Each operation gets its own seed derived from the run's, so one operation's failure replays alone.
      { seed, numRuns: RUNS, endOnFailure: true },
    );
    if (details.failed) {
      failures.push(
        `${op.operationId} (FUZZ_ONLY=^${op.operationId}$ FUZZ_SEED=${SEED} → seed ${seed}, path ${details.counterexamplePath}): ${String((details.errorInstance as Error | undefined)?.message ?? details.errorInstance)}`,
      );
    }
  }

  const seconds = ((Date.now() - started) / 1000).toFixed(1);
  const statuses = [...byStatus.entries()]
    .sort(([a], [b]) => a - b)
    .map(([s, n]) => `${s}: ${n}`)
    .join(', ');
  const kinds = [...byKind.entries()]
    .sort()
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');
  console.log(
    `fuzz: ${tried} hostile inputs over ${operations.length - skipped.length} operations in ${seconds} s (seed ${SEED}, ${RUNS} runs each)\n` +
      `  by status: ${statuses}\n  by kind: ${kinds}\n` +
      `  not fuzzed (no input to make hostile): ${skipped.join(', ') || 'none'}\n` +
      `  failures: ${failures.length}${failures.length ? '\n    ' + failures.join('\n    ') : ''}`,
  );
  expect(failures).toEqual([]);
  expect(tried).toBeGreaterThanOrEqual((operations.length - skipped.length) * RUNS);
  // A correctness test, not a timing one: ~2 min alone, 5+ min on a host busy with other suites.
}, 900_000);
