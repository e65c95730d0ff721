/**
 * A sending domain end to end, on a database of its own: added through the API, its records published in the test's
 * DNS server, verified by the worker's refresher (no manual check), then mail from it reaches SES.
 */
import { randomBytes } from 'node:crypto';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import { client, createTestProject, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

let dns: TestDnsServer;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    dns = await startDnsServer();
    e2e.onTeardown(() => dns.close());
    return {
      DNS_SERVERS: dns.server,
      DNS_TIMEOUT_MS: '300',
      DNS_TRIES: '1',
      DOMAIN_IDENTITY_PROVIDER: 'local',
      DOMAIN_REFRESH_MS: '200',
    };
  },
});

test('pending → verified by the worker once the records appear in DNS; then mail from the domain is delivered', async () => {
  const p = await createTestProject(e2e.api.database);
  const domain = `shop-${randomBytes(4).toString('hex')}.test`;
  const added = await client(e2e.api.app, p).post('/domains', { domain });
  expect(added.status).toBe(201);
  // The refresher checks it (records not published yet) and leaves it pending: wait on that state, not a sleep.
  const checked = await waitFor(
    async () => {
      const d = (await client(e2e.api.app, p).get(`/domains/${added.body.data.id}`)).body.data;
      return d.checkedAt ? d : undefined;
    },
    20_000,
    'the first refresh of the domain',
  );
  expect(checked).toMatchObject({ status: 'pending', checkedAt: expect.any(String) });
  for (const r of added.body.data.records as { type: string; name: string; value: string; priority?: number }[]) {
    if (r.type === 'CNAME') dns.zone.set(r.name, { CNAME: r.value });
    if (r.type === 'MX')
      dns.zone.set(r.name, { ...dns.zone.get(r.name), MX: [{ exchange: r.value, priority: r.priority ?? 10 }] });
    if (r.type === 'TXT') dns.zone.set(r.name, { ...dns.zone.get(r.name), TXT: [r.value] });
  }
  const verified = await waitFor(
    async () => {
      const d = (await client(e2e.api.app, p).get(`/domains/${added.body.data.id}`)).body.data;
      return d.status === 'verified' && d;
    },
    10_000,
    'domain verified by the refresher',
  );
  expect(verified.verifiedAt).toBeTruthy();
  const to = recipient('dom');
  const sent = await client(e2e.api.app, p).post('/v1/send', {
    to,
    from: `orders@${domain}`,
    subject: 'Your order',
    body: '<p>Thanks</p>',
  });
  expect(sent.status).toBe(202);
  const at = await waitFor(async () => {
    const s = await sesSendsTo([to]);
    return s.length > 0 && s;
  });
  expect(at).toHaveLength(1);
});
