/**
 * Open/click tracking and mail streams end to end, on a database of its own: the SES `SendEmail` request of each
 * email (recorded by the proxy in front of the emulator) names the configuration set of its stream and tracking,
 * decided at acceptance from the send's, template's or campaign's `tracking`, else the project's `trackingMode`;
 * a sending domain's custom tracking domain, once its CNAME is in the test's DNS and the worker found it, switches
 * tracked mail to the set made for it.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { trackingConfigurationSetName } from '@mailroom/mail/tracking';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  recipient,
  sesSendsTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

const SETS = {
  SES_CONFIGURATION_SET: 'tx-tracked',
  SES_CONFIGURATION_SET_NO_TRACKING: 'tx-plain',
  SES_CONFIGURATION_SET_MARKETING: 'mk-tracked',
  SES_CONFIGURATION_SET_MARKETING_NO_TRACKING: 'mk-plain',
};

let dns: TestDnsServer;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    dns = await startDnsServer();
    e2e.onTeardown(() => dns.close());
    return {
      ...SETS,
      DNS_SERVERS: dns.server,
      DNS_TIMEOUT_MS: '300',
      DNS_TRIES: '1',
      DOMAIN_IDENTITY_PROVIDER: 'local',
      DOMAIN_REFRESH_MS: '200',
      SES_MAX_SEND_RATE: '100',
    };
  },
});

const admin = (path: string, body: object) =>
  request(e2e.api.app).put(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body);

/** The configuration set SES was asked to use for the one email to `to`. */
async function setOf(to: string): Promise<string | undefined> {
  const [s] = await waitFor(
    async () => {
      const got = await sesSendsTo([to]);
      return got.length > 0 && got;
    },
    30_000,
    `SES send to ${to}`,
  );
  return s.configurationSet;
}

async function project(mode?: 'ALL' | 'MARKETING_ONLY' | 'NONE'): Promise<TestProject> {
  const p = await createTestProject(e2e.api.database);
  if (mode) expect((await admin(`/admin/projects/${p.id}/tracking`, { trackingMode: mode })).status).toBe(200);
  return p;
}

async function template(p: TestProject, type: 'TRANSACTIONAL' | 'MARKETING', tracking?: boolean | null) {
  const res = await client(e2e.api.app, p).post('/templates', {
    name: 't',
    subject: 'S',
    body: '<p>Hi <a href="https://example.com/x">x</a></p>',
    type,
    from: `team@${p.domain}`,
    ...(tracking !== undefined ? { tracking } : {}),
  });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function send(p: TestProject, body: object): Promise<string> {
  const to = recipient('trk');
  const res = await client(e2e.api.app, p).post('/v1/send', {
    to,
    subscribed: true,
    from: `team@${p.domain}`,
    subject: 'S',
    body: '<p>Hi</p>',
    ...body,
  });
  expect(res.status).toBe(202);
  return to;
}

async function campaign(p: TestProject, tracking?: boolean): Promise<string> {
  const to = recipient('trkc');
  expect((await client(e2e.api.app, p).post('/contacts', { email: to, subscribed: true })).status).toBeLessThan(300);
  const created = await client(e2e.api.app, p).post('/campaigns', {
    name: 'c',
    subject: 'News',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    ...(tracking !== undefined ? { tracking } : {}),
  });
  expect(created.status).toBe(201);
  expect(created.body.data.tracking).toBe(tracking ?? null);
  expect((await client(e2e.api.app, p).post(`/campaigns/${created.body.data.id}/send`, {})).status).toBeLessThan(300);
  // Its fan-out is over once its contact has the email: a contact made later (the next campaign's) is not in it.
  await waitFor(async () => (await sesSendsTo([to])).length > 0, 30_000, `campaign email to ${to}`);
  return to;
}

test('project ALL (the default): transactional mail through the tracked set, marketing mail through the marketing stream set', async () => {
  const p = await project();
  const marketing = await template(p, 'MARKETING');
  const [tx, mk, c] = [
    await send(p, {}),
    await send(p, { template: marketing, subject: undefined, body: undefined }),
    await campaign(p),
  ];
  expect(await setOf(tx)).toBe('tx-tracked');
  expect(await setOf(mk)).toBe('mk-tracked');
  expect(await setOf(c)).toBe('mk-tracked');
  const row = await e2e.api.database.db.execute<{ tracking: boolean; marketing: boolean }>(
    sql`select tracking, marketing from emails where to_email = ${tx}`,
  );
  expect(row.rows[0]).toEqual({ tracking: true, marketing: false });
});

test('project NONE: every stream through its untracked set; a send, template or campaign asking for tracking wins', async () => {
  const p = await project('NONE');
  const trackedTemplate = await template(p, 'TRANSACTIONAL', true);
  const [tx, overridden, fromTemplate, templateOverridden, c, cTracked] = [
    await send(p, {}),
    await send(p, { tracking: true }),
    await send(p, { template: trackedTemplate, subject: undefined, body: undefined }),
    await send(p, { template: trackedTemplate, subject: undefined, body: undefined, tracking: false }),
    await campaign(p),
    await campaign(p, true),
  ];
  expect(await setOf(tx)).toBe('tx-plain');
  expect(await setOf(overridden)).toBe('tx-tracked');
  expect(await setOf(fromTemplate)).toBe('tx-tracked');
  expect(await setOf(templateOverridden)).toBe('tx-plain');
  expect(await setOf(c)).toBe('mk-plain');
  expect(await setOf(cTracked)).toBe('mk-tracked');
});

test('project MARKETING_ONLY: transactional mail untracked, marketing mail (MARKETING template, campaign) tracked; overrides both ways', async () => {
  const p = await project('MARKETING_ONLY');
  const marketing = await template(p, 'MARKETING');
  const untrackedMarketing = await template(p, 'MARKETING', false);
  const [tx, mk, mkOff, c, cOff] = [
    await send(p, {}),
    await send(p, { template: marketing, subject: undefined, body: undefined }),
    await send(p, { template: untrackedMarketing, subject: undefined, body: undefined }),
    await campaign(p),
    await campaign(p, false),
  ];
  expect(await setOf(tx)).toBe('tx-plain');
  expect(await setOf(mk)).toBe('mk-tracked');
  expect(await setOf(mkOff)).toBe('mk-plain');
  expect(await setOf(c)).toBe('mk-tracked');
  expect(await setOf(cOff)).toBe('mk-plain');
});

test('the choice is stored at acceptance: a mode changed before the worker sends does not change the set', async () => {
  const p = await project('NONE');
  // Accepted while NONE: stored untracked; the mode then changes; the row keeps its decision.
  const to = await send(p, {});
  expect((await admin(`/admin/projects/${p.id}/tracking`, { trackingMode: 'ALL' })).status).toBe(200);
  expect(await setOf(to)).toBe('tx-plain');
});

test('a custom tracking domain: CNAME found by the worker, then tracked mail from the domain goes through its own set', async () => {
  const p = await project();
  const domain = `trk-${randomBytes(4).toString('hex')}.test`;
  const added = await client(e2e.api.app, p).post('/domains', { domain });
  expect(added.status).toBe(201);
  for (const r of added.body.data.records as { type: string; name: string; value: string; priority?: number }[]) {
    if (r.type === 'CNAME') dns.zone.set(r.name, { CNAME: r.value });
    if (r.type === 'MX')
      dns.zone.set(r.name, { ...dns.zone.get(r.name), MX: [{ exchange: r.value, priority: r.priority ?? 10 }] });
    if (r.type === 'TXT') dns.zone.set(r.name, { ...dns.zone.get(r.name), TXT: [r.value] });
  }
  const set = await client(e2e.api.app, p).put(`/domains/${added.body.data.id}/tracking`, {
    trackingDomain: `track.${domain}`,
  });
  expect(set.status).toBe(200);
  const record = set.body.data.records.find((r: { purpose: string }) => r.purpose === 'tracking');
  expect(record).toEqual({
    purpose: 'tracking',
    type: 'CNAME',
    name: `track.${domain}`,
    value: 'r.us-east-1.awstrack.me',
    required: true,
    status: 'pending',
  });
  expect(set.body.data.trackingReady).toBe(false);
  dns.zone.set(record.name, { CNAME: record.value });
  const ready = await waitFor(
    async () => {
      const d = (await client(e2e.api.app, p).get(`/domains/${added.body.data.id}`)).body.data;
      return d.trackingReady && d;
    },
    20_000,
    'tracking domain ready',
  );
  expect(ready.status).toBe('verified');
  expect(ready.records.find((r: { purpose: string }) => r.purpose === 'tracking').status).toBe('found');

  const to = recipient('trkd');
  const tracked = await client(e2e.api.app, p).post('/v1/send', {
    to,
    from: `hello@${domain}`,
    subject: 'S',
    body: '<p>Hi</p>',
  });
  expect(tracked.status).toBe(202);
  expect(await setOf(to)).toBe(trackingConfigurationSetName('tx-tracked', `track.${domain}`));
  // Untracked mail from it keeps the plain set; mail from another domain of the project the stream's set.
  const plain = recipient('trkd');
  expect(
    (
      await client(e2e.api.app, p).post('/v1/send', {
        to: plain,
        from: `hello@${domain}`,
        subject: 'S',
        body: '<p>Hi</p>',
        tracking: false,
      })
    ).status,
  ).toBe(202);
  expect(await setOf(plain)).toBe('tx-plain');
  const other = await send(p, {});
  expect(await setOf(other)).toBe('tx-tracked');
  // Longer than its own waits together (20 s, then up to 30 s for each of three sends): on a slow host the step
  // that is slow fails with its own message, not Jest's timeout.
}, 120_000);
