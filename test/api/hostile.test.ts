/**
 * Hostile input (docs/architecture.md#dependency-failures): every item answers a 4xx that names the field, never a 500,
 * and stores nothing.
 * - U+0000 in strings, object keys, query parameters and path parameters;
 * - JSON nested 10,000 levels deep (limit: 32 levels);
 * - a body whose Content-Encoding does not decode (400) or is unknown (415); valid gzip/deflate/br still work;
 * - segment filter values out of the column's range;
 * - addresses longer than RFC 5321 allows;
 * - numeric query parameters that are not plain decimal integers.
 */
import { brotliCompressSync, deflateSync, gzipSync } from 'node:zlib';
import request from 'supertest';
import { createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';
import { changedTables, projectSnapshot } from '../fuzz/snapshot';

const ctx = useApiWithProject({ RATE_LIMIT_PER_MINUTE: '100000' });

interface Sent {
  status: number;
  body: {
    success: boolean;
    error: {
      code: string;
      message: string;
      statusCode: number;
      errors?: { field: string; message: string; code: string }[];
    };
  };
}

/** Sends `raw` (a JSON text, or bytes) as the body of `method path`. */
function raw(
  p: TestProject,
  method: 'post' | 'patch' | 'put',
  path: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
) {
  let r = request(ctx.api.app)[method](path).set('Authorization', p.auth).set('Content-Type', 'application/json');
  for (const [k, v] of Object.entries(headers)) r = r.set(k, v);
  // As given: superagent would otherwise JSON-encode a Buffer sent with a JSON content type.
  return r.serialize((b: unknown) => b as string).send(body);
}

/** Runs `call` and asserts the project's rows did not change. */
async function storesNothing(p: TestProject, call: () => Promise<Sent>): Promise<Sent> {
  const before = await projectSnapshot(ctx.api.database, p.id);
  const res = await call();
  expect(changedTables(before, await projectSnapshot(ctx.api.database, p.id))).toEqual([]);
  return res;
}

function expectFieldError(res: Sent, status: number, code: string, field: string | RegExp) {
  expect({ status: res.status, code: res.body.error?.code }).toEqual({ status, code });
  expect(res.body.success).toBe(false);
  const fields = (res.body.error.errors ?? []).map((e) => e.field);
  expect(fields.some((f) => (typeof field === 'string' ? f === field : field.test(f)))).toBe(true);
}

/** `{"a":{"a":…1…}}` nested `depth` levels, as JSON text (built without recursion). */
function deepObject(depth: number): string {
  return '{"a":'.repeat(depth) + '1' + '}'.repeat(depth);
}

describe('U+0000 is refused at validation, naming the field', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });

  const bodies: Array<[string, 'post' | 'patch', string, (p: TestProject) => object, string]> = [
    [
      'send data value',
      'post',
      '/v1/send',
      (p) => ({ to: recipient(), from: `a@${p.domain}`, subject: 's', body: 'b', data: { name: 'x\u0000y' } }),
      'data.name',
    ],
    [
      'send data key',
      'post',
      '/v1/send',
      (p) => ({ to: recipient(), from: `a@${p.domain}`, subject: 's', body: 'b', data: { 'k\u0000': 1 } }),
      'data.k\\u0000',
    ],
    [
      'send subject',
      'post',
      '/v1/send',
      (p) => ({ to: recipient(), from: `a@${p.domain}`, subject: '\u0000', body: 'b' }),
      'subject',
    ],
    ['track event name', 'post', '/v1/track', () => ({ email: recipient(), event: 'sign\u0000up' }), 'event'],
    [
      'track data',
      'post',
      '/v1/track',
      () => ({ email: recipient(), event: 'signup', data: { plan: { tier: '\u0000' } } }),
      'data.plan.tier',
    ],
    [
      'contact data',
      'post',
      '/contacts',
      () => ({ email: recipient(), data: { list: ['ok', 'bad\u0000'] } }),
      'data.list.1',
    ],
    ['template name', 'post', '/templates', () => ({ name: 'n\u0000', subject: 's', body: 'b' }), 'name'],
    ['segment name', 'post', '/segments', () => ({ name: '\u0000', filter: [] }), 'name'],
    [
      'segment filter value',
      'post',
      '/segments',
      () => ({ name: 'seg', filter: [{ field: 'data.plan', operator: 'equals', value: 'a\u0000' }] }),
      'filter.0.value',
    ],
    [
      'workflow name',
      'post',
      '/workflows',
      () => ({ name: 'w\u0000', trigger: { type: 'EVENT', eventName: 'signup' } }),
      'name',
    ],
    [
      'webhook description',
      'post',
      '/webhooks/endpoints',
      () => ({ url: 'https://example.com/h', eventTypes: ['*'], description: '\u0000' }),
      'description',
    ],
    ['suppression note', 'post', '/suppressions', () => ({ email: recipient(), note: 'spam\u0000' }), 'note'],
  ];
  test.each(bodies)('%s → 422', async (_what, method, path, body, field) => {
    const res = await storesNothing(p, () => raw(p, method, path, JSON.stringify(body(p))));
    expectFieldError(res, 422, 'VALIDATION_ERROR', field);
  });

  const params: Array<[string, string, string]> = [
    ['contacts search', '/contacts?search=a%00b', 'search'],
    ['events name', '/events?name=%00', 'name'],
    ['events email', '/events?email=a%00@b.test', 'email'],
    ['templates cursor', '/templates?cursor=%00%00', 'cursor'],
    ['a query parameter name', '/contacts?se%00arch=1', 'se\\u0000arch'],
    ['suppression path email', '/suppressions/a%00b@example.com', 'email'],
    ['contact path id', '/contacts/%00', 'id'],
  ];
  test.each(params)('%s → 400 INVALID_PARAMETERS', async (_what, path, field) => {
    const res = await storesNothing(p, () => request(ctx.api.app).get(path).set('Authorization', p.auth));
    expectFieldError(res, 400, 'INVALID_PARAMETERS', field);
  });

  test('deleting a suppression by a path email with NUL is 400, not a 500', async () => {
    const res = await storesNothing(p, () =>
      request(ctx.api.app).delete('/suppressions/x%00@example.com').set('Authorization', p.auth),
    );
    expectFieldError(res, 400, 'INVALID_PARAMETERS', 'email');
  });

  test('a ?filter= whose JSON holds \\u0000 is refused on the filter', async () => {
    const filter = encodeURIComponent(JSON.stringify([{ field: 'email', operator: 'equals', value: 'a\u0000' }]));
    const res = await request(ctx.api.app).get(`/contacts?filter=${filter}`).set('Authorization', p.auth);
    expectFieldError(res, 422, 'VALIDATION_ERROR', 'filter.0.value');
  });

  test('a path that is not valid percent-encoding is 400', async () => {
    const res = await request(ctx.api.app).get('/contacts/%E0%A4%A').set('Authorization', p.auth);
    expectFieldError(res, 400, 'INVALID_PARAMETERS', 'path');
  });
});

describe('deep nesting is refused at 32 levels, never a stack overflow', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });

  const routes: Array<[string, string, (data: string, p: TestProject) => string]> = [
    [
      'send',
      '/v1/send',
      (data, p) => `{"to":"${recipient()}","from":"a@${p.domain}","subject":"s","body":"b","data":${data}}`,
    ],
    ['track', '/v1/track', (data) => `{"email":"${recipient()}","event":"e","data":${data}}`],
    ['contacts', '/contacts', (data) => `{"email":"${recipient()}","data":${data}}`],
  ];
  test.each(routes)('%s: data nested 10,000 levels → 422 on data', async (_what, path, body) => {
    const res = await storesNothing(p, () => raw(p, 'post', path, body(deepObject(10_000), p)));
    expectFieldError(res, 422, 'VALIDATION_ERROR', /^data(\.a)+$/);
    expect(res.body.error.errors![0].message).toMatch(/nested too deeply/);
  });

  test('a 100,000-deep array as the whole body → 422', async () => {
    const res = await storesNothing(p, () => raw(p, 'post', '/v1/send', '['.repeat(100_000) + ']'.repeat(100_000)));
    expect(res.status).toBe(422);
    expect(res.body.error.errors![0].field).toMatch(/^(\(root\)|0(\.0)*)$/);
  });

  test('data nested 31 levels (32 with the body) is accepted', async () => {
    const res = await raw(p, 'post', '/contacts', `{"email":"${recipient()}","data":{"k":${deepObject(30)}}}`);
    expect(res.status).toBe(201);
  });
});

describe('Content-Encoding', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });
  const json = () => JSON.stringify({ email: recipient(), data: { plan: 'pro' } });

  test.each([
    ['gzip', Buffer.from('this is not gzip at all')],
    ['gzip', gzipSync(Buffer.from(json())).subarray(0, 15)], // truncated
    ['deflate', Buffer.from([0x78, 0x9c, 0xff, 0xff, 0x00, 0x01])],
    ['br', Buffer.from('definitely not brotli, nope, not at all')],
  ])('%s that does not decode → 400 naming Content-Encoding', async (encoding, bytes) => {
    const res = await storesNothing(p, () => raw(p, 'post', '/contacts', bytes, { 'Content-Encoding': encoding }));
    expectFieldError(res, 400, 'BAD_REQUEST', 'Content-Encoding');
  });

  test.each(['compress', 'zstd', 'gzip, br', 'x-unknown'])('unknown encoding %s → 415', async (encoding) => {
    const res = await storesNothing(p, () =>
      raw(p, 'post', '/contacts', Buffer.from(json()), { 'Content-Encoding': encoding }),
    );
    expectFieldError(res, 415, 'UNSUPPORTED_MEDIA_TYPE', 'Content-Encoding');
  });

  test.each([
    ['gzip', gzipSync],
    ['deflate', deflateSync],
    ['br', brotliCompressSync],
  ] as const)('a valid %s body is accepted', async (encoding, compress) => {
    const res = await raw(p, 'post', '/contacts', compress(Buffer.from(json())), { 'Content-Encoding': encoding });
    expect(res.status).toBe(201);
  });

  test('a NUL hidden inside a gzip body is still refused on its field', async () => {
    const body = gzipSync(Buffer.from(JSON.stringify({ email: recipient(), data: { plan: '\u0000' } })));
    const res = await storesNothing(p, () => raw(p, 'post', '/contacts', body, { 'Content-Encoding': 'gzip' }));
    expectFieldError(res, 422, 'VALIDATION_ERROR', 'data.plan');
  });
});

describe('segment filter values out of range', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });

  test.each([
    [1e20, 'too_big'],
    [-1e20, 'too_small'],
    [2 ** 53, 'too_big'],
    [1.5, 'invalid_type'],
  ])('event count %s → 422 on the value', async (value, code) => {
    const filter = [{ field: 'event.signup', operator: 'greaterThan', value }];
    for (const [path, body] of [
      ['/segments', { name: 'big', filter }],
      ['/segments/preview', { filter }],
    ] as const) {
      const res = await storesNothing(p, () => raw(p, 'post', path, JSON.stringify(body)));
      expectFieldError(res, 422, 'VALIDATION_ERROR', 'filter.0.value');
      expect(res.body.error.errors![0].code).toBe(code);
    }
    const q = encodeURIComponent(JSON.stringify(filter));
    const listed = await request(ctx.api.app).get(`/contacts?filter=${q}`).set('Authorization', p.auth);
    expectFieldError(listed, 422, 'VALIDATION_ERROR', 'filter.0.value');
  });

  test('the largest exact count still runs', async () => {
    const filter = [{ field: 'event.signup', operator: 'lessThan', value: Number.MAX_SAFE_INTEGER }];
    const res = await raw(p, 'post', '/segments/preview', JSON.stringify({ filter }));
    expect(res.status).toBe(200);
  });

  test.each(['0000-01-01', '0001-01-01T00:00:00+14:00'])(
    'a date before year 1 UTC (%s) → 422, not a Postgres range error',
    async (value) => {
      const filter = [{ field: 'createdAt', operator: 'greaterThan', value }];
      const res = await raw(p, 'post', '/segments/preview', JSON.stringify({ filter }));
      expectFieldError(res, 422, 'VALIDATION_ERROR', 'filter.0.value');
    },
  );

  test('a huge number compared with data is a number comparison, not an error', async () => {
    const filter = [{ field: 'data.score', operator: 'greaterThan', value: 1e300 }];
    const res = await raw(p, 'post', '/segments/preview', JSON.stringify({ filter }));
    expect(res.status).toBe(200);
  });
});

describe('RFC 5321 address lengths', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });
  const local65 = `${'a'.repeat(65)}@inbox.test`;
  const total255 = `${'a'.repeat(60)}@${'b'.repeat(60)}.${'c'.repeat(60)}.${'d'.repeat(60)}.${'e'.repeat(6)}.test`;
  const label64 = `a@${'b'.repeat(64)}.test`;

  test('the fixtures are what they claim', () => {
    expect(total255.length).toBe(255);
  });

  test.each([
    [
      'send to (local part 65)',
      '/v1/send',
      (p: TestProject) => ({ to: local65, from: `a@${p.domain}`, subject: 's', body: 'b' }),
      'to',
    ],
    [
      'send to (255 in total)',
      '/v1/send',
      (p: TestProject) => ({ to: [{ email: total255 }], from: `a@${p.domain}`, subject: 's', body: 'b' }),
      'to.0.email',
    ],
    [
      'send to (label 64)',
      '/v1/send',
      (p: TestProject) => ({ to: label64, from: `a@${p.domain}`, subject: 's', body: 'b' }),
      'to',
    ],
    ['contacts', '/contacts', () => ({ email: local65 }), 'email'],
    ['track', '/v1/track', () => ({ email: total255, event: 'e' }), 'email'],
    ['suppressions', '/suppressions', () => ({ emails: [recipient(), local65] }), 'emails.1'],
  ])('%s → 422', async (_what, path, body, field) => {
    const res = await storesNothing(p, () => raw(p, 'post', path, JSON.stringify(body(p))));
    expectFieldError(res, 422, 'VALIDATION_ERROR', field);
    expect(res.body.error.errors!.find((e) => e.field === field)!.message).toMatch(/at most \d+ characters/);
  });

  test('a 64-character local part is accepted', async () => {
    const res = await raw(p, 'post', '/contacts', JSON.stringify({ email: `${'a'.repeat(64)}@inbox.test` }));
    expect(res.status).toBe(201);
  });

  test('verification reports a too-long address as a result, not an error', async () => {
    const res = await raw(p, 'post', '/v1/verify', JSON.stringify({ email: local65 }));
    expect(res.status).toBe(200);
    expect(res.body.data.valid).toBe(false);
  });
});

describe('numeric query parameters take plain decimal integers only', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });

  test.each(['1e2', '0x10', '%205', '5%20', '5.0', '+5', '0b11', 'Infinity', ''])(
    'limit=%s → 400 naming limit',
    async (limit) => {
      for (const path of ['/contacts', '/templates', '/events', '/segments']) {
        const res = await request(ctx.api.app).get(`${path}?limit=${limit}`).set('Authorization', p.auth);
        expectFieldError(res, 400, 'INVALID_PARAMETERS', 'limit');
      }
    },
  );

  test('templates page=1e0 → 400 naming page', async () => {
    const res = await request(ctx.api.app).get('/templates?page=1e0').set('Authorization', p.auth);
    expectFieldError(res, 400, 'INVALID_PARAMETERS', 'page');
  });

  test('plain integers still work', async () => {
    const res = await request(ctx.api.app).get('/contacts?limit=5').set('Authorization', p.auth);
    expect(res.status).toBe(200);
    const page = await request(ctx.api.app).get('/templates?page=2&limit=007').set('Authorization', p.auth);
    expect(page.status).toBe(200);
  });
});

describe("custom headers: the platform's and SES's are refused in any letter case, naming the header", () => {
  let p: TestProject;
  let marketingTemplate: string;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
    const t = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', p.auth)
      .send({ name: 'm', subject: 's', body: 'b', type: 'MARKETING', from: `a@${p.domain}` });
    marketingTemplate = t.body.data.id as string;
  });
  const send = (p: TestProject, headers: Record<string, string>, extra: object = {}) =>
    raw(
      p,
      'post',
      '/v1/send',
      JSON.stringify({ to: recipient(), from: `a@${p.domain}`, subject: 's', body: 'b', headers, ...extra }),
    );

  test.each([
    'X-SES-CONFIGURATION-SET',
    'X-SES-MESSAGE-TAGS',
    'X-SES-Source-Arn',
    'x-ses-from-arn',
    'X-Ses-Return-Path-Arn',
    'X-SES-Anything-New',
    'fRoM',
    'TO',
    'cc',
    'BCC',
    'reply-to',
    'SUBJECT',
    'date',
    'message-id',
    'Mime-Version',
    'content-type',
    'Content-Language',
    'return-path',
    'SENDER',
    'Dkim-Signature',
    'received',
    'feedback-id',
  ])('%s → 422 naming it', async (name) => {
    const res = await storesNothing(p, () => send(p, { [name]: 'x' }));
    expectFieldError(res, 422, 'VALIDATION_ERROR', `headers.${name}`);
  });

  test('a name given twice in two letter cases → 422', async () => {
    const res = await storesNothing(p, () =>
      send(p, { 'List-Unsubscribe': '<https://a.test/u>', 'list-unsubscribe': '<https://b.test/u>' }),
    );
    expectFieldError(res, 422, 'VALIDATION_ERROR', 'headers.list-unsubscribe');
  });

  test("a caller's List-Unsubscribe on marketing mail → 422 saying why", async () => {
    for (const name of ['list-UNSUBSCRIBE', 'List-Unsubscribe-Post']) {
      const res = await storesNothing(p, () =>
        send(p, { [name]: '<https://a.test/u>' }, { template: marketingTemplate, subject: undefined, body: undefined }),
      );
      expectFieldError(res, 422, 'VALIDATION_ERROR', `headers.${name}`);
      expect(res.body.error.errors!.find((e) => e.field === `headers.${name}`)!.message).toMatch(/marketing mail/);
    }
  });

  test("transactional mail takes the caller's pair; a List-Unsubscribe-Post alone is refused", async () => {
    const ok = await send(p, {
      'list-unsubscribe': '<https://a.test/u>',
      'LIST-UNSUBSCRIBE-POST': 'List-Unsubscribe=One-Click',
      Precedence: 'list',
    });
    expect(ok.status).toBe(202);
    const alone = await storesNothing(p, () => send(p, { 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' }));
    expectFieldError(alone, 422, 'VALIDATION_ERROR', 'headers.List-Unsubscribe-Post');
  });
});

describe('bodies nested too deep for the renderers are refused where they are taken, naming the field', () => {
  let p: TestProject;
  let templateId: string;
  let campaignId: string;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
    const t = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', p.auth)
      .send({ name: 't', subject: 's', body: '<p>b</p>' });
    templateId = t.body.data.id as string;
    const c = await request(ctx.api.app)
      .post('/campaigns')
      .set('Authorization', p.auth)
      .send({ name: 'c', subject: 's', body: '<p>b</p>', from: `n@${p.domain}`, audienceType: 'ALL' });
    campaignId = c.body.data.id as string;
  });
  const divs = '<div>'.repeat(5000) + 'x' + '</div>'.repeat(5000);
  const blockquotes = '<blockquote>'.repeat(5000) + 'x';
  const quotes = '>'.repeat(5000) + ' x';
  const cases: Array<[string, 'post' | 'patch', (p: TestProject) => string, (body: string, p: TestProject) => object]> =
    [
      [
        'send (Markdown)',
        'post',
        () => '/v1/send',
        (body, p) => ({ to: recipient(), from: `a@${p.domain}`, subject: 's', body, type: 'markdown' }),
      ],
      ['template create', 'post', () => '/templates', (body) => ({ name: 'deep', subject: 's', body })],
      ['template update', 'patch', () => `/templates/${templateId}`, (body) => ({ body })],
      [
        'campaign create',
        'post',
        () => '/campaigns',
        (body, p) => ({ name: 'deep', subject: 's', body, from: `n@${p.domain}`, audienceType: 'ALL' }),
      ],
      ['campaign update', 'patch', () => `/campaigns/${campaignId}`, (body) => ({ body })],
      ['render preview', 'post', () => '/templates/render', (body) => ({ subject: 's', body, format: 'markdown' })],
    ];
  test.each(cases)(
    '%s: 5,000 nested <div>s, <blockquote>s (and > markers in Markdown) → 422 on body',
    async (what, method, path, body) => {
      const bodies =
        what === 'send (Markdown)' || what === 'render preview' ? [divs, blockquotes, quotes] : [divs, blockquotes];
      for (const b of bodies) {
        const res = await storesNothing(p, () => raw(p, method, path(p), JSON.stringify(body(b, p))));
        expectFieldError(res, 422, 'VALIDATION_ERROR', 'body');
        expect(res.body.error.errors!.find((e) => e.field === 'body')!.message).toMatch(/deeper than 200 levels/);
      }
    },
  );

  test('a send of a stored template that nests too deep (stored before the limit) → 422 on template', async () => {
    const id = (
      await request(ctx.api.app)
        .post('/templates')
        .set('Authorization', p.auth)
        .send({ name: 'old', subject: 's', body: 'x' })
    ).body.data.id as string;
    await ctx.api.database.pool.query('update templates set body = $1 where id = $2', [divs, id]);
    const res = await storesNothing(p, () =>
      raw(p, 'post', '/v1/send', JSON.stringify({ to: recipient(), from: `a@${p.domain}`, template: id })),
    );
    expectFieldError(res, 422, 'VALIDATION_ERROR', 'template');
    const preview = await request(ctx.api.app).post(`/templates/${id}/render`).set('Authorization', p.auth).send({});
    expectFieldError(preview, 422, 'VALIDATION_ERROR', 'body');
  });
});

describe('template text that used to backtrack answers at once', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });
  // `{{a ?? ` then spaces held the event loop 4.7 s (3,000 spaces) and 37 s (6,000 spaces).
  const stall = (n: number) => `{{a ?? ${' '.repeat(n)}`;
  const cases: Array<[string, string, (p: TestProject) => object]> = [
    ['send subject', '/v1/send', (p) => ({ to: recipient(), from: `a@${p.domain}`, subject: stall(990), body: 'b' })],
    ['send body', '/v1/send', (p) => ({ to: recipient(), from: `a@${p.domain}`, subject: 's', body: stall(200_000) })],
    ['template body', '/templates', () => ({ name: 't', subject: 's', body: stall(60_000) })],
    ['render body', '/templates/render', () => ({ subject: stall(990), body: stall(60_000) })],
  ];
  test.each(cases)('%s: 422 (the fallback is never closed) within a second or two', async (_what, path, body) => {
    const started = Date.now();
    const res = await storesNothing(p, () => raw(p, 'post', path, JSON.stringify(body(p))));
    expect(Date.now() - started).toBeLessThan(3_000);
    expect({ status: res.status, code: res.body.error?.code }).toEqual({ status: 422, code: 'VALIDATION_ERROR' });
  });

  test('a subject over 998 characters (RFC 5322 line length) → 422 naming it', async () => {
    const res = await storesNothing(p, () =>
      raw(p, 'post', '/templates', JSON.stringify({ name: 't', subject: 's'.repeat(999), body: 'b' })),
    );
    expectFieldError(res, 422, 'VALIDATION_ERROR', 'subject');
  });
});

describe('template data stays text in previews (Markdown and HTML)', () => {
  let p: TestProject;
  beforeAll(async () => {
    p = await createTestProject(ctx.api.database);
  });
  const vectors: Array<[string, string]> = [
    ['link', '[Verify your account](https://attacker.test/phish)'],
    ['javascript: link', '[Verify](javascript:alert(1))'],
    ['image', '![](https://tracker.test/pixel.gif)'],
    ['autolink', '<https://attacker.test/a> https://attacker.test/b www.attacker.test'],
    ['raw HTML', '<a href="https://attacker.test/raw">x</a><img src="https://tracker.test/p.gif">'],
  ];
  test.each(vectors)('%s in data → shown as written; a javascript: URL variable → #', async (_what, value) => {
    const stored = await request(ctx.api.app)
      .post('/templates')
      .set('Authorization', p.auth)
      .send({ name: 't', subject: 's', body: '<p>Hi {{name}}</p><a href="{{url}}">go</a>' });
    const data = { name: value, url: 'javascript:alert(1)' };
    const answers = [
      await request(ctx.api.app)
        .post('/templates/render')
        .set('Authorization', p.auth)
        .send({ subject: 'Hi {{name}}', body: 'Hi {{name}}\n\n[go]({{url}})', format: 'markdown', data }),
      await request(ctx.api.app)
        .post(`/templates/${stored.body.data.id}/render`)
        .set('Authorization', p.auth)
        .send({ data }),
    ];
    for (const res of answers) {
      expect(res.status).toBe(200);
      const html = res.body.data.html as string;
      expect(html).not.toMatch(/<img\s|href="(https?:\/\/(www\.)?attacker|javascript:)/i);
      expect(html).toContain('<a href="#">go</a>');
      expect((res.body.data.text as string).replace(/\s+/g, ' ')).toContain(value.replace(/\s+/g, ' '));
    }
  });
});
