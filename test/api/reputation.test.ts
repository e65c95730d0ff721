/**
 * `GET /reputation` and the reputation gauges of `/metrics`: counts from emails recorded as sent (as the worker
 * records them) and signed SES events posted to the real `/webhooks/ses` route, overall, per sending domain and
 * per campaign, the 24-hour and 7-day windows over hourly buckets, rates per email sent, the project's effective
 * guardrails, and tenant isolation.
 *
 * Runs on a database of its own: the campaigns here stay SENDING with no worker, and another file's worker
 * reconciler would adopt them on the shared database.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { Registry } from 'prom-client';
import { createLogger } from '@mailroom/platform/logger';
import { DEFAULT_GUARDRAILS } from '@mailroom/audiences/guardrail-defaults';
import { loadConfig } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { sentInLast24Hours, sentSinceHour } from '@mailroom/db/queries/send-quota';
import { type Db } from '@mailroom/db/client';
import { registerReputationMetrics } from '../../apps/api/src/http/reputation-metrics';
import { setDomainConnection, setProjectConnection } from '@mailroom/projects/queries/delivery-connections';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  isolatedDatabase,
  recipient,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';
import { markSent, sentCampaignEmails, type SentEmail } from '../support/sent-emails';

let iso: { url: string; drop: () => Promise<void> };
let sns: SnsHarness;
let api: TestApi;
beforeAll(async () => {
  iso = await isolatedDatabase();
  sns = await startSnsHarness();
  // REPUTATION_METRICS_TTL_MS 0: every scrape here reads the figures afresh (the cache has its own tests below).
  api = await startTestApi(
    loadConfig(
      testEnv({
        DATABASE_URL: iso.url,
        SNS_TOPIC_ARNS: sns.topicArn,
        SNS_CERT_HOSTS: sns.certHost,
        REPUTATION_METRICS_TTL_MS: '0',
        SES_CONNECTIONS: JSON.stringify([{ name: 'eu', region: 'eu-west-1' }]),
      }),
    ),
  );
});
afterAll(async () => {
  await api.close();
  await sns.close();
  await iso.drop();
});

const event = async (...args: Parameters<typeof sesEvent>) => {
  const res = await request(api.app)
    .post('/webhooks/ses')
    .set('Content-Type', 'text/plain; charset=UTF-8')
    .send(JSON.stringify(sns.notification(sesEvent(...args))));
  expect(res.status).toBe(200);
  return res;
};

/** A transactional email from `from`, accepted by /v1/send and recorded as sent. */
async function sentTransactional(p: TestProject, from: string): Promise<SentEmail> {
  const to = recipient('tx');
  const res = await client(api.app, p).post('/v1/send', { to, from, subject: 'S', body: 'B' });
  expect(res.status).toBe(202);
  const id = res.body.data.emails[0].email as string;
  return { id, to, messageId: await markSent(api.database.db, id) };
}

/** A campaign moved to SENDING (no worker runs here, so it stays so). */
async function sendingCampaign(p: TestProject, name: string): Promise<string> {
  const as = client(api.app, p);
  const created = await as.post('/campaigns', {
    name,
    subject: 'News',
    body: '<p>News</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  expect((await as.post(`/campaigns/${created.body.data.id}/send`, {})).status).toBe(200);
  return created.body.data.id as string;
}

describe('GET /reputation', () => {
  let p: TestProject;
  let other: TestProject;
  let campaignId: string;
  let secondDomain: string;
  beforeAll(async () => {
    p = await createTestProject(api.database);
    other = await createTestProject(api.database);
    secondDomain = `second-${Date.now()}.example.com`;
    await addDomain(api.database.db, p.id, secondDomain, true);

    // Domain A, transactional: 4 sent; 2 delivered (one then complained), 1 hard bounce, 1 soft bounce.
    const [a1, a2, a3, a4] = [
      await sentTransactional(p, `tx@${p.domain}`),
      await sentTransactional(p, `tx@${p.domain}`),
      await sentTransactional(p, `tx@${p.domain}`),
      await sentTransactional(p, `tx@${p.domain}`),
    ];
    await event('Delivery', a1);
    await event('Delivery', a2);
    await event('Complaint', a2);
    await event('Bounce', a3, { bounceType: 'Permanent' });
    await event('Bounce', a4, { bounceType: 'Transient' });
    // Counted once per email: a second Delivery (another SNS message) and a redelivered SNS message add nothing.
    await event('Delivery', a1);
    const again = sns.notification(sesEvent('Delivery', a1));
    for (let i = 0; i < 2; i++)
      await request(api.app).post('/webhooks/ses').set('Content-Type', 'text/plain').send(JSON.stringify(again));
    // Domain B: 2 sent, 1 delivered.
    const [b1] = [await sentTransactional(p, `hi@${secondDomain}`), await sentTransactional(p, `hi@${secondDomain}`)];
    await event('Delivery', b1);
    // A campaign from domain A: 3 sent, 2 delivered, 1 hard bounce.
    campaignId = await sendingCampaign(p, 'Spring news');
    const c = await sentCampaignEmails(api.database.db, { projectId: p.id, campaignId, from: `news@${p.domain}` }, 3);
    await event('Delivery', c[0]);
    await event('Delivery', c[1]);
    await event('Bounce', c[2], { bounceType: 'Permanent' });
    // Older buckets: 30 hours ago (in the 7 days, not the 24 hours) and 8 days ago (in neither).
    await api.database.db.execute(sql`
      insert into reputation_counts (project_id, hour, domain, campaign_id, sent, delivered, hard_bounces, soft_bounces, complaints)
      values (${p.id}::uuid, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC' - interval '30 hours', ${p.domain}, ${campaignId}::uuid, 100, 90, 10, 0, 0),
             (${p.id}::uuid, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC' - interval '192 hours', ${p.domain}, '00000000-0000-0000-0000-000000000000', 1000, 0, 1000, 0, 0)`);
  });

  test('last 24 hours: overall, per sending domain and per campaign, rates per email sent', async () => {
    const res = await client(api.app, p).get('/reputation');
    expect(res.status).toBe(200);
    const day = res.body.data.last24h;
    expect(day.overall).toEqual({
      sent: 9,
      delivered: 5,
      hardBounces: 2,
      softBounces: 1,
      complaints: 1,
      hardBounceRate: 2 / 9,
      complaintRate: 1 / 9,
      softBounceRate: 1 / 9,
      deliveryRate: 5 / 9,
    });
    expect(day.domains).toEqual([
      {
        domain: p.domain,
        sent: 7,
        delivered: 4,
        hardBounces: 2,
        softBounces: 1,
        complaints: 1,
        hardBounceRate: 2 / 7,
        complaintRate: 1 / 7,
        softBounceRate: 1 / 7,
        deliveryRate: 4 / 7,
      },
      {
        domain: secondDomain,
        sent: 2,
        delivered: 1,
        hardBounces: 0,
        softBounces: 0,
        complaints: 0,
        hardBounceRate: 0,
        complaintRate: 0,
        softBounceRate: 0,
        deliveryRate: 1 / 2,
      },
    ]);
    expect(day.campaigns).toEqual([
      {
        campaignId,
        name: 'Spring news',
        sent: 3,
        delivered: 2,
        hardBounces: 1,
        softBounces: 0,
        complaints: 0,
        hardBounceRate: 1 / 3,
        complaintRate: 0,
        softBounceRate: 0,
        deliveryRate: 2 / 3,
      },
    ]);
    expect(day.campaignsTruncated).toBe(false);
    // 24 hourly buckets ending with the current one.
    const hourStart = new Date(Math.floor(Date.now() / 3_600_000) * 3_600_000);
    expect(Date.parse(day.since)).toBeLessThanOrEqual(hourStart.getTime() - 23 * 3_600_000);
    expect(Date.parse(day.since)).toBeGreaterThanOrEqual(hourStart.getTime() - 24 * 3_600_000);
  });

  test('per delivery connection: the domain figures summed by the connection each domain is bound to now', async () => {
    // Unbound, both domains count under the default connection.
    const before = (await client(api.app, p).get('/reputation')).body.data.last24h;
    expect(before.connections).toEqual([
      expect.objectContaining({ connection: 'default', sent: 9, delivered: 5, hardBounces: 2 }),
    ]);
    await setDomainConnection(api.database.db, secondDomain, 'eu');
    try {
      const day = (await client(api.app, p).get('/reputation')).body.data.last24h;
      expect(day.connections).toEqual([
        {
          connection: 'default',
          sent: 7,
          delivered: 4,
          hardBounces: 2,
          softBounces: 1,
          complaints: 1,
          hardBounceRate: 2 / 7,
          complaintRate: 1 / 7,
          softBounceRate: 1 / 7,
          deliveryRate: 4 / 7,
        },
        {
          connection: 'eu',
          sent: 2,
          delivered: 1,
          hardBounces: 0,
          softBounces: 0,
          complaints: 0,
          hardBounceRate: 0,
          complaintRate: 0,
          softBounceRate: 0,
          deliveryRate: 1 / 2,
        },
      ]);
      // A project binding moves its other domains; the domain's own binding still wins.
      await setProjectConnection(api.database.db, p.id, 'eu');
      expect((await client(api.app, p).get('/reputation')).body.data.last24h.connections).toEqual([
        expect.objectContaining({ connection: 'eu', sent: 9 }),
      ]);
    } finally {
      await setProjectConnection(api.database.db, p.id, null);
      await setDomainConnection(api.database.db, secondDomain, null);
    }
  });

  test('last 7 days takes the older bucket in; a bucket older than 168 hours counts nowhere', async () => {
    const week = (await client(api.app, p).get('/reputation')).body.data.last7d;
    expect(week.overall).toMatchObject({ sent: 109, delivered: 95, hardBounces: 12, softBounces: 1, complaints: 1 });
    expect(week.overall.hardBounceRate).toBeCloseTo(12 / 109, 12);
    expect(week.domains[0]).toMatchObject({ domain: p.domain, sent: 107 });
    expect(week.campaigns).toEqual([
      expect.objectContaining({ campaignId, sent: 103, delivered: 92, hardBounces: 11 }),
    ]);
  });

  test('carries the effective guardrails and the SES review levels', async () => {
    // A project of its own: the guardrails changed here must not reach the other tests' project.
    const own = await createTestProject(api.database);
    const data = (await client(api.app, own).get('/reputation')).body.data;
    expect(data.guardrails).toEqual(DEFAULT_GUARDRAILS);
    expect(data.sesReviewLevels).toEqual({ hardBounceRate: 0.05, complaintRate: 0.001 });
    await request(api.app)
      .put(`/admin/projects/${own.id}/guardrails`)
      .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
      .send({ minSample: 50 })
      .expect(200);
    expect((await client(api.app, own).get('/reputation')).body.data.guardrails).toEqual({
      ...DEFAULT_GUARDRAILS,
      minSample: 50,
    });
  });

  test("tenant isolation: another project sees only its own figures (none), never this project's", async () => {
    const res = await client(api.app, other).get('/reputation');
    expect(res.status).toBe(200);
    for (const w of [res.body.data.last24h, res.body.data.last7d]) {
      expect(w.overall).toEqual({
        sent: 0,
        delivered: 0,
        hardBounces: 0,
        softBounces: 0,
        complaints: 0,
        hardBounceRate: null,
        complaintRate: null,
        softBounceRate: null,
        deliveryRate: null,
      });
      expect(w.domains).toEqual([]);
      expect(w.campaigns).toEqual([]);
      expect(w.connections).toEqual([]);
    }
    expect(res.body.data.guardrails).toEqual(DEFAULT_GUARDRAILS);
  });

  test('needs a secret key', async () => {
    expect((await request(api.app).get('/reputation')).status).toBe(401);
    const pk = await request(api.app).get('/reputation').set('Authorization', `Bearer ${p.publicKey}`);
    expect(pk.status).toBe(403);
    expect(pk.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
  });

  test('/metrics: the same figures per project and window, and the rates per email sent', async () => {
    const res = await request(api.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(res.status).toBe(200);
    const value = (series: string) =>
      Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(res.text)?.[1] ?? NaN);
    const at = (window: string, outcome: string) =>
      value(`mailroom_reputation_emails{project="${p.id}",window="${window}",outcome="${outcome}"}`);
    expect([
      at('24h', 'sent'),
      at('24h', 'delivered'),
      at('24h', 'hard_bounce'),
      at('24h', 'soft_bounce'),
      at('24h', 'complaint'),
    ]).toEqual([9, 5, 2, 1, 1]);
    expect([at('7d', 'sent'), at('7d', 'delivered'), at('7d', 'hard_bounce')]).toEqual([109, 95, 12]);
    expect(value(`mailroom_reputation_hard_bounce_rate{project="${p.id}",window="24h"}`)).toBeCloseTo(2 / 9, 6);
    expect(value(`mailroom_reputation_complaint_rate{project="${p.id}",window="7d"}`)).toBeCloseTo(1 / 109, 6);
    expect(value('mailroom_reputation_up')).toBe(1);
    // A project with nothing sent has no series.
    expect(res.text).not.toContain(`project="${other.id}"`);
  });

  test('/metrics: the same figures per sending domain and per campaign as GET /reputation, bounded per project', async () => {
    // A campaign active only 30 hours ago: in GET /reputation's 7 days, but not among /metrics' campaigns (no activity in 24 hours).
    const quiet = await sendingCampaign(p, 'Quiet');
    await api.database.db.execute(sql`
      insert into reputation_counts (project_id, hour, domain, campaign_id, sent, delivered)
      values (${p.id}::uuid, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC' - interval '30 hours', ${p.domain}, ${quiet}::uuid, 4, 4)`);
    const rep = (await client(api.app, p).get('/reputation')).body.data;
    const text = (await request(api.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).text;
    const value = (series: string) =>
      Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
    const outcomes = [
      ['sent', 'sent'],
      ['delivered', 'delivered'],
      ['hardBounces', 'hard_bounce'],
      ['softBounces', 'soft_bounce'],
      ['complaints', 'complaint'],
    ] as const;
    let checked = 0;
    for (const [window, w] of [
      ['24h', rep.last24h],
      ['7d', rep.last7d],
    ] as const) {
      for (const d of w.domains as { domain: string; hardBounceRate: number; complaintRate: number }[]) {
        const labels = `project="${p.id}",domain="${d.domain}",window="${window}"`;
        for (const [field, outcome] of outcomes)
          expect(value(`mailroom_reputation_domain_emails{${labels},outcome="${outcome}"}`)).toBe(
            (d as unknown as Record<string, number>)[field],
          );
        expect(value(`mailroom_reputation_domain_hard_bounce_rate{${labels}}`)).toBeCloseTo(d.hardBounceRate, 6);
        expect(value(`mailroom_reputation_domain_complaint_rate{${labels}}`)).toBeCloseTo(d.complaintRate, 6);
        checked++;
      }
      for (const c of w.campaigns as { campaignId: string; hardBounceRate: number }[]) {
        const labels = `project="${p.id}",campaign="${c.campaignId}",window="${window}"`;
        if (c.campaignId === quiet) {
          expect(text).not.toContain(`campaign="${quiet}"`);
          continue;
        }
        for (const [field, outcome] of outcomes)
          expect(value(`mailroom_reputation_campaign_emails{${labels},outcome="${outcome}"}`)).toBe(
            (c as unknown as Record<string, number>)[field],
          );
        expect(value(`mailroom_reputation_campaign_hard_bounce_rate{${labels}}`)).toBeCloseTo(c.hardBounceRate, 6);
        checked++;
      }
    }
    expect(checked).toBe(2 + 2 + 1 + 1); // two domains and one campaign in each window
    expect(rep.last7d.campaigns.map((c: { campaignId: string }) => c.campaignId)).toContain(quiet);
    expect([
      value(
        `mailroom_reputation_campaign_emails{project="${p.id}",campaign="${campaignId}",window="7d",outcome="sent"}`,
      ),
    ]).toEqual([103]);
    expect(text).not.toContain(`project="${other.id}"`);

    // The bound: at most N domains (most sent in 7 days first) and N campaigns per project.
    const registry = new Registry();
    registerReputationMetrics(registry, api.database.db, createLogger(api.config, 'test'), {
      ttlMs: 0,
      limits: { domainsPerProject: 1, campaignsPerProject: 0 },
    });
    const bounded = await registry.metrics();
    expect(bounded).toContain(
      `mailroom_reputation_domain_emails{project="${p.id}",domain="${p.domain}",window="7d",outcome="sent"} 111`,
    );
    expect(bounded).not.toContain(`domain="${secondDomain}"`);
    expect(bounded).not.toMatch(/^mailroom_reputation_campaign_emails\{/m);
    expect(bounded).toContain(`mailroom_reputation_emails{project="${p.id}",window="7d",outcome="sent"} 113`);
  });
});

describe('GET /reputation by stream', () => {
  let p: TestProject;
  let campaignId: string;
  beforeAll(async () => {
    p = await createTestProject(api.database);
    // Transactional: 2 sent, 1 delivered.
    const [t1] = [await sentTransactional(p, `tx@${p.domain}`), await sentTransactional(p, `tx@${p.domain}`)];
    await event('Delivery', t1);
    // Marketing outside campaigns (a MARKETING template): 1 sent, delivered, then a complaint.
    const tpl = await client(api.app, p).post('/templates', {
      name: 'm',
      subject: 'S',
      body: '<p>B</p>',
      type: 'MARKETING',
      from: `news@${p.domain}`,
    });
    expect(tpl.status).toBe(201);
    const to = recipient('mk');
    const sent = await client(api.app, p).post('/v1/send', { to, template: tpl.body.data.id, subscribed: true });
    expect(sent.status).toBe(202);
    const id = sent.body.data.emails[0].email as string;
    const m1 = { id, to, messageId: await markSent(api.database.db, id) };
    await event('Delivery', m1);
    await event('Complaint', m1);
    // A campaign: 2 sent, 1 hard bounce.
    campaignId = await sendingCampaign(p, 'Streams');
    const c = await sentCampaignEmails(api.database.db, { projectId: p.id, campaignId, from: `news@${p.domain}` }, 2);
    await event('Bounce', c[0], { bounceType: 'Permanent' });
  });

  const zero = {
    sent: 0,
    delivered: 0,
    hardBounces: 0,
    softBounces: 0,
    complaints: 0,
    hardBounceRate: null,
    complaintRate: null,
    softBounceRate: null,
    deliveryRate: null,
  };

  test('every window splits its figures by stream: campaigns and MARKETING templates are marketing, the rest transactional', async () => {
    const res = await client(api.app, p).get('/reputation');
    expect(res.status).toBe(200);
    expect(res.body.data.stream).toBeNull();
    for (const w of [res.body.data.last24h, res.body.data.last7d]) {
      expect(w.overall).toMatchObject({ sent: 5, delivered: 2, hardBounces: 1, complaints: 1 });
      expect(w.streams.transactional).toEqual({
        sent: 2,
        delivered: 1,
        hardBounces: 0,
        softBounces: 0,
        complaints: 0,
        hardBounceRate: 0,
        complaintRate: 0,
        softBounceRate: 0,
        deliveryRate: 1 / 2,
      });
      expect(w.streams.marketing).toEqual({
        sent: 3,
        delivered: 1,
        hardBounces: 1,
        softBounces: 0,
        complaints: 1,
        hardBounceRate: 1 / 3,
        complaintRate: 1 / 3,
        softBounceRate: 0,
        deliveryRate: 1 / 3,
      });
      // Marketing mail outside campaigns is no campaign of the list.
      expect(w.campaigns.map((c: { campaignId: string }) => c.campaignId)).toEqual([campaignId]);
    }
  });

  test('?stream= narrows every figure to one stream', async () => {
    const mk = (await client(api.app, p).get('/reputation?stream=marketing')).body.data;
    expect(mk.stream).toBe('marketing');
    expect(mk.last24h.overall).toMatchObject({ sent: 3, delivered: 1, hardBounces: 1, complaints: 1 });
    expect(mk.last24h.streams.transactional).toEqual(zero);
    expect(mk.last24h.domains).toEqual([expect.objectContaining({ domain: p.domain, sent: 3 })]);
    expect(mk.last24h.campaigns).toEqual([expect.objectContaining({ campaignId, sent: 2 })]);
    const tx = (await client(api.app, p).get('/reputation?stream=transactional')).body.data;
    expect(tx.last24h.overall).toMatchObject({ sent: 2, delivered: 1, hardBounces: 0, complaints: 0 });
    expect(tx.last24h.streams.marketing).toEqual(zero);
    expect(tx.last24h.campaigns).toEqual([]);
    expect(tx.last24h.connections).toEqual([expect.objectContaining({ connection: 'default', sent: 2 })]);
  });

  test('an unknown stream is 400 INVALID_PARAMETERS naming the parameter (as every malformed query parameter)', async () => {
    const res = await client(api.app, p).get('/reputation?stream=bulk');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('INVALID_PARAMETERS');
    expect(JSON.stringify(res.body.error)).toContain('stream');
  });

  test("tenant isolation: another project's streams are its own (none)", async () => {
    const other = await createTestProject(api.database);
    const w = (await client(api.app, other).get('/reputation?stream=marketing')).body.data.last24h;
    expect(w.overall).toEqual(zero);
    expect(w.streams).toEqual({ transactional: zero, marketing: zero });
  });
});

describe('test data never counts', () => {
  test('test-key sends and their SNS feedback leave reputation_counts, GET /reputation, /metrics and the quota count unchanged', async () => {
    const created = await createProject(api.database.db, 'test data reputation');
    const domain = `tdr-${Date.now()}.example.com`;
    await addDomain(api.database.db, created.id, domain, true);
    const testKey: TestProject = {
      id: created.id,
      publicKey: created.testPublicKey,
      secretKey: created.testSecretKey,
      domain,
      auth: `Bearer ${created.testSecretKey}`,
    };
    const live: TestProject = {
      ...testKey,
      publicKey: created.publicKey,
      secretKey: created.secretKey,
      auth: `Bearer ${created.secretKey}`,
    };
    const totals = async () =>
      (
        await api.database.db.execute<Record<string, number>>(sql`
        select count(*)::int as rows, coalesce(sum(sent), 0)::int as sent, coalesce(sum(delivered), 0)::int as delivered,
          coalesce(sum(hard_bounces), 0)::int as hard, coalesce(sum(soft_bounces), 0)::int as soft, coalesce(sum(complaints), 0)::int as complaints
        from reputation_counts`)
      ).rows[0];
    const quota = async () => ({
      last24h: await sentInLast24Hours(api.database.db),
      sinceHour: (await sentSinceHour(api.database.db)).sent,
    });
    const metrics = async () =>
      (await request(api.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).text;
    const [countsBefore, quotaBefore] = [await totals(), await quota()];

    // Transactional test emails, recorded as sent the way the worker records any email, then SES-shaped feedback
    // for each (a test email never reaches SES, but a forged or replayed notification must not count either).
    const sent = [
      await sentTransactional(testKey, `tx@${domain}`),
      await sentTransactional(testKey, `tx@${domain}`),
      await sentTransactional(testKey, `tx@${domain}`),
    ];
    for (const e of sent)
      expect(
        (await api.database.db.execute<{ test: boolean }>(sql`select test from emails where id = ${e.id}::uuid`))
          .rows[0].test,
      ).toBe(true);
    await event('Delivery', sent[0]);
    await event('Complaint', sent[0]);
    await event('Bounce', sent[1], { bounceType: 'Permanent' });
    await event('Bounce', sent[2], { bounceType: 'Transient' });
    // A test campaign's emails (its fan-out writes test rows), sent and bounced.
    await client(api.app, live)
      .post('/contacts', { email: recipient('tdr'), subscribed: true })
      .expect(201);
    const campaignId = await sendingCampaign(testKey, 'Test news');
    expect(
      (await api.database.db.execute<{ test: boolean }>(sql`select test from campaigns where id = ${campaignId}::uuid`))
        .rows[0].test,
    ).toBe(true);
    const rows = await api.database.db.execute<{ id: string; to_email: string }>(sql`
      insert into emails (id, project_id, campaign_id, marketing, source, to_email, from_email, subject, status, test)
      select gen_random_uuid(), ${created.id}::uuid, ${campaignId}::uuid, true, 'campaign', t, ${`news@${domain}`}, 'S', 'queued', true
      from unnest(${sql.param([recipient('tdr'), recipient('tdr')])}::text[]) as t
      returning id, to_email`);
    for (const r of rows.rows)
      await event(
        'Bounce',
        { emailId: r.id, to: r.to_email, messageId: await markSent(api.database.db, r.id) },
        { bounceType: 'Permanent' },
      );

    expect(await totals()).toEqual(countsBefore);
    expect(await quota()).toEqual(quotaBefore);
    for (const as of [testKey, live]) {
      const rep = (await client(api.app, as).get('/reputation')).body.data;
      for (const w of [rep.last24h, rep.last7d]) {
        expect(w.overall).toEqual({
          sent: 0,
          delivered: 0,
          hardBounces: 0,
          softBounces: 0,
          complaints: 0,
          hardBounceRate: null,
          complaintRate: null,
          softBounceRate: null,
          deliveryRate: null,
        });
        expect(w.domains).toEqual([]);
        expect(w.campaigns).toEqual([]);
      }
    }
    expect(await metrics()).not.toContain(created.id);
    // The test campaign was judged on nothing: still SENDING, not paused by its 100% bounces.
    expect(
      (
        await api.database.db.execute<{ status: string }>(
          sql`select status from campaigns where id = ${campaignId}::uuid`,
        )
      ).rows[0].status,
    ).toBe('SENDING');
  });
});

test('/metrics still answers while Postgres cannot be read: the reputation series are left out and up is 0', async () => {
  const broken = await startTestApi(loadConfig(testEnv({ DATABASE_URL: 'postgres://postgres@127.0.0.1:1/nowhere' })));
  try {
    const res = await request(broken.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`);
    expect(res.status).toBe(200);
    expect(res.text).toMatch(/^mailroom_reputation_up 0$/m);
    expect(res.text).not.toMatch(/^mailroom_reputation_emails\{/m);
    expect(res.text).toContain('# HELP mailroom_reputation_emails');
    expect(res.text).toContain('mailroom_http_requests_total');
  } finally {
    await broken.close();
  }
});

describe('/metrics reputation cache (REPUTATION_METRICS_TTL_MS)', () => {
  /** The value of one series in a metrics text, NaN when absent. */
  const valueIn = (text: string, series: string) =>
    Number(new RegExp(`^${series.replace(/[{}"]/g, (c) => `\\${c}`)} (\\S+)$`, 'm').exec(text)?.[1] ?? NaN);
  const sentOf = (text: string, projectId: string) =>
    valueIn(text, `mailroom_reputation_emails{project="${projectId}",window="24h",outcome="sent"}`);
  /** Puts `sent` emails in the current hour's bucket of a fresh project (replacing what was there). */
  const setSent = async (projectId: string, domain: string, sent: number) => {
    await api.database.db.execute(sql`
      insert into reputation_counts (project_id, hour, domain, campaign_id, sent)
      values (${projectId}::uuid, date_trunc('hour', now() at time zone 'UTC') at time zone 'UTC', ${domain}, '00000000-0000-0000-0000-000000000000', ${sent})
      on conflict (project_id, hour, domain, campaign_id) do update set sent = excluded.sent`);
  };

  test('the API serves one read for the TTL (default 60 s): figures written meanwhile show only after it', async () => {
    expect(loadConfig(testEnv()).reputationMetricsTtlMs).toBe(60_000);
    expect(() => loadConfig(testEnv({ REPUTATION_METRICS_TTL_MS: '-1' }))).toThrow(/REPUTATION_METRICS_TTL_MS/);
    const cachedApi = await startTestApi(
      loadConfig(testEnv({ DATABASE_URL: iso.url, REPUTATION_METRICS_TTL_MS: '600000' })),
    );
    try {
      const p = await createTestProject(api.database);
      await setSent(p.id, p.domain, 5);
      const scrape = async () =>
        (await request(cachedApi.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`).expect(200)).text;
      const first = await scrape();
      expect(sentOf(first, p.id)).toBe(5);
      await setSent(p.id, p.domain, 7);
      const second = await scrape();
      expect(sentOf(second, p.id)).toBe(5);
      expect(valueIn(second, 'mailroom_reputation_up')).toBe(1);
      // The API with TTL 0 reads afresh.
      expect(
        sentOf((await request(api.app).get('/metrics').set('Authorization', `Bearer ${ADMIN_TOKEN}`)).text, p.id),
      ).toBe(7);
    } finally {
      await cachedApi.close();
    }
  });

  /** The gauges on a registry of their own, over a database handle that counts (and can hold or fail) its queries. */
  function instrumented(ttlMs: number) {
    const state = { queries: 0, clock: 1_000_000, failNext: false, gate: undefined as Promise<void> | undefined };
    const real = api.database.db;
    const db = new Proxy(real, {
      get(target, key, receiver) {
        if (key !== 'execute') return Reflect.get(target, key, receiver) as unknown;
        return async (...args: Parameters<Db['execute']>) => {
          state.queries++;
          if (state.gate) await state.gate;
          if (state.failNext) {
            state.failNext = false;
            throw new Error('connection terminated unexpectedly');
          }
          return target.execute(...args);
        };
      },
    });
    const registry = new Registry();
    registerReputationMetrics(registry, db, createLogger(api.config, 'test'), { ttlMs, now: () => state.clock });
    // Each scrape in a turn of the event loop of its own, as HTTP scrapes are (the gauges of one scrape share a turn's snapshot).
    return { state, scrape: async () => (await new Promise((r) => setImmediate(r)), registry.metrics()) };
  }

  test('concurrent scrapes share one query; within the TTL no query at all (up as at the read); after it one more', async () => {
    const p = await createTestProject(api.database);
    await setSent(p.id, p.domain, 11);
    const { state, scrape } = instrumented(60_000);
    let open!: () => void;
    state.gate = new Promise<void>((resolve) => (open = resolve));
    // Three scrapes started turns of the event loop apart while the first one's read is still in flight.
    const turns = async (n: number) => {
      for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
    };
    const scrapes = [scrape()];
    await waitFor(async () => state.queries > 0);
    await turns(3);
    scrapes.push(scrape());
    await turns(3);
    scrapes.push(scrape());
    await turns(3);
    expect(state.queries).toBe(1);
    open();
    state.gate = undefined;
    const texts = await Promise.all(scrapes);
    expect(state.queries).toBe(1);
    for (const text of texts) {
      expect(sentOf(text, p.id)).toBe(11);
      expect(valueIn(text, 'mailroom_reputation_up')).toBe(1);
    }

    // Within the TTL: cached figures, no query, even with Postgres failing meanwhile.
    await setSent(p.id, p.domain, 12);
    state.failNext = true;
    state.clock += 59_999;
    const cached = await scrape();
    expect(state.queries).toBe(1);
    expect(sentOf(cached, p.id)).toBe(11);
    expect(valueIn(cached, 'mailroom_reputation_up')).toBe(1);

    // TTL over: one read (this one fails: up 0, no series rather than stale ones), and a failure is not cached.
    state.clock += 1;
    const failed = await scrape();
    expect(state.queries).toBe(2);
    expect(valueIn(failed, 'mailroom_reputation_up')).toBe(0);
    expect(failed).not.toMatch(/^mailroom_reputation_emails\{/m);
    const fresh = await scrape();
    expect(state.queries).toBe(3);
    expect(sentOf(fresh, p.id)).toBe(12);
    expect(valueIn(fresh, 'mailroom_reputation_up')).toBe(1);
  });

  test('TTL 0: every scrape reads, and the gauges of one scrape share its read', async () => {
    const p = await createTestProject(api.database);
    await setSent(p.id, p.domain, 3);
    const { state, scrape } = instrumented(0);
    expect(sentOf(await scrape(), p.id)).toBe(3);
    expect(state.queries).toBe(1);
    await setSent(p.id, p.domain, 4);
    expect(sentOf(await scrape(), p.id)).toBe(4);
    expect(state.queries).toBe(2);
  });
});
