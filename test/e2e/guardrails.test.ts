/**
 * The bounce guardrail end to end (API → worker → SES emulator → signed SNS events → the campaign pauses → resume
 * → SENT): a campaign of 300 recipients whose project allows 10 % hard bounces after 20 outcomes gets a Permanent
 * bounce for every 4th email as the emails are sent. It pauses with reason `bounce_rate` and the rates in
 * `pause_details`, its timeline and a signed `campaign.paused` webhook; nothing is sent while it is paused (its
 * emails stay queued); after `POST /resume` it finishes SENT with every recipient sent exactly once, the
 * `campaign.resumed` webhook delivered, and the guardrail (re-armed on the outcomes since the resume) quiet under
 * a 5 % bounce rate.
 *
 * Runs on a database of its own: the worker's reconciler adopts every SENDING campaign of its database.
 */
import request from 'supertest';
import { sql } from 'drizzle-orm';
import { ADMIN_TOKEN, client, createTestProject, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';
import { startReceiver, verifyStandardWebhook, type Receiver } from '../support/receiver';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';
import { queuesSettled } from '../support/worker-queues';

const RECIPIENTS = 300;

let sns: SnsHarness;
let receiver: Receiver;
const e2e = useE2e({
  isolated: true,
  env: async () => {
    sns = await startSnsHarness();
    e2e.onTeardown(() => sns.close());
    receiver = await startReceiver();
    e2e.onTeardown(() => receiver.close());
    return {
      SES_MAX_SEND_RATE: '50',
      CAMPAIGN_TICK_MS: '100',
      SNS_TOPIC_ARNS: sns.topicArn,
      SNS_CERT_HOSTS: sns.certHost,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_RETRY_SCHEDULE_MS: '150,150,150',
    };
  },
});

test('a campaign over the bounce threshold pauses, sends nothing while paused, resumes and ends with everyone sent once', async () => {
  const db = e2e.api.database.db;
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  await request(e2e.api.app)
    .put(`/admin/projects/${p.id}/guardrails`)
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .send({ minSample: 20, maxHardBounceRate: 0.1 })
    .expect(200);
  const endpoint = (
    await as.post('/webhooks/endpoints', { url: receiver.url, eventTypes: ['campaign.paused', 'campaign.resumed'] })
  ).body.data;
  const to = Array.from({ length: RECIPIENTS }, () => recipient('guard'));
  await db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
  const created = await as.post('/campaigns', {
    name: 'risky list',
    subject: 'Hello',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  const id = created.body.data.id as string;

  const campaign = async () =>
    (
      await db.execute<{
        status: string;
        paused_reason: string | null;
        pause_details: Record<string, number | boolean> | null;
      }>(sql`select status, paused_reason, pause_details from campaigns where id = ${id}::uuid`)
    ).rows[0];
  const byStatus = async () => {
    const rows = await db.execute<{ status: string; n: number }>(
      sql`select status, count(*)::int as n from emails where campaign_id = ${id}::uuid group by status`,
    );
    return Object.fromEntries(rows.rows.map((r) => [r.status, r.n])) as Record<string, number>;
  };
  // Plays SES: every email the worker has sent gets its event, a Permanent bounce when `bounce(n)` says so.
  const fed = new Set<string>();
  let outcomes = 0;
  const feed = async (bounce: (n: number) => boolean) => {
    const sent = await db.execute<{ id: string; message_id: string; to_email: string }>(sql`
      select id, message_id, to_email from emails where campaign_id = ${id}::uuid and status = 'sent' order by sent_at, id`);
    for (const e of sent.rows) {
      if (fed.has(e.id)) continue;
      fed.add(e.id);
      const kind = bounce(outcomes++) ? 'Bounce' : 'Delivery';
      const m = sns.notification(
        sesEvent(kind, { messageId: e.message_id, to: e.to_email }, { bounceType: 'Permanent' }),
      );
      const res = await request(e2e.api.app)
        .post('/webhooks/ses')
        .set('Content-Type', 'text/plain; charset=UTF-8')
        .send(JSON.stringify(m));
      expect(res.status).toBe(200);
    }
  };

  const started = Date.now();
  expect((await as.post(`/campaigns/${id}/send`, {})).status).toBe(200);
  // 25 % hard bounces: over 10 % as soon as 20 outcomes are in.
  const paused = await waitFor(
    async () => {
      await feed((n) => n % 4 === 0);
      const c = await campaign();
      return c.status === 'PAUSED' && c;
    },
    30_000,
    'campaign PAUSED',
  );
  const pausedAfterMs = Date.now() - started;

  expect(paused.paused_reason).toBe('bounce_rate');
  const details = paused.pause_details!;
  expect(details).toMatchObject({ threshold: 0.1, minSample: 20, complaintRate: 0, complaints: 0, sinceResume: false });
  expect(details.outcomes).toBeGreaterThanOrEqual(20);
  expect(details.hardBounceRate).toBeGreaterThan(0.1);
  expect(details.hardBounceRate).toBeCloseTo(Number(details.hardBounces) / Number(details.outcomes), 12);
  const timeline = (await as.get(`/campaigns/${id}/timeline`)).body.data.data;
  expect(timeline).toEqual([expect.objectContaining({ type: 'paused', data: { reason: 'bounce_rate', ...details } })]);
  const pausedHook = await waitFor(
    async () => receiver.received.find((r) => r.status === 200 && r.body.includes('"campaign.paused"')),
    20_000,
    'campaign.paused webhook',
  );
  expect(verifyStandardWebhook(endpoint.secret, pausedHook)).toBe(true);
  expect(JSON.parse(pausedHook.body)).toMatchObject({
    type: 'campaign.paused',
    data: { campaignId: id, reason: 'bounce_rate', ...details },
  });

  // Emails already claimed when it paused finish; after that nothing moves: no send, the rest stay queued.
  const held = await waitFor(
    async () => {
      const s = await byStatus();
      return !s.sending && s;
    },
    20_000,
    'no email in flight',
  );
  expect(held.queued).toBeGreaterThan(0);
  const atSes = (await sesSendsTo(to)).length;
  // The worker has had its chance once it holds no campaign or send job waiting or active: every send job it was
  // given has met the pause and been put aside (delayed until CAMPAIGN_PAUSE_RECHECK_MS, 60 s), and the campaign's
  // own job waits delayed too. Only then look: nothing moved, nothing reached SES.
  const parked = await queuesSettled(e2e.worker, ['campaign', 'send'], { allowDelayed: true });
  expect(parked.campaign.delayed).toBe(1);
  expect(await byStatus()).toEqual(held);
  expect((await sesSendsTo(to)).length).toBe(atSes);
  expect((await campaign()).status).toBe('PAUSED');
  const sentBeforePause = RECIPIENTS - held.queued;

  // Resume: continues where it stopped. 1 bounce in 20 from here on stays under 10 % (the guardrail counts from
  // the resume, so the bounces that paused it are not held against it again).
  const resumedAt = Date.now();
  const resumed = await as.post(`/campaigns/${id}/resume`, {});
  expect(resumed.status).toBe(200);
  expect(resumed.body.data.status).toBe('SENDING');
  const sinceResume = outcomes;
  await waitFor(
    async () => {
      await feed((n) => (n - sinceResume) % 20 === 0);
      return (await campaign()).status === 'SENT';
    },
    45_000,
    'campaign SENT',
  );
  const finishedAfterMs = Date.now() - resumedAt;

  const accepted = (await sesSendsTo(to)).map((s) => s.to[0].toLowerCase());
  const perRecipient = new Map<string, number>();
  for (const a of accepted) perRecipient.set(a, (perRecipient.get(a) ?? 0) + 1);
  expect(perRecipient.size).toBe(RECIPIENTS);
  expect([...perRecipient.values()].every((n) => n === 1)).toBe(true);
  const final = await byStatus();
  expect(final.queued ?? 0).toBe(0);
  expect(Object.values(final).reduce((a, b) => a + b, 0)).toBe(RECIPIENTS);
  expect((await as.get(`/campaigns/${id}/timeline`)).body.data.data.map((e: { type: string }) => e.type)).toEqual([
    'paused',
    'resumed',
  ]);
  const resumedHook = await waitFor(
    async () => receiver.received.find((r) => r.status === 200 && r.body.includes('"campaign.resumed"')),
    20_000,
    'campaign.resumed webhook',
  );
  expect(verifyStandardWebhook(endpoint.secret, resumedHook)).toBe(true);
  expect(JSON.parse(resumedHook.body)).toMatchObject({
    type: 'campaign.resumed',
    data: { campaignId: id, previousReason: 'bounce_rate' },
  });

  console.log(
    `guardrail e2e: paused ${pausedAfterMs} ms after start at ${details.outcomes} outcomes (hard-bounce rate ${(Number(details.hardBounceRate) * 100).toFixed(1)} %), ` +
      `${sentBeforePause}/${RECIPIENTS} sent, ${held.queued} held queued (${parked.send.delayed} send jobs parked) with 0 sends; resumed → SENT in ${finishedAfterMs} ms; ` +
      `${accepted.length} SES sends for ${RECIPIENTS} recipients`,
  );
}, 120_000);
