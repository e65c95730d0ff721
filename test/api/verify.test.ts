/**
 * POST /v1/verify and /v1/verify/batch against a DNS server of the test's own on loopback: a table of addresses
 * with their expected flags (syntax edge cases, IDN, disposable subdomains, plus, role, alias, typos, null MX,
 * implicit MX, NXDOMAIN, DNS timeout), batch lookups shared per domain, the Redis cache, errors and keys.
 */
import request from 'supertest';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import {
  client,
  createTestProject,
  startTestApi,
  testConfig,
  type TestApi,
  type TestProject,
} from '../support/harness';

let dns: TestDnsServer;
let api: TestApi;
let p: TestProject;

const mail = (host: string) => ({ MX: [{ exchange: `mx.${host}`, priority: 10 }] });
const site = { A: ['192.0.2.10'] };

beforeAll(async () => {
  dns = await startDnsServer({
    'acme.test': { ...mail('acme.test'), ...site },
    'nosite.test': mail('nosite.test'),
    'implicit.test': site,
    'nomail.test': { TXT: ['v=spf1 -all'] },
    'nullmx.test': { MX: [{ exchange: '.', priority: 0 }], ...site },
    'slow.test': { hang: true },
    'xn--mnchen-3ya.test': { ...mail('muenchen.test'), ...site },
    'xn--fsqu00a.xn--4rr70v': mail('idn.test'),
    'gmail.com': { ...mail('gmail.com'), ...site },
    'yahoo.co.uk': mail('yahoo.co.uk'),
    'mailinator.com': { ...mail('mailinator.com'), ...site },
    'sub.mailinator.com': mail('mailinator.com'),
    'privaterelay.appleid.com': mail('icloud.com'),
    'mozmail.com': mail('mozmail.com'),
    'duck.com': { ...mail('duck.com'), ...site },
    'batch-a.test': mail('batch-a.test'),
    'batch-b.test': mail('batch-b.test'),
    'cached.test': mail('cached.test'),
  });
  api = await startTestApi(testConfig({ DNS_SERVERS: dns.server, DNS_TIMEOUT_MS: '300', DNS_TRIES: '1' }));
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await api.close();
  await dns.close();
});

type Flags = Partial<{
  valid: boolean;
  isDisposable: boolean;
  isAlias: boolean;
  isTypo: boolean;
  isPlusAddressed: boolean;
  isPersonalEmail: boolean;
  isRoleAccount: boolean;
  domainExists: boolean;
  hasWebsite: boolean;
  hasMxRecords: boolean;
  suggestion: string | null;
}>;

const long = (n: number) => 'a'.repeat(n);

/** [address, expected flags, a word every result's reasons must contain (or none)] */
const TABLE: [string, Flags, RegExp | null][] = [
  [
    'plain@acme.test',
    {
      valid: true,
      isDisposable: false,
      isAlias: false,
      isTypo: false,
      isRoleAccount: false,
      isPersonalEmail: false,
      domainExists: true,
      hasWebsite: true,
      hasMxRecords: true,
      suggestion: null,
    },
    null,
  ],
  ['"john doe"@acme.test', { valid: true }, null],
  ['"a@b"@acme.test', { valid: true }, null],
  ['first.last@acme.test', { valid: true, isPlusAddressed: false }, null],
  ['user.name+news@acme.test', { valid: true, isPlusAddressed: true }, /subaddress/],
  ['  padded@acme.test ', { valid: true }, null],
  ['a..b@acme.test', { valid: false, domainExists: false }, /syntax/],
  ['.lead@acme.test', { valid: false }, /syntax/],
  ['trail.@acme.test', { valid: false }, /syntax/],
  ['no-at-sign.acme.test', { valid: false }, /syntax/],
  ['a@b@acme.test', { valid: false }, /syntax/],
  ['nodomain@', { valid: false }, /syntax/],
  ['@acme.test', { valid: false }, /syntax/],
  ['two words@acme.test', { valid: false }, /syntax/],
  ['Jane <jane@acme.test>', { valid: false }, /syntax/],
  ['a@acme', { valid: false }, /not a valid domain/],
  ['a@-acme.test', { valid: false }, /not a valid domain/],
  ['a@acme-.test', { valid: false }, /not a valid domain/],
  ['a@[192.0.2.1]', { valid: false }, /literal/],
  [`${long(65)}@acme.test`, { valid: false }, /64 octets/],
  [`${long(64)}@${long(63)}.${long(63)}.${long(63)}.test`, { valid: false }, /254 octets/],
  ['user@münchen.test', { valid: true, hasMxRecords: true }, null],
  ['用户@例子.广告', { valid: true, hasMxRecords: true }, null],
  ['x@mailinator.com', { valid: true, isDisposable: true, isPersonalEmail: false }, /disposable/],
  ['x@sub.mailinator.com', { valid: true, isDisposable: true }, /mailinator\.com is a disposable/],
  ['X@MAILINATOR.COM', { valid: true, isDisposable: true }, /disposable/],
  ['x@gmail.com', { valid: true, isPersonalEmail: true, isDisposable: false, isTypo: false }, null],
  ['x@yahoo.co.uk', { valid: true, isPersonalEmail: true }, null],
  ['x@privaterelay.appleid.com', { valid: true, isAlias: true }, /relay/],
  ['x@mozmail.com', { valid: true, isAlias: true }, /relay/],
  ['x@duck.com', { valid: true, isAlias: true }, /relay/],
  ['admin@acme.test', { valid: true, isRoleAccount: true }, /role account/],
  ['info@acme.test', { valid: true, isRoleAccount: true }, /role account/],
  ['noreply@acme.test', { valid: true, isRoleAccount: true }, /role account/],
  ['postmaster@acme.test', { valid: true, isRoleAccount: true }, /role account/],
  ['support+billing@acme.test', { valid: true, isRoleAccount: true, isPlusAddressed: true }, /role account/],
  [
    'jane@gmial.com',
    { valid: false, isTypo: true, suggestion: 'jane@gmail.com', domainExists: false },
    /typo of gmail\.com/,
  ],
  ['jane@hotmial.com', { valid: false, isTypo: true, suggestion: 'jane@hotmail.com' }, /typo of hotmail\.com/],
  ['jane@gmail.con', { valid: false, isTypo: true, suggestion: 'jane@gmail.com' }, /typo/],
  ['jane@yaho.com', { isTypo: true, suggestion: 'jane@yahoo.com' }, /typo/],
  ['x@nullmx.test', { valid: false, domainExists: true, hasMxRecords: false, hasWebsite: true }, /null MX/],
  ['x@implicit.test', { valid: true, hasMxRecords: false, domainExists: true }, /implicit MX/],
  ['x@nomail.test', { valid: false, domainExists: true, hasMxRecords: false }, /cannot receive mail/],
  ['x@nowhere.test', { valid: false, domainExists: false }, /does not exist/],
  ['x@nosite.test', { valid: true, hasWebsite: false, hasMxRecords: true }, /no website/],
  ['x@slow.test', { valid: true, domainExists: false, hasMxRecords: false }, /did not answer in time/],
];

test(`a table of ${TABLE.length} addresses gets the expected flags and reasons`, async () => {
  expect(TABLE.length).toBeGreaterThanOrEqual(40);
  const failures: string[] = [];
  for (const [email, flags, reason] of TABLE) {
    const res = await client(api.app, p).post('/v1/verify', { email });
    if (res.status !== 200) {
      failures.push(`${email}: HTTP ${res.status}`);
      continue;
    }
    const got = res.body.data;
    for (const [k, v] of Object.entries(flags))
      if (got[k] !== v)
        failures.push(
          `${email}: ${k} is ${JSON.stringify(got[k])}, expected ${JSON.stringify(v)} (${got.reasons.join('; ')})`,
        );
    if (reason && !got.reasons.some((r: string) => reason.test(r)))
      failures.push(`${email}: no reason matching ${reason} in ${JSON.stringify(got.reasons)}`);
    // Every false or risky flag is explained.
    if (!got.valid && got.reasons.length === 0) failures.push(`${email}: invalid without a reason`);
  }
  expect(failures).toEqual([]);
});

test('batch: results in order, one DNS lookup per domain', async () => {
  const emails = Array.from({ length: 100 }, (_, i) => `u${i}@batch-${i % 2 ? 'a' : 'b'}.test`);
  const before = dns.queries.length;
  const res = await client(api.app, p).post('/v1/verify/batch', { emails });
  expect(res.status).toBe(200);
  expect(res.body.data.results.map((r: { email: string }) => r.email)).toEqual(emails);
  expect(res.body.data.results.every((r: { valid: boolean }) => r.valid)).toBe(true);
  const mxQueries = dns.queries.slice(before).filter((q) => q.endsWith(' MX'));
  expect(mxQueries.sort()).toEqual(['batch-a.test MX', 'batch-b.test MX']);
});

test('DNS answers are cached in Redis: a second check of the domain asks DNS nothing', async () => {
  await client(api.app, p).post('/v1/verify', { email: 'one@cached.test' });
  const before = dns.queries.length;
  const again = await client(api.app, p).post('/v1/verify', { email: 'two@cached.test' });
  expect(again.body.data).toMatchObject({ valid: true, hasMxRecords: true });
  expect(dns.queries.slice(before)).toEqual([]);
});

test('errors: missing or non-string email, batch of more than 100, unknown fields (422); public key (403); no key (401)', async () => {
  const c = client(api.app, p);
  expect((await c.post('/v1/verify', {})).body.error.errors[0]).toMatchObject({ field: 'email' });
  expect((await c.post('/v1/verify', { email: 42 })).status).toBe(422);
  expect((await c.post('/v1/verify', { email: 'a@acme.test', extra: 1 })).body.error.errors[0]).toMatchObject({
    field: 'extra',
    code: 'unrecognized_keys',
  });
  const tooMany = await c.post('/v1/verify/batch', {
    emails: Array.from({ length: 101 }, (_, i) => `a${i}@acme.test`),
  });
  expect(tooMany.status).toBe(422);
  expect(tooMany.body.error.errors[0].field).toBe('emails');
  const pk = await request(api.app)
    .post('/v1/verify')
    .set('Authorization', `Bearer ${p.publicKey}`)
    .send({ email: 'a@acme.test' });
  expect(pk.status).toBe(403);
  expect((await request(api.app).post('/v1/verify').send({ email: 'a@acme.test' })).status).toBe(401);
});
