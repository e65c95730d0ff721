/**
 * Chaos: SES failing in every way while a campaign goes out in `SendBulkEmail` calls (100/s: 5 emails per send job,
 * one call each). The worker talks to SES through the chaos proxy (`chaos-ses.ts`), which answers whole calls in
 * turn: frozen, every second one passed on to SES with its answer dropped (SES processed every entry of it; the
 * worker cannot know, and sends them again after its timeout); 5xx (transient, an attempt spent per email); 429
 * (throttled: no attempt spent, the queue paused); a refused port.
 *
 * Survived means: the worker still running and ready; the campaign SENT with every email `sent`, none failed and
 * none lost; a message sent twice only when it was in a frozen call SES processed.
 */
import { sql } from 'drizzle-orm';
import { client, recipient, waitFor, type TestApi, type TestProject } from '../support/harness';
import { statusCounts, survival } from './survival';
import type { ChaosSes, Mode } from './chaos-ses';
import { useChaosStack, type ChaosStack } from './chaos-stack';
import { toSummary } from '../support/summary';

const RECIPIENTS = 2_000;

describe('SES failing while a campaign goes out in bulk calls', () => {
  const stack = useChaosStack({
    SES_MAX_SEND_RATE: '100',
    CAMPAIGN_TICK_MS: '100',
    // Refusals and timeouts spend no attempt (SES unreachable); the 2 s of 5xx answers do (100 ms doubling).
    SEND_BACKOFF_MS: '100',
    SEND_MAX_ATTEMPTS: '20',
    // Longer than the SES timeout: a frozen call ends while the claims are still this worker's.
    SEND_LEASE_MS: '8000',
    RECONCILE_INTERVAL_MS: '1000',
    RECONCILE_AFTER_MS: '5000',
  });
  let ses: ChaosSes;
  let api: TestApi;
  let p: TestProject;
  let worker: ChaosStack['worker'];
  beforeAll(() => void ({ ses, api, p, worker } = stack));

  test(`${RECIPIENTS} recipients through 5xx, 429, refused and frozen calls: SENT, none failed or lost, re-sent only what SES processed unheard`, async () => {
    const to = Array.from({ length: RECIPIENTS }, () => recipient('sesc'));
    await api.database.db.execute(sql`
      insert into contacts (id, project_id, email, email_key, subscribed, data)
      select gen_random_uuid(), ${p.id}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e`);
    const as = client(api.app, p);
    const created = await as.post('/campaigns', {
      name: 'chaos',
      subject: 'Hello',
      body: '<p>Hi</p>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    });
    expect(created.status).toBe(201);
    const campaignId: string = created.body.data.id;
    expect((await as.post(`/campaigns/${campaignId}/send`, {})).status).toBe(200);
    const delivered = async () => (await survival(to, [])).copies.size;
    await waitFor(async () => (await delivered()) >= 50 || undefined, 30_000, '50 deliveries while healthy');

    // Each fault lasts 2 s and must have met at least one call (the refused one is seen in the worker's log). Frozen
    // comes first, while the campaign's jobs still carry several emails each: after the faults, emails whose call
    // failed wait in jobs of their own and go one by one.
    const bulkIn = (mode: Mode) => ses.seen.filter((s) => s.mode === mode && s.emailIds.length > 1).length;
    const seenIn = (mode: Mode) => ses.seen.filter((s) => s.mode === mode).length;
    const phase = async (mode: Mode, met: () => boolean) => {
      await ses.setMode(mode);
      const started = Date.now();
      await waitFor(
        async () => (Date.now() - started >= 2_000 && met()) || undefined,
        30_000,
        `a call to meet ${mode}`,
      );
    };
    try {
      await phase('frozen', () => bulkIn('frozen') > 0);
      await phase('5xx', () => seenIn('5xx') > 0);
      await phase('throttle', () => seenIn('throttle') > 0);
      await phase('refused', () => worker.counts.refused > 0);
    } finally {
      await ses.setMode('healthy');
    }
    expect(await delivered()).toBeLessThan(RECIPIENTS);

    await waitFor(
      async () => (await as.get(`/campaigns/${campaignId}`)).body.data.status === 'SENT' || undefined,
      90_000,
      'campaign SENT',
    ).catch(async (err) => {
      throw new Error(`${(err as Error).message}\nworker:\n${worker.tail.slice(-30).join('\n')}`);
    });
    const rows = await api.database.db.execute<{ id: string }>(
      sql`select id from emails where campaign_id = ${campaignId}::uuid`,
    );
    const ids = rows.rows.map((r) => r.id);
    expect(ids).toHaveLength(RECIPIENTS);
    expect(await statusCounts(api.database, ids)).toEqual({ sent: RECIPIENTS });
    const s = await survival(to, ids);
    const frozen = ses.seen.filter((f) => f.mode === 'frozen');
    const processed = new Set(frozen.filter((f) => f.forwarded).flatMap((f) => f.emailIds));
    const c = worker.counts;
    toSummary(
      `chaos ses-campaign: ${RECIPIENTS} recipients at 100/s in bulk calls of up to 5; SES answered ${seenIn('5xx')} calls 5xx (${bulkIn('5xx')} bulk), ${seenIn('throttle')} 429 (${bulkIn('throttle')} bulk), ` +
        `${frozen.length} frozen (${frozen.filter((f) => f.forwarded).length} processed by SES, ${processed.size} emails), worker saw ${c.refused} refused sends; ` +
        `delivered ${s.delivered}, failed ${c.failed}, lost ${s.lost.length}, duplicated ${s.duplicated.length} (allowed: the ${processed.size} processed unheard)`,
    );
    expect(worker.child.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${worker.healthPort}/health/ready`)).status).toBe(200);
    expect(c.serverError).toBeGreaterThan(0);
    expect(c.throttled).toBeGreaterThan(0);
    expect(c.failed).toBe(0);
    expect(s.lost).toEqual([]);
    expect(s.duplicated.filter((id) => !processed.has(id))).toEqual([]);
  }, 180_000);
});
