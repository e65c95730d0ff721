/**
 * Chaos: a worker SIGKILLed again and again while a campaign sends at a rate where each send job carries several of
 * its emails (400/s: 20 per job). The kills catch jobs mid-way, with some of their emails sent and the rest not; the
 * campaign job too, mid-feed. After four kills one worker finishes the campaign.
 *
 * Survived means: the campaign SENT, every recipient's message accepted by SES, and a message sent again only where
 * a kill caught its claim in flight (as `worker-kill.test.ts` explains: SES has no idempotency key). A job claims
 * its emails together and sends them in one `SendBulkEmail` call (`job-bulk.ts`), so a killed worker held at most
 * a job's emails per job it ran (its concurrency), and at most that many were on their way to SES: only those can
 * reach SES twice. The emails of a job already sent are not sent again when another worker runs it.
 */
import { inArray, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { client, createTestProject, recipient, sesSendsTo, spawnWorker, waitFor } from '../support/harness';
import { useWorkerProcesses } from '../support/worker-processes';
import { killLoop, resends, survival } from './survival';
import { campaignJobSize } from '@mailroom/campaigns/lane';
import { toSummary } from '../support/summary';

const RECIPIENTS = 600;
const KILLS = 4;
const SENDS_PER_LIFE = 60;
const CONCURRENCY = 8;
/** Emails per campaign send job at 400/s: 50 ms of sending. */
const JOB_EMAILS = campaignJobSize(400, 50);

describe('a worker SIGKILLed in a loop while a campaign sends several emails per job', () => {
  const workers = useWorkerProcesses({
    SES_MAX_SEND_RATE: '400',
    SEND_CONCURRENCY: String(CONCURRENCY),
    CAMPAIGN_TICK_MS: '100',
    // A dead worker's jobs are found stalled, and its claims freed, within about 2 s.
    WORKER_LOCK_MS: '2000',
    SEND_LEASE_MS: '2000',
    RECONCILE_INTERVAL_MS: '1000',
    RECONCILE_AFTER_MS: '3000',
  });
  const { env, children } = workers;

  test(`${RECIPIENTS} recipients, ${KILLS} kills: SENT, every recipient reached, re-sends only of claims held at a kill, at most ${CONCURRENCY} jobs' each`, async () => {
    const p = await createTestProject(workers.api.database);
    const to = Array.from({ length: RECIPIENTS }, () => recipient('ckill'));
    await workers.api.database.db.execute(sql`
      insert into contacts (id, project_id, email, email_key, subscribed, data)
      select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
    const as = client(workers.api.app, p);
    const created = await as.post('/campaigns', {
      name: 'kill',
      subject: 'Hello',
      body: '<p>Hi</p>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(created.status).toBe(201);
    const campaignId: string = created.body.data.id;
    expect((await as.post(`/campaigns/${campaignId}/send`, {})).status).toBe(200);
    const atSes = async () => (await sesSendsTo(to)).length;
    const campaignEmails = async () =>
      workers.api.database.db
        .select({ id: emails.id, status: emails.status, token: emails.claimToken })
        .from(emails)
        .where(inArray(emails.toEmail, to));

    let carried = 0;
    const kills = await killLoop({
      env,
      kills: KILLS,
      sendsPerLife: SENDS_PER_LIFE,
      atSes,
      claims: campaignEmails,
      children,
      // The jobs the killed worker left behind: campaign mail travels several emails per job.
      afterKill: async () => {
        const left = await workers.api.queues.send.getJobs(['active', 'prioritized', 'waiting', 'delayed'], 0, 200);
        carried = Math.max(carried, ...left.map((j) => j.data.emailIds?.length ?? 1));
      },
    });
    expect(kills[kills.length - 1].sentBefore).toBeLessThan(RECIPIENTS);
    expect(carried).toBeGreaterThan(1);

    const last = spawnWorker(env);
    children.push(last);
    await waitFor(
      async () => (await as.get(`/campaigns/${campaignId}`)).body.data.status === 'SENT' || undefined,
      90_000,
      'campaign SENT',
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}\nworker:\n${last.output.slice(-30).join('\n')}`);
    });
    const rows = await campaignEmails();
    expect(rows).toHaveLength(RECIPIENTS);
    expect(rows.filter((r) => r.status !== 'sent')).toEqual([]);

    const s = await survival(
      to,
      rows.map((r) => r.id),
    );
    const { extra, inFlight, resentPerKill } = resends(kills, s.copies);
    toSummary(
      `chaos campaign-kill: ${RECIPIENTS} recipients at 400/s (up to ${carried} emails per send job), ${KILLS} SIGKILLs ` +
        `(SES sends before each: ${kills.map((k) => k.sentBefore).join(', ')}; claims held at each: ${inFlight.join(', ')}, of them sent again: ${resentPerKill.join(', ')}); ` +
        `delivered ${s.delivered}, lost ${s.lost.length}, sent again ${extra.length}`,
    );
    expect(s.lost).toEqual([]);
    for (const n of inFlight) expect(n).toBeLessThanOrEqual(CONCURRENCY * JOB_EMAILS);
    for (const n of resentPerKill) expect(n).toBeLessThanOrEqual(CONCURRENCY * JOB_EMAILS);
    expect(extra.filter((e) => e.extra > e.allowed)).toEqual([]);
  }, 240_000);
});
