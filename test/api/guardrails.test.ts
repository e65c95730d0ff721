/**
 * The campaign guardrails without a worker: the operator's per-project settings (`GET/PUT
 * /admin/projects/{id}/guardrails` and the CLI's `project guardrails`, 4xx naming the field), and the auto-pause
 * driven by signed SES events through the real `/webhooks/ses` route: nothing judged below the minimum sample,
 * PAUSED with the rates in `pause_details`, the timeline and a `campaign.paused` delivery, the re-arm after a
 * resume (the bounces that paused it do not pause it again; new ones over the threshold do), the complaint rate,
 * campaigns that are not SENDING left alone, and each project judged by its own settings.
 *
 * Runs on a database of its own: the campaigns here stay SENDING with no worker, and another file's worker
 * reconciler would adopt them on the shared database.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { AppError } from '@mailroom/platform/errors';
import { DEFAULT_GUARDRAILS } from '@mailroom/audiences/guardrail-defaults';
import { loadConfig } from '@mailroom/config/config';
import { runCli } from '../../apps/api/src/cli';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  isolatedDatabase,
  startTestApi,
  testEnv,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';
import { sentCampaignEmails, type SentEmail } from '../support/sent-emails';

let iso: { url: string; drop: () => Promise<void> };
let sns: SnsHarness;
let api: TestApi;
let env: Record<string, string>;
beforeAll(async () => {
  iso = await isolatedDatabase();
  sns = await startSnsHarness();
  env = testEnv({
    DATABASE_URL: iso.url,
    SNS_TOPIC_ARNS: sns.topicArn,
    SNS_CERT_HOSTS: sns.certHost,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
  });
  api = await startTestApi(loadConfig(env));
});
afterAll(async () => {
  await api.close();
  await sns.close();
  await iso.drop();
});

const admin = {
  get: (path: string) => request(api.app).get(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
  put: (path: string, body: object) =>
    request(api.app).put(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
};
const event = async (...args: Parameters<typeof sesEvent>) => {
  const res = await request(api.app)
    .post('/webhooks/ses')
    .set('Content-Type', 'text/plain; charset=UTF-8')
    .send(JSON.stringify(sns.notification(sesEvent(...args))));
  expect(res.status).toBe(200);
};
const campaignRow = async (id: string) =>
  (
    await api.database.db.execute<{
      status: string;
      paused_reason: string | null;
      pause_details: Record<string, unknown> | null;
    }>(sql`select status, paused_reason, pause_details from campaigns where id = ${id}::uuid`)
  ).rows[0];
const hooks = async (projectId: string, type: string) =>
  (
    await api.database.db.execute<{ payload: { data: Record<string, unknown> } }>(
      sql`select payload from webhook_deliveries where project_id = ${projectId}::uuid and event_type = ${type} order by id`,
    )
  ).rows.map((r) => r.payload);

async function sendingCampaign(p: TestProject): Promise<string> {
  const as = client(api.app, p);
  const created = await as.post('/campaigns', {
    name: 'Guarded',
    subject: 'News',
    body: '<p>News</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect((await as.post(`/campaigns/${created.body.data.id}/send`, {})).status).toBe(200);
  return created.body.data.id as string;
}

describe('admin settings', () => {
  test('GET shows the defaults until set; PUT sets, null clears, a field left out keeps its value', async () => {
    const p = await createTestProject(api.database);
    const path = `/admin/projects/${p.id}/guardrails`;
    const first = await admin.get(path);
    expect(first.status).toBe(200);
    expect(first.body.data).toEqual({
      projectId: p.id,
      overrides: { minSample: null, maxHardBounceRate: null, maxComplaintRate: null },
      effective: DEFAULT_GUARDRAILS,
      defaults: DEFAULT_GUARDRAILS,
    });
    const set = await admin.put(path, { minSample: 20, maxHardBounceRate: 0.1 });
    expect(set.status).toBe(200);
    expect(set.body.data.effective).toEqual({
      minSample: 20,
      maxHardBounceRate: 0.1,
      maxComplaintRate: DEFAULT_GUARDRAILS.maxComplaintRate,
    });
    const partial = await admin.put(path, { maxComplaintRate: 0, minSample: null });
    expect(partial.body.data.overrides).toEqual({ minSample: null, maxHardBounceRate: 0.1, maxComplaintRate: 0 });
    expect(partial.body.data.effective).toEqual({
      minSample: DEFAULT_GUARDRAILS.minSample,
      maxHardBounceRate: 0.1,
      maxComplaintRate: 0,
    });
    expect((await admin.get(path)).body.data.overrides).toEqual({
      minSample: null,
      maxHardBounceRate: 0.1,
      maxComplaintRate: 0,
    });
    await admin.put(path, { maxHardBounceRate: null, maxComplaintRate: null });
    const stored = await api.database.db.execute<{ guardrails: unknown }>(
      sql`select guardrails from projects where id = ${p.id}::uuid`,
    );
    expect(stored.rows[0].guardrails).toBeNull();
  });

  test('invalid values are 422 naming the field; nothing changes', async () => {
    const p = await createTestProject(api.database);
    const path = `/admin/projects/${p.id}/guardrails`;
    for (const [body, field] of [
      [{ maxHardBounceRate: 1.5 }, 'maxHardBounceRate'],
      [{ maxHardBounceRate: -0.01 }, 'maxHardBounceRate'],
      [{ maxComplaintRate: '0.1' }, 'maxComplaintRate'],
      [{ minSample: 0 }, 'minSample'],
      [{ minSample: 2.5 }, 'minSample'],
      [{ maxRate: 0.1 }, 'maxRate'],
    ] as const) {
      const res = await admin.put(path, body);
      expect({ body, status: res.status }).toEqual({ body, status: 422 });
      expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await admin.get(path)).body.data.effective).toEqual(DEFAULT_GUARDRAILS);
  });

  test('admin token required; unknown project 404; malformed id 400', async () => {
    const p = await createTestProject(api.database);
    expect((await request(api.app).get(`/admin/projects/${p.id}/guardrails`)).status).toBe(401);
    expect(
      (
        await request(api.app)
          .put(`/admin/projects/${p.id}/guardrails`)
          .set('Authorization', p.auth)
          .send({ minSample: 5 })
      ).status,
    ).toBe(401);
    expect((await admin.get('/admin/projects/00000000-0000-7000-8000-000000000000/guardrails')).status).toBe(404);
    expect(
      (await admin.put('/admin/projects/00000000-0000-7000-8000-000000000000/guardrails', { minSample: 5 })).status,
    ).toBe(404);
    expect((await admin.get('/admin/projects/nope/guardrails')).status).toBe(400);
  });

  test('CLI: project guardrails shows, sets and clears; a bad value names the setting', async () => {
    const p = await createTestProject(api.database);
    const cli = (...args: string[]) =>
      runCli(['project', 'guardrails', '--project', p.id, ...args], env) as Promise<{
        effective: object;
        overrides: object;
      }>;
    expect((await cli()).effective).toEqual(DEFAULT_GUARDRAILS);
    expect((await cli('--min-sample', '30', '--max-complaint-rate', '.002')).effective).toEqual({
      ...DEFAULT_GUARDRAILS,
      minSample: 30,
      maxComplaintRate: 0.002,
    });
    expect((await cli('--min-sample', 'default')).overrides).toEqual({
      minSample: null,
      maxHardBounceRate: null,
      maxComplaintRate: 0.002,
    });
    const err = await cli('--max-hard-bounce-rate', 'lots').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AppError);
    expect((err as AppError).statusCode).toBe(422);
    expect((err as AppError).message).toMatch(/^maxHardBounceRate: must be a fraction from 0 to 1/);
  });
});

describe('auto-pause from SES events', () => {
  test('crossing the hard-bounce rate after the minimum sample pauses the campaign, with the figures everywhere', async () => {
    const p = await createTestProject(api.database);
    await admin.put(`/admin/projects/${p.id}/guardrails`, { minSample: 10, maxHardBounceRate: 0.2 }).expect(200);
    const endpoint = await client(api.app, p).post('/webhooks/endpoints', {
      url: 'http://127.0.0.1:9/hooks',
      eventTypes: ['campaign.*'],
    });
    expect(endpoint.status).toBe(201);
    const id = await sendingCampaign(p);
    const sent = await sentCampaignEmails(
      api.database.db,
      { projectId: p.id, campaignId: id, from: `news@${p.domain}` },
      23,
    );
    const feed = async (list: SentEmail[], kind: 'Delivery' | 'Bounce') => {
      for (const e of list) await event(kind, e, { bounceType: 'Permanent' });
    };

    // 3 hard bounces then 6 deliveries: 9 outcomes, below the sample, so 33 % is not judged yet.
    await feed(sent.slice(0, 3), 'Bounce');
    await feed(sent.slice(3, 9), 'Delivery');
    expect((await campaignRow(id)).status).toBe('SENDING');
    // The 10th outcome completes the sample: 3/10 = 30 % > 20 %. A delivery can be the one that trips it.
    await feed(sent.slice(9, 10), 'Delivery');
    const paused = await campaignRow(id);
    expect(paused).toMatchObject({ status: 'PAUSED', paused_reason: 'bounce_rate' });
    const figures = {
      hardBounceRate: 0.3,
      complaintRate: 0,
      outcomes: 10,
      hardBounces: 3,
      complaints: 0,
      delivered: 7,
      threshold: 0.2,
      minSample: 10,
    };
    expect(paused.pause_details).toEqual({ ...figures, sinceResume: false });
    const timeline = (await client(api.app, p).get(`/campaigns/${id}/timeline`)).body.data.data;
    expect(timeline).toEqual([
      expect.objectContaining({ type: 'paused', data: { reason: 'bounce_rate', ...figures, sinceResume: false } }),
    ]);
    expect(await hooks(p.id, 'campaign.paused')).toEqual([
      expect.objectContaining({ data: { campaignId: id, reason: 'bounce_rate', ...figures, sinceResume: false } }),
    ]);
    // More events while paused change nothing (no second pause, no second webhook).
    await feed(sent.slice(10, 11), 'Bounce');
    expect(await hooks(p.id, 'campaign.paused')).toHaveLength(1);

    // Resume: the guardrail counts from here (baseline: 7 delivered, 4 hard bounces so far).
    const resumed = await client(api.app, p).post(`/campaigns/${id}/resume`, {});
    expect(resumed.status).toBe(200);
    const entry = (await client(api.app, p).get(`/campaigns/${id}/timeline`)).body.data.data[1];
    expect(entry).toMatchObject({
      type: 'resumed',
      data: {
        previousReason: 'bounce_rate',
        baseline: { delivered: 7, hardBounces: 4, softBounces: 0, complaints: 0 },
      },
    });
    // One more bounce: 5/12 over all, but 1 outcome since the resume: not judged. Then 9 deliveries: 1/10 = 10 %.
    await feed(sent.slice(11, 12), 'Bounce');
    await feed(sent.slice(12, 21), 'Delivery');
    expect((await campaignRow(id)).status).toBe('SENDING');
    // Two more bounces: 3/12 = 25 % since the resume: paused again.
    await feed(sent.slice(21, 23), 'Bounce');
    const again = await campaignRow(id);
    expect(again).toMatchObject({ status: 'PAUSED', paused_reason: 'bounce_rate' });
    expect(again.pause_details).toMatchObject({
      outcomes: 12,
      hardBounces: 3,
      delivered: 9,
      hardBounceRate: 0.25,
      sinceResume: true,
    });
    expect((await hooks(p.id, 'campaign.paused')).length).toBe(2);
    expect((await hooks(p.id, 'campaign.resumed')).length).toBe(1);
  });

  test('the complaint rate pauses too; soft bounces dilute but never trip it', async () => {
    const p = await createTestProject(api.database);
    await admin
      .put(`/admin/projects/${p.id}/guardrails`, { minSample: 5, maxComplaintRate: 0.1, maxHardBounceRate: 0 })
      .expect(200);
    const id = await sendingCampaign(p);
    const sent = await sentCampaignEmails(
      api.database.db,
      { projectId: p.id, campaignId: id, from: `news@${p.domain}` },
      6,
    );
    for (const e of sent.slice(0, 2)) await event('Bounce', e, { bounceType: 'Transient' });
    for (const e of sent.slice(2, 6)) await event('Delivery', e);
    expect((await campaignRow(id)).status).toBe('SENDING');
    await event('Complaint', sent[2]);
    const row = await campaignRow(id);
    expect(row).toMatchObject({ status: 'PAUSED', paused_reason: 'complaint_rate' });
    expect(row.pause_details).toMatchObject({ complaintRate: 1 / 6, outcomes: 6, complaints: 1, threshold: 0.1 });
  });

  test('a campaign that is not SENDING (cancelled) is left alone', async () => {
    const p = await createTestProject(api.database);
    await admin.put(`/admin/projects/${p.id}/guardrails`, { minSample: 1, maxHardBounceRate: 0 }).expect(200);
    const id = await sendingCampaign(p);
    const [e] = await sentCampaignEmails(
      api.database.db,
      { projectId: p.id, campaignId: id, from: `news@${p.domain}` },
      1,
    );
    expect((await client(api.app, p).post(`/campaigns/${id}/cancel`, {})).status).toBe(200);
    await event('Bounce', e, { bounceType: 'Permanent' });
    expect(await campaignRow(id)).toMatchObject({ status: 'CANCELLED', paused_reason: null });
    expect((await client(api.app, p).get(`/campaigns/${id}/timeline`)).body.data.data).toEqual([]);
  });

  test("another project's guardrails do not apply", async () => {
    const strict = await createTestProject(api.database);
    const lenient = await createTestProject(api.database);
    await admin.put(`/admin/projects/${strict.id}/guardrails`, { minSample: 1, maxHardBounceRate: 0 }).expect(200);
    const id = await sendingCampaign(lenient);
    const sent = await sentCampaignEmails(
      api.database.db,
      { projectId: lenient.id, campaignId: id, from: `news@${lenient.domain}` },
      3,
    );
    for (const e of sent) await event('Bounce', e, { bounceType: 'Permanent' });
    // 3 outcomes: below the default sample of the lenient project.
    expect((await campaignRow(id)).status).toBe('SENDING');
  });
});
