/**
 * Open/click tracking over the API (no worker): the project's `trackingMode` (admin routes), `tracking` on sends,
 * templates and campaigns with their validation, the decision stored on each accepted email; a sending domain's
 * custom tracking domain (its CNAME in the DNS records, validation, checked through the test's DNS server), and
 * tenant isolation.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
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
    testConfig({
      DNS_SERVERS: dns.server,
      DNS_TIMEOUT_MS: '300',
      DNS_TRIES: '1',
      DOMAIN_IDENTITY_PROVIDER: 'local',
      SES_REGION: 'eu-west-1',
    }),
  );
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await api.close();
  await dns.close();
});

const admin = {
  get: (path: string) => request(api.app).get(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
  put: (path: string, body: object) =>
    request(api.app).put(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
};

const fieldsOf = (res: request.Response) => (res.body.error.errors as { field: string }[]).map((e) => e.field);

async function trackingOf(emailId: string): Promise<boolean> {
  const r = await api.database.db.execute<{ tracking: boolean }>(
    sql`select tracking from emails where id = ${emailId}::uuid and project_id = ${p.id}::uuid`,
  );
  return r.rows[0].tracking;
}

describe('project trackingMode', () => {
  test('ALL by default; set and read through the admin API', async () => {
    const own = await createTestProject(api.database);
    expect((await admin.get(`/admin/projects/${own.id}/tracking`)).body.data).toEqual({
      projectId: own.id,
      trackingMode: 'ALL',
    });
    const set = await admin.put(`/admin/projects/${own.id}/tracking`, { trackingMode: 'MARKETING_ONLY' });
    expect(set.status).toBe(200);
    expect(set.body.data).toEqual({ projectId: own.id, trackingMode: 'MARKETING_ONLY' });
    expect((await admin.get(`/admin/projects/${own.id}/tracking`)).body.data.trackingMode).toBe('MARKETING_ONLY');
  });

  test('bad values are 422 naming trackingMode; an unknown project 404; a project key 401/403', async () => {
    for (const body of [{ trackingMode: 'SOME' }, { trackingMode: null }, {}, { trackingMode: 'ALL', extra: 1 }]) {
      const res = await admin.put(`/admin/projects/${p.id}/tracking`, body);
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(fieldsOf(res).some((f) => f === 'trackingMode' || f === 'extra')).toBe(true);
    }
    expect(
      (await admin.put('/admin/projects/00000000-0000-7000-8000-000000000000/tracking', { trackingMode: 'NONE' }))
        .status,
    ).toBe(404);
    const asProject = await request(api.app)
      .put(`/admin/projects/${p.id}/tracking`)
      .set('Authorization', p.auth)
      .send({ trackingMode: 'NONE' });
    expect([401, 403]).toContain(asProject.status);
    expect((await admin.get(`/admin/projects/${p.id}/tracking`)).body.data.trackingMode).toBe('ALL');
  });
});

describe('tracking on sends, templates and campaigns', () => {
  test('`tracking` must be a boolean: 422 naming the field on /v1/send, templates and campaigns', async () => {
    const send = await client(api.app, p).post('/v1/send', {
      to: recipient('t'),
      from: `a@${p.domain}`,
      subject: 'S',
      body: 'B',
      tracking: 'yes',
    });
    expect(send.status).toBe(422);
    expect(fieldsOf(send)).toContain('tracking');
    const tpl = await client(api.app, p).post('/templates', { name: 't', subject: 'S', body: 'B', tracking: 1 });
    expect(tpl.status).toBe(422);
    expect(fieldsOf(tpl)).toContain('tracking');
    const camp = await client(api.app, p).post('/campaigns', {
      name: 'c',
      subject: 'S',
      body: 'B',
      from: `a@${p.domain}`,
      audienceType: 'ALL',
      tracking: 'off',
    });
    expect(camp.status).toBe(422);
    expect(fieldsOf(camp)).toContain('tracking');
  });

  test('templates and campaigns carry tracking (null by default), set and cleared by PATCH', async () => {
    const tpl = await client(api.app, p).post('/templates', { name: 't', subject: 'S', body: 'B' });
    expect(tpl.body.data.tracking).toBeNull();
    const patched = await client(api.app, p).patch(`/templates/${tpl.body.data.id}`, { tracking: false });
    expect(patched.status).toBe(200);
    expect(patched.body.data.tracking).toBe(false);
    expect(
      (await client(api.app, p).patch(`/templates/${tpl.body.data.id}`, { tracking: null })).body.data.tracking,
    ).toBeNull();
    const camp = await client(api.app, p).post('/campaigns', {
      name: 'c',
      subject: 'S',
      body: 'B',
      from: `a@${p.domain}`,
      audienceType: 'ALL',
      tracking: false,
    });
    expect(camp.status).toBe(201);
    expect(camp.body.data.tracking).toBe(false);
    expect(
      (await client(api.app, p).patch(`/campaigns/${camp.body.data.id}`, { tracking: true })).body.data.tracking,
    ).toBe(true);
  });

  test('the email stores its tracking at acceptance: send, else template, else the project mode by stream', async () => {
    const own = await createTestProject(api.database);
    const as = client(api.app, own);
    const send = async (body: object) => {
      const res = await as.post('/v1/send', { to: recipient('t'), from: `a@${own.domain}`, subscribed: true, ...body });
      expect(res.status).toBe(202);
      const r = await api.database.db.execute<{ tracking: boolean }>(
        sql`select tracking from emails where id = ${res.body.data.emails[0].email}::uuid and project_id = ${own.id}::uuid`,
      );
      return r.rows[0].tracking;
    };
    const marketing = (await as.post('/templates', { name: 'm', subject: 'S', body: 'B', type: 'MARKETING' })).body.data
      .id;
    const untracked = (await as.post('/templates', { name: 'u', subject: 'S', body: 'B', tracking: false })).body.data
      .id;
    expect(await send({ subject: 'S', body: 'B' })).toBe(true);
    expect(await send({ template: untracked })).toBe(false);
    expect(await send({ template: untracked, tracking: true })).toBe(true);
    await admin.put(`/admin/projects/${own.id}/tracking`, { trackingMode: 'MARKETING_ONLY' }).expect(200);
    expect(await send({ subject: 'S', body: 'B' })).toBe(false);
    expect(await send({ template: marketing })).toBe(true);
    await admin.put(`/admin/projects/${own.id}/tracking`, { trackingMode: 'NONE' }).expect(200);
    expect(await send({ template: marketing })).toBe(false);
    expect(await send({ subject: 'S', body: 'B', tracking: true })).toBe(true);
    // Another project's mode never decides this project's mail.
    expect(
      await trackingOf(
        (
          await client(api.app, p).post('/v1/send', {
            to: recipient('t'),
            from: `a@${p.domain}`,
            subject: 'S',
            body: 'B',
          })
        ).body.data.emails[0].email,
      ),
    ).toBe(true);
  });
});

describe('custom tracking domain', () => {
  async function addDomain(project: TestProject) {
    const domain = `trk-${randomBytes(4).toString('hex')}.test`;
    const added = await client(api.app, project).post('/domains', { domain });
    expect(added.status).toBe(201);
    return {
      domain,
      id: added.body.data.id as string,
      records: added.body.data.records as { purpose: string; type: string; name: string; value: string }[],
    };
  }

  test('its CNAME (to the region’s awstrack.me endpoint) joins the DNS records; replaced on change, gone when cleared', async () => {
    const d = await addDomain(p);
    expect(d.records.some((r) => r.purpose === 'tracking')).toBe(false);
    const set = await client(api.app, p).put(`/domains/${d.id}/tracking`, { trackingDomain: `Track.${d.domain}` });
    expect(set.status).toBe(200);
    expect(set.body.data).toMatchObject({ trackingDomain: `track.${d.domain}`, trackingReady: false });
    const tracking = set.body.data.records.filter((r: { purpose: string }) => r.purpose === 'tracking');
    expect(tracking).toEqual([
      {
        purpose: 'tracking',
        type: 'CNAME',
        name: `track.${d.domain}`,
        value: 'r.eu-west-1.awstrack.me',
        required: true,
        status: 'pending',
      },
    ]);
    expect(set.body.data.records.filter((r: { purpose: string }) => r.purpose !== 'tracking')).toEqual(d.records);
    const listed = (await client(api.app, p).get(`/domains/${d.id}`)).body.data;
    expect(listed.records).toEqual(set.body.data.records);
    const changed = (await client(api.app, p).put(`/domains/${d.id}/tracking`, { trackingDomain: `links.${d.domain}` }))
      .body.data;
    expect(
      changed.records.filter((r: { purpose: string }) => r.purpose === 'tracking').map((r: { name: string }) => r.name),
    ).toEqual([`links.${d.domain}`]);
    const cleared = (await client(api.app, p).put(`/domains/${d.id}/tracking`, { trackingDomain: null })).body.data;
    expect(cleared).toMatchObject({ trackingDomain: null, trackingReady: false });
    expect(cleared.records).toEqual(d.records);
  });

  test('verified like the other records: pending until the CNAME resolves, then found and ready once the domain is verified', async () => {
    const d = await addDomain(p);
    const set = (await client(api.app, p).put(`/domains/${d.id}/tracking`, { trackingDomain: `track.${d.domain}` }))
      .body.data;
    for (const r of d.records) if (r.type === 'CNAME') dns.zone.set(r.name, { CNAME: r.value });
    const before = (await client(api.app, p).post(`/domains/${d.id}/verify`, {})).body.data;
    expect(before.status).toBe('verified');
    expect(before.trackingReady).toBe(false);
    expect(before.records.find((r: { purpose: string }) => r.purpose === 'tracking').status).toBe('pending');
    const cname = set.records.find((r: { purpose: string }) => r.purpose === 'tracking');
    dns.zone.set(cname.name, { CNAME: cname.value });
    const after = (await client(api.app, p).post(`/domains/${d.id}/verify`, {})).body.data;
    expect(after.trackingReady).toBe(true);
    expect(after.records.find((r: { purpose: string }) => r.purpose === 'tracking').status).toBe('found');
  });

  test('must be a subdomain of the sending domain: 422 naming trackingDomain', async () => {
    const d = await addDomain(p);
    for (const trackingDomain of [
      d.domain,
      `track.other-${d.domain}`,
      'track.example.org',
      `bad_label.${d.domain}`,
      `https://track.${d.domain}`,
      '',
    ]) {
      const res = await client(api.app, p).put(`/domains/${d.id}/tracking`, { trackingDomain });
      expect(res.status).toBe(422);
      expect(fieldsOf(res)).toContain('trackingDomain');
    }
    expect((await client(api.app, p).get(`/domains/${d.id}`)).body.data.trackingDomain).toBeNull();
  });

  test("tenant isolation: another project can neither set nor read this project's domain's tracking domain", async () => {
    const d = await addDomain(p);
    const other = await createTestProject(api.database);
    expect(
      (await client(api.app, other).put(`/domains/${d.id}/tracking`, { trackingDomain: `track.${d.domain}` })).status,
    ).toBe(404);
    expect((await client(api.app, other).get(`/domains/${d.id}`)).status).toBe(404);
    expect((await client(api.app, p).get(`/domains/${d.id}`)).body.data.trackingDomain).toBeNull();
  });
});
