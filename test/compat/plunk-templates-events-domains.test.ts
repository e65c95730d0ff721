/**
 * A Plunk v2 integration moving in unchanged: its requests for domains, templates, events and sending, written from
 * Plunk's documented shapes and controllers (`/domains/{id}/verify` by GET, `dkimTokens`/`tokens`; templates with
 * `description`, a `from` mailbox string and `page`/`pageSize`; `POST /events/track` with `name`/`contactId`;
 * `GET /events?eventName=` and `/events/names`), replayed against the API. Each answer is checked for Plunk's
 * field names and ours, inside our envelope.
 *
 * Then the same integration sends through a real worker to the SES emulator: an internationalised recipient
 * (`ann@empfänger-….test`) and sender domain arrive in punycode, with the display name of the `from` mailbox.
 */
import { randomBytes } from 'node:crypto';
import { domainToASCII } from 'node:url';
import request from 'supertest';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import { startDnsServer, type TestDnsServer } from '../support/dns-server';
import {
  client,
  createTestProject,
  parseMail,
  sesSendsTo,
  startTestApi,
  testConfig,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';

let dns: TestDnsServer;
let api: TestApi;
let worker: RunningWorker;
let p: TestProject;

beforeAll(async () => {
  dns = await startDnsServer();
  const config = testConfig({
    DNS_SERVERS: dns.server,
    DNS_TIMEOUT_MS: '300',
    DNS_TRIES: '1',
    DOMAIN_IDENTITY_PROVIDER: 'local',
  });
  api = await startTestApi(config);
  worker = await startWorker(config, { healthPort: null });
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await worker?.stop();
  await api?.close();
  await dns?.close();
});

const plunk = () => client(api.app, p);
type Rec = { type: string; name: string; value: string; priority?: number };

/** Publishes a domain's records in the test DNS server, as the customer would at their DNS host. */
function publish(records: Rec[]) {
  for (const r of records) {
    const entry = dns.zone.get(r.name) ?? {};
    if (r.type === 'CNAME') entry.CNAME = r.value;
    if (r.type === 'MX') entry.MX = [{ exchange: r.value, priority: r.priority ?? 10 }];
    if (r.type === 'TXT') entry.TXT = [...(entry.TXT ?? []), r.value];
    dns.zone.set(r.name, entry);
  }
}

const tag = randomBytes(4).toString('hex');
/** The integration's sending domain, written in Unicode as its owner would. */
const unicodeDomain = `post-bücher-${tag}.test`;
const asciiDomain = domainToASCII(unicodeDomain);
const state: { domainId?: string; templateId?: string; contactId?: string } = {};

describe('a Plunk v2 integration, request by request', () => {
  test('POST /domains → the domain with dkimTokens, unverified', async () => {
    const res = await plunk().post('/domains', { domain: unicodeDomain });
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
    const d = res.body.data;
    // Plunk's Domain: id, projectId, domain, verified, dkimTokens, createdAt.
    expect(d).toMatchObject({
      id: expect.any(String),
      projectId: p.id,
      domain: asciiDomain,
      verified: false,
      createdAt: expect.any(String),
    });
    expect(d.dkimTokens).toEqual([expect.any(String), expect.any(String), expect.any(String)]);
    // Ours beside them.
    expect(d).toMatchObject({ status: 'pending', mailFromDomain: `mail.${asciiDomain}`, records: expect.any(Array) });
    state.domainId = d.id;
    publish(d.records);
  });

  test('GET /domains/{id}/verify → { domain, tokens, status, verified } once the records are published', async () => {
    const res = await plunk().get(`/domains/${state.domainId}/verify`);
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      domain: asciiDomain,
      verified: true,
      status: 'verified',
      tokens: expect.any(Array),
    });
    expect(res.body.data.tokens).toEqual(res.body.data.dkimTokens);
    const listed = await plunk().get('/domains');
    expect(listed.body.data.items.find((x: { id: string }) => x.id === state.domainId)).toMatchObject({
      verified: true,
      dkimTokens: res.body.data.tokens,
    });
  });

  test("POST /templates with Plunk's body (description, from mailbox string, replyTo) → the template with Plunk's fields", async () => {
    const body = {
      name: 'Welcome',
      description: 'Sent when a user signs up',
      subject: 'Welcome, {{name ?? friend}}',
      body: '<p>Hello {{name ?? friend}}</p>',
      from: `Acme <hello@${unicodeDomain}>`,
      replyTo: 'support@acme.test',
      type: 'TRANSACTIONAL',
    };
    const res = await plunk().post('/templates', body);
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.any(String),
      projectId: p.id,
      name: 'Welcome',
      description: 'Sent when a user signs up',
      subject: body.subject,
      body: body.body,
      from: `hello@${asciiDomain}`,
      fromName: 'Acme',
      replyTo: 'support@acme.test',
      type: 'TRANSACTIONAL',
      // Ours beside Plunk's: open/click tracking of the template's mail (null: the project's mode).
      tracking: null,
      // Ours beside Plunk's: the live version, and no draft.
      version: 1,
      draftVersion: null,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    });
    state.templateId = res.body.data.id;
  });

  test('PATCH /templates/{id} with description; GET /templates/{id}', async () => {
    const res = await plunk().patch(`/templates/${state.templateId}`, {
      description: 'Sent right after sign-up',
      fromName: 'Acme Team',
    });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({
      description: 'Sent right after sign-up',
      fromName: 'Acme Team',
      from: `hello@${asciiDomain}`,
    });
    expect((await plunk().get(`/templates/${state.templateId}`)).body.data).toEqual(res.body.data);
  });

  test('GET /templates?page&pageSize&search (search covers description) → templates, total, page, pageSize, totalPages', async () => {
    const res = await plunk().get('/templates?page=1&pageSize=10&search=right%20after');
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ total: 1, page: 1, pageSize: 10, totalPages: 1 });
    expect(res.body.data.templates.map((t: { id: string; description: string }) => [t.id, t.description])).toEqual([
      [state.templateId, 'Sent right after sign-up'],
    ]);
    expect(res.body.data.items).toEqual(res.body.data.templates);
  });

  test("POST /events/track with Plunk's body { name, contactId, data } → 201, the event with Plunk's fields", async () => {
    const contact = await plunk().post('/contacts', {
      email: `Ann.${tag}@Empfänger-${tag}.test`,
      data: { name: 'Ann' },
    });
    expect(contact.status).toBe(201);
    expect(contact.body.data.email).toBe(`Ann.${tag}@${domainToASCII(`empfänger-${tag}.test`)}`);
    state.contactId = contact.body.data.id;
    const res = await plunk().post('/events/track', {
      name: 'signed-up',
      contactId: state.contactId,
      data: { plan: 'pro' },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({
      id: expect.any(String),
      projectId: p.id,
      contactId: state.contactId,
      name: 'signed-up',
      data: { plan: 'pro' },
      createdAt: expect.any(String),
      contact: state.contactId,
      event: res.body.data.id,
      timestamp: res.body.data.createdAt,
    });
    // Our body works on the same path too.
    const ours = await plunk().post('/events/track', { email: contact.body.data.email, event: 'activated' });
    expect(ours.status).toBe(201);
    expect(ours.body.data.contactId).toBe(state.contactId);
  });

  test('GET /events?eventName → events with name, contactId, data, createdAt and contact.email', async () => {
    const res = await plunk().get('/events?eventName=signed-up&pageSize=100');
    expect(res.status).toBe(200);
    expect(res.body.data.events).toEqual([
      expect.objectContaining({
        name: 'signed-up',
        contactId: state.contactId,
        data: { plan: 'pro' },
        createdAt: expect.any(String),
        contact: expect.objectContaining({ email: expect.stringContaining('@xn--') }),
      }),
    ]);
    expect(res.body.data).toMatchObject({
      total: 1,
      page: 1,
      pageSize: 100,
      totalPages: 1,
      hasMore: false,
      nextCursor: null,
    });
  });

  test('GET /events/names → eventNames', async () => {
    const res = await plunk().get('/events/names');
    expect(res.status).toBe(200);
    expect(res.body.data.eventNames).toEqual(expect.arrayContaining(['activated', 'signed-up']));
    expect(res.body.data.eventNames).toEqual(res.body.data.items.map((n: { name: string }) => n.name));
  });

  test('POST /v1/send with the template to an internationalised recipient: SES receives punycode, with the template sender name', async () => {
    const to = `ann.${tag}@empfänger-${tag}.test`;
    const asciiTo = `ann.${tag}@${domainToASCII(`empfänger-${tag}.test`)}`;
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to: `Ann <${to}>`, template: state.templateId, data: { name: 'Ann' } });
    expect(res.status).toBe(202);
    expect(res.body.data.emails[0].contact).toEqual({ id: state.contactId, email: expect.stringMatching(/@xn--/) });
    const [sent] = await waitFor(
      async () => {
        const s = await sesSendsTo([asciiTo]);
        return s.length ? s : undefined;
      },
      30_000,
      `an SES send to ${asciiTo}`,
    );
    // SES is asked to send to and from the ASCII forms; the headers carry them too (a mail reader may show them in
    // Unicode: mailparser does, so the addresses are read from the raw bytes).
    expect(sent.to).toEqual([asciiTo]);
    expect(sent.raw).toMatch(new RegExp(`^From: Acme Team <hello@${asciiDomain}>\r?$`, 'm'));
    expect(sent.raw).toMatch(new RegExp(`^To: Ann <${asciiTo}>\r?$`, 'm'));
    expect(sent.raw).not.toMatch(/bücher|empfänger/);
    const mail = await parseMail(sent);
    expect(mail.subject).toBe('Welcome, Ann');
    expect(mail.from?.value.map((a) => a.name)).toEqual(['Acme Team']);
    expect(mail.replyTo?.value).toEqual([{ name: '', address: 'support@acme.test' }]);
  });

  test('a sender "Acme <…>" on /v1/send overrides the template; a non-ASCII local part is refused with the reason', async () => {
    const to = `bob.${tag}@empfänger-${tag}.test`;
    const asciiTo = `bob.${tag}@${domainToASCII(`empfänger-${tag}.test`)}`;
    const res = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({
        to,
        from: `"Acme, Billing" <billing@${unicodeDomain}>`,
        reply: 'Help Desk <help@acme.test>',
        subject: 'Invoice',
        body: '<p>Paid</p>',
      });
    expect(res.status).toBe(202);
    const [sent] = await waitFor(
      async () => {
        const s = await sesSendsTo([asciiTo]);
        return s.length ? s : undefined;
      },
      30_000,
      `an SES send to ${asciiTo}`,
    );
    expect(sent.raw).toMatch(new RegExp(`^From: "Acme, Billing" <billing@${asciiDomain}>\r?$`, 'm'));
    const mail = await parseMail(sent);
    expect(mail.from?.value.map((a) => a.name)).toEqual(['Acme, Billing']);
    expect(mail.replyTo?.value).toEqual([{ name: 'Help Desk', address: 'help@acme.test' }]);

    const refused = await request(api.app)
      .post('/v1/send')
      .set('Authorization', p.auth)
      .send({ to: `jürgen.${tag}@empfänger-${tag}.test`, from: `hello@${unicodeDomain}`, subject: 's', body: 'b' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.errors).toEqual([
      {
        field: 'to',
        message: expect.stringMatching(/only ASCII characters before the @: Amazon SES does not support SMTPUTF8/),
        code: 'invalid_string',
      },
    ]);
    expect(refused.body.message).toMatch(/^to: /);
  });
});
