/**
 * Sending domains over the API with the local identity provider and a DNS server of the test's own: add (records
 * to publish, pending), sending from it refused until verified, verification when the records appear, subdomains
 * covered, one project per domain, the verified filter, delete refused while a campaign is scheduled from it,
 * bad input, keys; Plunk v2's `GET /domains/{id}/verify` and `dkimTokens`; sending from an internationalised domain.
 */
import { randomBytes } from 'node:crypto';
import request from 'supertest';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import { useSesAnswers } from '../support/ses-answers';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  recipient,
  startTestApi,
  testConfig,
  type TestApi,
  type TestProject,
} from '../support/harness';

let dns: TestDnsServer;
let api: TestApi;
let p: TestProject;

beforeAll(async () => {
  dns = await startDnsServer();
  api = await startTestApi(
    testConfig({ DNS_SERVERS: dns.server, DNS_TIMEOUT_MS: '300', DNS_TRIES: '1', DOMAIN_IDENTITY_PROVIDER: 'local' }),
  );
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await api.close();
  await dns.close();
});

type Rec = {
  purpose: string;
  type: string;
  name: string;
  value: string;
  priority?: number;
  required: boolean;
  status: string;
};

/** Publishes records in the test DNS server, as a customer would at their DNS host. */
function publish(records: Rec[]) {
  for (const r of records) {
    const entry = dns.zone.get(r.name) ?? {};
    if (r.type === 'CNAME') entry.CNAME = r.value;
    if (r.type === 'MX') entry.MX = [{ exchange: r.value, priority: r.priority ?? 10 }];
    if (r.type === 'TXT') entry.TXT = [...(entry.TXT ?? []), r.value];
    dns.zone.set(r.name, entry);
  }
}

const sendFrom = (project: TestProject, from: string) =>
  client(api.app, project).post('/v1/send', { to: recipient('d'), from, subject: 'Hi', body: '<p>Hi</p>' });

test('add → records to publish, pending; sending refused; records published → verified; sending works, subdomains too', async () => {
  const domain = `brand-${randomBytes(4).toString('hex')}.test`;
  const added = await client(api.app, p).post('/domains', { domain: ` ${domain.toUpperCase()}. ` });
  expect(added.status).toBe(201);
  const d = added.body.data;
  expect(d).toMatchObject({
    domain,
    status: 'pending',
    verified: false,
    mailFromDomain: `mail.${domain}`,
    verifiedAt: null,
  });
  const records = d.records as Rec[];
  expect(records.filter((r) => r.purpose === 'dkim')).toHaveLength(3);
  for (const r of records.filter((x) => x.purpose === 'dkim')) {
    expect(r).toMatchObject({ type: 'CNAME', required: true, status: 'pending' });
    const token = r.name.split('.')[0];
    expect(token).toMatch(/^[a-z2-7]{32}$/);
    expect(r).toMatchObject({ name: `${token}._domainkey.${domain}`, value: `${token}.dkim.amazonses.com` });
  }
  expect(records.find((r) => r.purpose === 'mail-from-mx')).toMatchObject({
    type: 'MX',
    name: `mail.${domain}`,
    value: 'feedback-smtp.us-east-1.amazonses.com',
    priority: 10,
  });
  expect(records.find((r) => r.purpose === 'mail-from-spf')).toMatchObject({
    type: 'TXT',
    name: `mail.${domain}`,
    value: 'v=spf1 include:amazonses.com ~all',
  });
  expect(records.find((r) => r.purpose === 'dmarc')).toMatchObject({
    type: 'TXT',
    name: `_dmarc.${domain}`,
    required: false,
  });

  const refused = await sendFrom(p, `hi@${domain}`);
  expect(refused.status).toBe(422);
  expect(refused.body.error.errors[0].field).toBe('from');

  const early = await client(api.app, p).post(`/domains/${d.id}/verify`, {});
  expect(early.body.data).toMatchObject({ status: 'pending', verified: false });
  expect(early.body.data.checkedAt).toBeTruthy();

  publish(records.filter((r) => r.purpose !== 'dmarc'));
  const checked = await client(api.app, p).post(`/domains/${d.id}/verify`, {});
  expect(checked.body.data).toMatchObject({ status: 'verified', verified: true });
  expect(checked.body.data.verifiedAt).toBeTruthy();
  expect(
    Object.fromEntries((checked.body.data.records as Rec[]).map((r) => [`${r.purpose}:${r.name}`, r.status])),
  ).toEqual(
    Object.fromEntries(records.map((r) => [`${r.purpose}:${r.name}`, r.purpose === 'dmarc' ? 'pending' : 'found'])),
  );
  expect((await sendFrom(p, `hi@${domain}`)).status).toBe(202);
  expect((await sendFrom(p, `news@letters.${domain}`)).status).toBe(202);

  const list = await client(api.app, p).get('/domains?verified=true&limit=100');
  expect(list.body.data.items.map((x: { domain: string }) => x.domain)).toContain(domain);
  expect(
    (await client(api.app, p).get('/domains?verified=false&limit=100')).body.data.items.map(
      (x: { domain: string }) => x.domain,
    ),
  ).not.toContain(domain);
  expect((await client(api.app, p).get(`/domains/${d.id}`)).body.data.status).toBe('verified');
});

test('one project per domain: another project gets 409 on add, 404 on read, 422 when sending from it', async () => {
  const domain = `owned-${randomBytes(4).toString('hex')}.test`;
  const added = await client(api.app, p).post('/domains', { domain });
  publish(added.body.data.records);
  await client(api.app, p).post(`/domains/${added.body.data.id}/verify`, {});
  const other = await createTestProject(api.database);
  const again = await client(api.app, other).post('/domains', { domain });
  expect(again.status).toBe(409);
  expect((await client(api.app, p).post('/domains', { domain })).status).toBe(409);
  expect((await client(api.app, other).get(`/domains/${added.body.data.id}`)).status).toBe(404);
  expect((await client(api.app, other).del(`/domains/${added.body.data.id}`)).status).toBe(404);
  expect((await sendFrom(other, `x@${domain}`)).status).toBe(422);
  // An operator's domain (admin API, written any way) is the same row POST /domains sees.
  const opDomain = `op-${randomBytes(4).toString('hex')}.test`;
  const byOperator = await request(api.app)
    .post(`/admin/projects/${other.id}/domains`)
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .send({ domain: `${opDomain.toUpperCase()}.` });
  expect(byOperator.body.data.domain).toBe(opDomain);
  expect((await client(api.app, p).post('/domains', { domain: opDomain })).status).toBe(409);
});

test('delete: refused while a campaign is scheduled from the domain; then removed, and sending from it is refused again', async () => {
  const domain = `camp-${randomBytes(4).toString('hex')}.test`;
  const added = await client(api.app, p).post('/domains', { domain });
  publish(added.body.data.records);
  await client(api.app, p).post(`/domains/${added.body.data.id}/verify`, {});
  const campaign = await client(api.app, p).post('/campaigns', {
    name: 'c',
    subject: 's',
    body: '<p>b</p>',
    from: `news@${domain}`,
    audienceType: 'ALL',
  });
  expect(campaign.status).toBe(201);
  const scheduled = await client(api.app, p).post(`/campaigns/${campaign.body.data.id}/send`, {
    scheduledAt: new Date(Date.now() + 86_400_000).toISOString(),
  });
  expect(scheduled.body.data.status).toBe('SCHEDULED');
  const busy = await client(api.app, p).del(`/domains/${added.body.data.id}`);
  expect(busy.status).toBe(409);
  expect(busy.body.error.message).toContain(campaign.body.data.id);
  await client(api.app, p).post(`/campaigns/${campaign.body.data.id}/cancel`, {});
  const del = await client(api.app, p).del(`/domains/${added.body.data.id}`);
  expect(del.body.data).toEqual({ id: added.body.data.id, deleted: true });
  expect((await client(api.app, p).get(`/domains/${added.body.data.id}`)).status).toBe(404);
  expect((await sendFrom(p, `hi@${domain}`)).status).toBe(422);
});

test('internationalized names are stored in ASCII (punycode); a from address written in Unicode sends from it once verified', async () => {
  const tag = randomBytes(3).toString('hex');
  const res = await client(api.app, p).post('/domains', { domain: `bücher-${tag}.test` });
  expect(res.status).toBe(201);
  expect(res.body.data.domain).toMatch(/^xn--bcher-.*\.test$/);
  expect((await sendFrom(p, `Bücher <post@bücher-${tag}.test>`)).status).toBe(422);
  publish(res.body.data.records);
  expect((await client(api.app, p).get(`/domains/${res.body.data.id}/verify`)).body.data.verified).toBe(true);
  const sent = await sendFrom(p, `Bücher <post@BÜCHER-${tag}.test>`);
  expect(sent.status).toBe(202);
  const email = await client(api.app, p).get(`/emails/${sent.body.data.emails[0].email}`);
  expect(email.body.data.from).toEqual({ email: `post@${res.body.data.domain}`, name: 'Bücher' });
});

test("Plunk v2: GET /domains/{id}/verify checks like POST and answers dkimTokens (and Plunk's tokens); 404 for another project", async () => {
  const domain = `plunk-${randomBytes(4).toString('hex')}.test`;
  const added = await client(api.app, p).post('/domains', { domain });
  const d = added.body.data;
  expect(d.projectId).toBe(p.id);
  expect(d.dkimTokens).toHaveLength(3);
  expect(d.dkimTokens).toEqual(
    (d.records as Rec[]).filter((r) => r.purpose === 'dkim').map((r) => r.name.split('.')[0]),
  );
  expect((await client(api.app, p).get(`/domains/${d.id}`)).body.data.dkimTokens).toEqual(d.dkimTokens);
  const early = await client(api.app, p).get(`/domains/${d.id}/verify`);
  expect(early.status).toBe(200);
  expect(early.body.data).toMatchObject({
    id: d.id,
    domain,
    status: 'pending',
    verified: false,
    dkimTokens: d.dkimTokens,
    tokens: d.dkimTokens,
  });
  expect(early.body.data.checkedAt).toBeTruthy();
  publish(d.records);
  const checked = await client(api.app, p).get(`/domains/${d.id}/verify`);
  expect(checked.body.data).toMatchObject({ status: 'verified', verified: true, tokens: d.dkimTokens });
  expect((await client(api.app, p).post(`/domains/${d.id}/verify`, {})).body.data.tokens).toEqual(d.dkimTokens);
  const other = await createTestProject(api.database);
  expect((await client(api.app, other).get(`/domains/${d.id}/verify`)).status).toBe(404);
  expect((await client(api.app, p).get('/domains/nope/verify')).status).toBe(400);
  expect(
    (await request(api.app).get(`/domains/${d.id}/verify`).set('Authorization', `Bearer ${p.publicKey}`)).status,
  ).toBe(403);
});

test('errors: bad domain names (422 on domain), bad id (400), public key (403)', async () => {
  for (const domain of ['not a domain', 'localhost', 'a..b.test', '-x.test', 'x'.repeat(64) + '.test']) {
    const res = await client(api.app, p).post('/domains', { domain });
    expect({ domain, status: res.status }).toEqual({ domain, status: 422 });
    expect(res.body.error.errors[0].field).toBe('domain');
  }
  expect((await client(api.app, p).post('/domains', {})).status).toBe(422);
  expect((await client(api.app, p).get('/domains/nope')).status).toBe(400);
  expect((await request(api.app).get('/domains').set('Authorization', `Bearer ${p.publicKey}`)).status).toBe(403);
});

describe('with SES as the identity provider', () => {
  let sesApi: TestApi;
  let q: TestProject;
  afterAll(() => sesApi?.close()); // before the SES server closes (afterAll hooks run in the order declared)
  const ses = useSesAnswers();
  beforeAll(async () => {
    sesApi = await startTestApi(testConfig({ DOMAIN_IDENTITY_PROVIDER: 'ses', SES_ENDPOINT: ses.endpoint }));
    q = await createTestProject(sesApi.database);
  });

  test('a domain SES rejects is 422 on domain; SES not answering is 503; nothing is stored either way', async () => {
    const domain = `ses-${randomBytes(4).toString('hex')}.test`;
    ses.next.push({ status: 400, error: 'BadRequestException', body: { message: 'Domain is not allowed.' } });
    const rejected = await client(sesApi.app, q).post('/domains', { domain });
    expect(rejected.status).toBe(422);
    expect(rejected.body.error.errors[0]).toMatchObject({
      field: 'domain',
      message: expect.stringContaining('Domain is not allowed.'),
    });
    ses.next.push(
      ...Array.from({ length: 3 }, () => ({ status: 500, error: 'InternalFailure', body: { message: 'internal' } })),
    );
    const down = await client(sesApi.app, q).post('/domains', { domain });
    expect(down.status).toBe(503);
    expect(down.body.error.code).toBe('SERVICE_UNAVAILABLE');
    const listed = (await client(sesApi.app, q).get('/domains')).body.data.items.map(
      (d: { domain: string }) => d.domain,
    );
    expect(listed).toEqual([q.domain]);
  });
});
