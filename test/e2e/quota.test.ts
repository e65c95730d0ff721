/**
 * The SES 24-hour quota, end to end with the local account provider (the emulator has no `GetAccount`): a quota of
 * 60 with the default 5% reserve pauses a 100-recipient campaign (reason `quota`) once 57 are sent; transactional
 * mail still goes out while it is paused and the campaign sends nothing more; a campaign paused for its bounce
 * rate is not the quota's to resume. A worker restarted with a quota of 1,000 resumes the campaign, which
 * finishes with every recipient sent exactly once. And the send rate follows the account's at a refresh, without
 * a restart.
 *
 * Own database: the local provider counts every live send of its database.
 */
import { sql } from 'drizzle-orm';
import { loadConfig, type Config } from '@mailroom/config/config';
import { pauseCampaign } from '@mailroom/campaigns/queries/campaign-pause';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';
import {
  client,
  createTestProject,
  isolatedDatabase,
  recipient,
  sesSendsTo,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { transactionalProbe } from '../support/transactional-probe';

let iso: { url: string; drop: () => Promise<void> };
let env: Record<string, string>;
let api: TestApi;
let worker: RunningWorker | undefined;

beforeAll(async () => {
  iso = await isolatedDatabase();
  env = testEnv({
    DATABASE_URL: iso.url,
    SES_ACCOUNT_PROVIDER: 'local',
    SES_LOCAL_MAX_24H_SEND: '60',
    SES_MAX_SEND_RATE: '20',
    SES_QUOTA_CHECK_MS: '200',
    CAMPAIGN_TICK_MS: '100',
  });
  api = await startTestApi(loadConfig(env));
});
afterAll(async () => {
  await worker?.stop();
  await api.close();
  await iso.drop();
});

async function seed(projectId: string, n: number, tag: string): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient(tag));
  await api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${projectId}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
  return to;
}

async function createCampaign(p: TestProject): Promise<string> {
  const created = await client(api.app, p).post('/campaigns', {
    name: 'q',
    subject: 'News',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  return created.body.data.id as string;
}

const campaign = async (p: TestProject, id: string) =>
  (await client(api.app, p).get(`/campaigns/${id}`)).body.data as { status: string; pausedReason?: string | null };
const campaignRow = async (id: string) =>
  (
    await api.database.db.execute<{
      status: string;
      paused_reason: string | null;
      pause_details: Record<string, unknown> | null;
    }>(sql`select status, paused_reason, pause_details from campaigns where id = ${id}::uuid`)
  ).rows[0];

/** Sends one transactional email and waits until SES has it; @returns when SES got it. */
async function transactional(p: TestProject): Promise<number> {
  return (await transactionalProbe(api.app, p, 'otp')).send.at;
}

test('a campaign pauses for the quota near 57 of 60, transactional mail goes on, and a raised quota resumes it to the end, everyone once', async () => {
  const config: Config = loadConfig(env);
  worker = await startWorker(config, { healthPort: null });
  const p = await createTestProject(api.database);
  const to = await seed(p.id, 100, 'quota');

  // A campaign paused for its bounce rate, to show the quota watcher leaves it alone.
  const other = await createTestProject(api.database);
  await seed(other.id, 3, 'bounced');
  const bounced = await createCampaign(other);
  await api.database.db.execute(
    sql`update campaigns set status = 'SENDING', started_at = now() where id = ${bounced}::uuid`,
  );
  await api.database.db.transaction((tx) => pauseCampaign(tx, bounced, 'bounce_rate', { hardBounceRate: 0.2 }));

  const id = await createCampaign(p);
  expect((await client(api.app, p).post(`/campaigns/${id}/send`, {})).status).toBe(200);
  const started = Date.now();
  await waitFor(
    async () => ((await campaignRow(id)).status === 'PAUSED' ? true : undefined),
    30_000,
    'campaign PAUSED',
  );
  const pausedAfterMs = Date.now() - started;
  const row = await campaignRow(id);
  expect(row.paused_reason).toBe('quota');
  expect(row.pause_details).toMatchObject({ max24HourSend: 60, pauseAt: 57, reserve: 0.05 });
  expect(row.pause_details!.sentLast24Hours as number).toBeGreaterThanOrEqual(57);
  expect((await campaign(p, id)).status).toBe('PAUSED');

  // The campaign emails claimed before the pause finish; after that, none is sent while transactional mail,
  // sent now, still goes out.
  const inFlight = async () =>
    (
      await api.database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'sending'`,
      )
    ).rows[0].n;
  await waitFor(async () => ((await inFlight()) === 0 ? true : undefined), 20_000, 'no campaign email in flight');
  const atPause = (await sesSendsTo(to)).length;
  await transactional(p);
  await transactional(p);
  expect((await sesSendsTo(to)).length).toBe(atPause);
  expect(atPause).toBeGreaterThanOrEqual(57);
  // The check runs every 200 ms at 20/s, plus the sends already claimed: a handful over the line, never the lot.
  expect(atPause).toBeLessThanOrEqual(75);
  const queued = (
    await api.database.db.execute<{ n: number }>(
      sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'queued'`,
    )
  ).rows[0].n;
  expect(queued).toBe(100 - atPause);
  // The worker's metrics show the account's figures and the estimate of the 24-hour count.
  const metrics = await worker.metrics.registry.metrics();
  expect(metrics).toMatch(/^mailroom_send_rate\{connection="default"\} 20$/m);
  expect(metrics).toMatch(/^mailroom_ses_max_24h_send\{connection="default"\} 60$/m);
  expect(metrics).toMatch(/^mailroom_ses_quota_pause_at\{connection="default"\} 57$/m);
  expect(metrics).toMatch(/^mailroom_ses_account_read_ok\{connection="default"\} 1$/m);
  expect(
    Number(/^mailroom_ses_sent_last_24h\{connection="default"\} (\d+)$/m.exec(metrics)?.[1]),
  ).toBeGreaterThanOrEqual(atPause + 2);
  const timeline = (await client(api.app, p).get(`/campaigns/${id}/timeline`)).body.data.data as {
    type: string;
    data: Record<string, unknown>;
  }[];
  expect(timeline[0]).toMatchObject({ type: 'paused', data: { reason: 'quota', max24HourSend: 60 } });

  // The quota is raised: a worker started with 1,000 reads it at start and the next check resumes the campaign.
  await worker.stop();
  const restartedAt = Date.now();
  worker = await startWorker(loadConfig({ ...env, SES_LOCAL_MAX_24H_SEND: '1000' }), { healthPort: null });
  await waitFor(async () => ((await campaignRow(id)).status === 'SENT' ? true : undefined), 30_000, 'campaign SENT');
  const resumedInMs = Date.now() - restartedAt;
  const sends = await sesSendsTo(to);
  const perRecipient = new Map<string, number>();
  for (const s of sends) perRecipient.set(s.to[0].toLowerCase(), (perRecipient.get(s.to[0].toLowerCase()) ?? 0) + 1);
  expect(perRecipient.size).toBe(100);
  expect([...perRecipient.values()].every((n) => n === 1)).toBe(true);
  const after = (await client(api.app, p).get(`/campaigns/${id}/timeline`)).body.data.data as {
    type: string;
    data: Record<string, unknown>;
  }[];
  expect(after.map((e) => e.type)).toEqual(['paused', 'resumed']);
  expect(after[1].data).toMatchObject({ previousReason: 'quota', by: 'quota' });
  // The campaign paused for its bounce rate is still paused: only its owner resumes it.
  expect(await campaignRow(bounced)).toMatchObject({ status: 'PAUSED', paused_reason: 'bounce_rate' });
  console.log(
    `quota: paused ${pausedAfterMs} ms after the start with ${atPause} of 100 sent (quota 60, pause at 57); ` +
      `2 transactional emails sent while paused; resumed and SENT ${resumedInMs} ms after a restart with a quota of 1,000; 100 recipients, each once`,
  );
}, 120_000);

test('the send rate follows the account at a refresh, without a restart (rate gate and limiter)', async () => {
  await worker?.stop();
  // A provider whose maximum send rate the test changes, read every 200 ms; no SES_MAX_SEND_RATE cap.
  const account = {
    kind: 'ses' as const,
    maxSendRate: 40,
    getAccount() {
      return Promise.resolve({
        maxSendRate: account.maxSendRate,
        max24HourSend: 1_000_000,
        sentLast24Hours: 0,
        sendingEnabled: true,
        readAt: new Date(),
      });
    },
  };
  worker = await startWorker(loadConfig({ ...env, SES_MAX_SEND_RATE: '', SES_ACCOUNT_REFRESH_MS: '200' }), {
    healthPort: null,
    account,
  });
  const running = worker;
  expect(running.worker.opts.limiter).toEqual({ max: 1, duration: 25 });
  account.maxSendRate = 4;
  await waitFor(
    async () => (running.worker.opts.limiter?.duration === 250 ? true : undefined),
    10_000,
    'limiter at 4/s',
  );
  expect(await running.metrics.registry.metrics()).toMatch(/^mailroom_send_rate\{connection="default"\} 4$/m);

  const p = await createTestProject(api.database);
  const to = Array.from({ length: 10 }, () => recipient('slow'));
  expect(
    (await client(api.app, p).post('/v1/send', { to, from: `rate@${p.domain}`, subject: 'r', body: '<p>r</p>' }))
      .status,
  ).toBe(202);
  const sends = await waitFor(
    async () => {
      const s = await sesSendsTo(to);
      return s.length === to.length ? s : undefined;
    },
    30_000,
    '10 sends at SES',
  );
  const at = sends.map((s) => s.at).sort((x, y) => x - y);
  const spanMs = at[at.length - 1] - at[0];
  console.log(
    `rate change: 40/s → 4/s at a refresh; 10 sends then took ${spanMs.toFixed(0)} ms (at 40/s: about 225 ms)`,
  );
  // At 4/s (1050 ms windows, 262 ms apart) 10 sends span at least 9 intervals; at 40/s they would take ~0.25 s.
  expect(spanMs).toBeGreaterThan(9 * 262 * 0.8);

  account.maxSendRate = 40;
  await waitFor(
    async () => (running.worker.opts.limiter?.duration === 25 ? true : undefined),
    10_000,
    'limiter back at 40/s',
  );
}, 60_000);

test('a campaign stops at the quota line itself, without waiting for the next quota check', async () => {
  // Own database (the local provider counts every live send in it) and a quota check that never comes during the
  // test: only the check at the send can stop the campaign.
  const own = await isolatedDatabase();
  const ownEnv = { ...env, DATABASE_URL: own.url, SES_QUOTA_CHECK_MS: '3600000' };
  const ownApi = await startTestApi(loadConfig(ownEnv));
  let ownWorker: RunningWorker | undefined;
  try {
    await worker?.stop();
    worker = undefined;
    ownWorker = await startWorker(loadConfig(ownEnv), { healthPort: null });
    const p = await createTestProject(ownApi.database);
    const to = Array.from({ length: 100 }, () => recipient('line'));
    await ownApi.database.db.execute(sql`
      insert into contacts (id, project_id, email, email_key, subscribed, data)
      select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
    const created = await client(ownApi.app, p).post('/campaigns', {
      name: 'line',
      subject: 'News',
      body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    });
    const id = created.body.data.id as string;
    const started = Date.now();
    expect((await client(ownApi.app, p).post(`/campaigns/${id}/send`, {})).status).toBe(200);
    const row = async () =>
      (
        await ownApi.database.db.execute<{
          status: string;
          paused_reason: string | null;
          pause_details: Record<string, unknown> | null;
        }>(sql`select status, paused_reason, pause_details from campaigns where id = ${id}::uuid`)
      ).rows[0];
    await waitFor(
      async () => ((await row()).status === 'PAUSED' ? true : undefined),
      30_000,
      'campaign PAUSED at the send',
    );
    const pausedAfterMs = Date.now() - started;
    expect(await row()).toMatchObject({
      paused_reason: 'quota',
      pause_details: expect.objectContaining({ max24HourSend: 60, pauseAt: 57 }),
    });
    await waitFor(
      async () =>
        (
          await ownApi.database.db.execute<{ n: number }>(
            sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'sending'`,
          )
        ).rows[0].n === 0
          ? true
          : undefined,
      20_000,
      'nothing in flight',
    );
    // Settled: the campaign is paused (its queued rows are never claimed) and nothing is in flight, so what SES has is
    // what the rows say was sent (a row is marked sent after SES took it): wait for the two to agree, not a sleep.
    const { atSes: sent } = await waitFor(
      async () => {
        const atSes = (await sesSendsTo(to)).length;
        const marked = (
          await ownApi.database.db.execute<{ n: number }>(
            sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'sent'`,
          )
        ).rows[0].n;
        return atSes === marked ? { atSes } : undefined;
      },
      20_000,
      'the SES record and the sent rows agree',
    );
    console.log(
      `quota at the send (check every hour): paused ${pausedAfterMs} ms after the start with ${sent} of 100 sent (quota 60, pause at 57)`,
    );
    // One worker process: not one email past the line (before, up to SES_QUOTA_CHECK_MS of sending: here all 100).
    expect(sent).toBe(57);
    const held = (
      await ownApi.database.db.execute<{ n: number }>(
        sql`select count(*)::int as n from emails where campaign_id = ${id}::uuid and status = 'queued'`,
      )
    ).rows[0].n;
    expect(held).toBe(43);
    // Transactional mail still goes out in the reserve.
    const t = recipient('otp');
    expect(
      (
        await client(ownApi.app, p).post('/v1/send', {
          to: t,
          from: `alerts@${p.domain}`,
          subject: 'Code',
          body: '<p>1</p>',
        })
      ).status,
    ).toBe(202);
    await waitFor(
      async () => ((await sesSendsTo([t])).length ? true : undefined),
      20_000,
      'transactional email at SES',
    );
  } finally {
    await ownWorker?.stop();
    await ownApi.close();
    await own.drop();
  }
}, 90_000);
