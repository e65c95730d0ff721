/**
 * Campaign mail at a rate where each send job carries several emails (400/s: 20 per job, `CAMPAIGN_JOB_EMAILS`
 * 50): one worker with 8 job slots sends a campaign; every recipient gets one message, the queue handled fewer jobs
 * than emails, and a transactional email sent mid-campaign is not held behind the jobs the worker runs: a slot held
 * by a campaign job frees as often as with one-email jobs (the job carries 50 ms of sending), and the rate gate gives
 * it the next send.
 */
import { sql } from 'drizzle-orm';
import { client, createTestProject, recipient, sesSendsTo, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';
import { toSummary } from '../support/summary';
import { transactionalProbe } from '../support/transactional-probe';

const RATE = 400;
const SIZE = 800;
const CONCURRENCY = 8;

const e2e = useE2e({
  isolated: true,
  env: {
    SES_MAX_SEND_RATE: String(RATE),
    SEND_CONCURRENCY: String(CONCURRENCY),
    CAMPAIGN_TICK_MS: '200',
  },
});

async function seed(projectId: string, n: number, tag: string): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient(tag));
  await e2e.api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${projectId}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
  return to;
}

test(`a campaign at ${RATE}/s goes out in jobs of several emails, each once; transactional mail still overtakes it`, async () => {
  const [p, q]: TestProject[] = [await createTestProject(e2e.api.database), await createTestProject(e2e.api.database)];
  const to = await seed(p.id, SIZE, 'cbatch');
  const as = client(e2e.api.app, p);
  const created = await as.post('/campaigns', {
    name: 'batches',
    subject: 'News for {{email}}',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const campaignId = created.body.data.id as string;
  expect((await as.post(`/campaigns/${campaignId}/send`, {})).status).toBe(200);

  // A quarter of the way, another project sends a transactional email.
  await waitFor(async () => ((await sesSendsTo(to)).length >= SIZE / 4 ? true : undefined), 60_000, 'a quarter sent');
  const { acceptedAt, send: otpSend } = await transactionalProbe(e2e.api.app, q, 'cbotp');

  await waitFor(
    async () => ((await as.get(`/campaigns/${campaignId}`)).body.data.status === 'SENT' ? true : undefined),
    90_000,
    'campaign SENT',
  );
  const sends = await sesSendsTo(to);
  const perRecipient = new Map<string, number>();
  for (const s of sends) perRecipient.set(s.to[0].toLowerCase(), (perRecipient.get(s.to[0].toLowerCase()) ?? 0) + 1);
  expect(perRecipient.size).toBe(SIZE);
  expect([...perRecipient.values()].filter((n) => n !== 1)).toEqual([]);

  // The queue's completed jobs (kept an hour): fewer than the emails, most carrying several.
  const done = await e2e.api.queues.send.getJobs(['completed'], 0, SIZE);
  const carried = done.map((j) => j.data.emailIds?.length ?? 1);
  expect(carried.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(SIZE);
  expect(done.length).toBeLessThan(SIZE / 4);
  expect(Math.max(...carried)).toBe(20);

  const times = sends.map((s) => s.at);
  const before = times.filter((t) => t >= acceptedAt && t <= otpSend.at).length;
  toSummary(
    `campaign at ${RATE}/s in ${done.length} send jobs for ${SIZE} emails (up to ${Math.max(...carried)} per job): ` +
      `transactional email at SES ${Math.round(otpSend.at - acceptedAt)} ms after acceptance, ${before} campaign sends in between`,
  );
  // Behind it: what the rate gate granted before its job had a slot and reached the gate. A campaign job is one
  // SendBulkEmail call of its 20 emails (50 ms at the rate), and the calls take their grants in turn, so a slot frees
  // about every 50 ms; the transactional job then waits out the intervals the call before it took ahead. Measured
  // 20 in three runs and 60 once in CI on a loaded host; on a host half as fast, 40–80 (98–234 ms) and 100 in CI
  // (before bulk calls: 8–16 one-email sends; 104, 3.6 s, before jobs handed their slot back). The counts come in
  // whole calls of 20. The bound, eight calls, is a fifth of the campaign: without its priority the email would wait
  // behind the 600 or so campaign sends left, so it still overtakes the lane.
  expect(before).toBeLessThanOrEqual(160);
  expect(otpSend.at).toBeLessThan(Math.max(...times));
}, 150_000);
