/**
 * Campaign A/B tests end to end (API → Postgres → campaign job → send jobs → SES recorder): the variants reach
 * disjoint test groups of the assigned sizes, the winner is chosen after the wait by a custom event's rate (or picked
 * by hand) and goes to the rest of the audience, nobody gets two emails across pause, resume and cancel, and a
 * worker killed during the test, or dead while the winner is picked, still leaves every contact one email.
 *
 * Each describe has its own database: the worker's reconciler adopts every SENDING campaign of its database.
 */
import { eq, sql } from 'drizzle-orm';
import { emails } from '@mailroom/db/schema/emails';
import { pauseCampaign } from '@mailroom/campaigns/queries/campaign-pause';
import { assignVariant } from '@mailroom/campaigns/ab-assign';
import {
  client,
  createTestProject,
  exited,
  recipient,
  sesSendsTo,
  spawnWorker,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { useWorkerProcesses } from '../support/worker-processes';
import { useE2e } from '../support/e2e';
import type { RecordedSend } from '../support/ses-recorder';

/** Inserts subscribed contacts; returns their ids and addresses. */
async function seed(api: TestApi, projectId: string, n: number, tag: string): Promise<Map<string, string>> {
  const to = Array.from({ length: n }, () => recipient(tag));
  const rows = await api.database.db.execute<{ id: string; email: string }>(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${projectId}::uuid, e, e, true, '{}'::jsonb from unnest(${sql.param(to)}::text[]) as e
    returning id, email`);
  return new Map(rows.rows.map((r) => [r.email, r.id]));
}

const rowsOf = async (api: TestApi, campaignId: string) =>
  api.database.db
    .select({ to: emails.toEmail, status: emails.status, contactId: emails.contactId, variant: emails.variant })
    .from(emails)
    .where(eq(emails.campaignId, campaignId));

const subjectOf = (s: RecordedSend) =>
  s.raw
    .split('\n')
    .find((l) => l.startsWith('Subject: '))
    ?.slice(9)
    .trim();

const NAMES = ['Variant A', 'Variant B', 'Variant C'];

async function startAb(api: TestApi, p: TestProject, variants: number, abTest: object): Promise<string> {
  const as = client(api.app, p);
  const created = await as.post('/campaigns', {
    name: 'ab',
    subject: 'Base subject',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
    variants: NAMES.slice(0, variants).map((subject) => ({ subject })),
    abTest,
  });
  expect(created.status).toBe(201);
  expect((await as.post(`/campaigns/${created.body.data.id}/send`, {})).status).toBe(200);
  return created.body.data.id;
}

/** The campaign as `GET /campaigns/{id}` answers it; `undefined` when the answer is not a 200. */
const get = async (api: TestApi, p: TestProject, id: string) => {
  const res = await client(api.app, p).get(`/campaigns/${id}`);
  return res.status === 200 ? res.body.data : undefined;
};

const waitCampaign = (
  api: TestApi,
  p: TestProject,
  id: string,
  what: string,
  ok: (c: { status: string; abTest: { phase: string } }) => boolean,
  timeoutMs = 60_000,
) =>
  waitFor(
    async () => {
      // A poll that was not answered (a 429 once a long wait has polled the project's minute away) looks again.
      const c = await get(api, p, id);
      return c !== undefined && ok(c) ? c : undefined;
    },
    timeoutMs,
    what,
  );

/**
 * Every contact of `audience` has exactly one email row; a test-group contact's carries its assigned variant, every
 * other one the winner; SES received each address `maxCopies` times at most, with the subject of its variant.
 *
 * @returns the sends by address.
 */
async function expectOneEach(
  api: TestApi,
  id: string,
  audience: Map<string, string>,
  share: number,
  variants: number,
  winner: number,
) {
  const rows = await rowsOf(api, id);
  expect(rows).toHaveLength(audience.size);
  expect(new Set(rows.map((r) => r.contactId)).size).toBe(audience.size);
  for (const r of rows) {
    const assigned = assignVariant(id, r.contactId!, share, variants);
    expect({ to: r.to, variant: r.variant }).toEqual({ to: r.to, variant: assigned ?? winner });
  }
  const sends = await sesSendsTo([...audience.keys()]);
  const byAddress = new Map<string, RecordedSend[]>();
  for (const s of sends) byAddress.set(s.to[0].toLowerCase(), [...(byAddress.get(s.to[0].toLowerCase()) ?? []), s]);
  expect(byAddress.size).toBe(audience.size);
  for (const [address, list] of byAddress) {
    const assigned = assignVariant(id, audience.get(address)!, share, variants);
    expect({ address, subjects: [...new Set(list.map(subjectOf))] }).toEqual({
      address,
      subjects: [NAMES[assigned ?? winner]],
    });
  }
  return byAddress;
}

describe('with a worker', () => {
  const e2e = useE2e({
    isolated: true,
    env: {
      SES_MAX_SEND_RATE: '50',
      CAMPAIGN_TICK_MS: '100',
      CAMPAIGN_BATCH_SIZE: '7',
      CAMPAIGN_QUEUE_WINDOW: '10',
      CAMPAIGN_AB_MIN_WAIT_SECONDS: '1',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      // The waits poll GET /campaigns/{id} every 50 ms: 1,200 a minute, over the default limit of 1,000.
      RATE_LIMIT_PER_MINUTE: '100000',
    },
  });
  let api: TestApi;
  beforeAll(() => {
    ({ api } = e2e);
  });

  test('the test share gets the variants in disjoint groups; after the wait the best event rate wins and goes to the rest', async () => {
    const p = await createTestProject(api.database);
    const audience = await seed(api, p.id, 150, 'auto');
    expect(
      (
        await client(api.app, p).post('/webhooks/endpoints', {
          url: 'http://127.0.0.1:9/hooks',
          eventTypes: ['campaign.winner', 'email.sent'],
        })
      ).status,
    ).toBe(201);
    const id = await startAb(api, p, 2, { testShare: 40, metric: 'event', event: 'purchase', waitSeconds: 12 });
    const waiting = await waitCampaign(api, p, id, 'WAITING', (c) => c.abTest.phase === 'WAITING');
    const decideAt = Date.parse(waiting.abTest.decideAt);
    // The test group alone was sent, each contact with its assigned variant: disjoint groups of the assigned sizes.
    const testRows = await rowsOf(api, id);
    const expected = [...audience.values()].map((c) => assignVariant(id, c, 40, 2));
    const sizes = [0, 1].map((v) => expected.filter((x) => x === v).length);
    expect(testRows.filter((r) => r.variant === 0)).toHaveLength(sizes[0]);
    expect(testRows.filter((r) => r.variant === 1)).toHaveLength(sizes[1]);
    expect(testRows).toHaveLength(sizes[0] + sizes[1]);
    // 40% of 150 is 60, in two halves: binomial spread, within 5 standard deviations.
    expect(Math.abs(sizes[0] + sizes[1] - 60)).toBeLessThanOrEqual(30);
    expect(Math.min(...sizes)).toBeGreaterThan(10);
    expect(testRows.every((r) => r.status === 'sent')).toBe(true);

    // Variant B's recipients buy: 8 purchase events, recorded after their email was sent (and one from a contact
    // outside the test, which counts for nobody).
    const bBuyers = testRows.filter((r) => r.variant === 1).slice(0, 8);
    const outsider = [...audience.keys()].find((a) => !testRows.some((r) => r.to === a))!;
    for (const r of [...bBuyers, { to: outsider }])
      expect((await client(api.app, p).post('/v1/track', { event: 'purchase', email: r.to })).status).toBe(200);
    expect(Date.now()).toBeLessThan(decideAt);

    const done = await waitCampaign(api, p, id, 'SENT', (c) => c.status === 'SENT', 90_000);
    expect(done.abTest).toMatchObject({
      phase: 'WINNER',
      winner: 1,
      decision: { winner: 1, by: 'auto', basis: 'metric', metric: 'event', event: 'purchase' },
    });
    const decision = done.abTest.decision;
    expect(decision.variants).toEqual([
      { variant: 0, sent: sizes[0], conversions: 0, rate: 0 },
      { variant: 1, sent: sizes[1], conversions: 8, rate: expect.closeTo(8 / sizes[1], 5) },
    ]);
    expect(decision.pValue).toBeGreaterThan(0);
    expect(decision.pValue).toBeLessThan(0.05);
    expect(decision.withinNoise).toBe(false);
    expect(Date.parse(decision.decidedAt)).toBeGreaterThanOrEqual(decideAt - 50);

    const byAddress = await expectOneEach(api, id, audience, 40, 2, 1);
    for (const [address, [send]] of byAddress) {
      const inTest = assignVariant(id, audience.get(address)!, 40, 2) !== null;
      if (inTest) expect(send.at).toBeLessThan(decideAt);
      else expect(send.at).toBeGreaterThanOrEqual(Date.parse(decision.decidedAt) - 50);
    }
    // The automatic decision is announced once; every email.sent carries the email's variant.
    const hooks = async (type: string) =>
      (
        await api.database.db.execute<{ payload: { data: Record<string, unknown> } }>(
          sql`select payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type = ${type}`,
        )
      ).rows.map((r) => r.payload.data);
    expect(await hooks('campaign.winner')).toEqual([
      {
        campaignId: id,
        winner: 1,
        by: 'auto',
        basis: 'metric',
        metric: 'event',
        pValue: decision.pValue,
        withinNoise: false,
      },
    ]);
    const sentHooks = await hooks('email.sent');
    expect(sentHooks).toHaveLength(150);
    for (const h of sentHooks) expect(h.variant).toBe(assignVariant(id, h.contactId as string, 40, 2) ?? 1);
    const report = (await client(api.app, p).get(`/campaigns/${id}/variants`)).body.data;
    expect(
      report.variants.map(
        (v: { name: string; recipients: number; sent: number; metricCount: number; winner: boolean }) => [
          v.name,
          v.recipients,
          v.sent,
          v.metricCount,
          v.winner,
        ],
      ),
    ).toEqual([
      ['A', sizes[0], sizes[0], 0, false],
      ['B', 150 - sizes[0], 150 - sizes[0], 8, true],
    ]);
  }, 150_000);

  test('paused and resumed in the test, then a winner picked by hand during the wait: one email each, the pick goes to the rest', async () => {
    const p = await createTestProject(api.database);
    const audience = await seed(api, p.id, 120, 'manual');
    const id = await startAb(api, p, 3, { testShare: 30, metric: 'clicks', waitSeconds: 3600 });
    await waitFor(
      async () => (await sesSendsTo([...audience.keys()])).length >= 5 || undefined,
      30_000,
      '5 test sends',
    );
    await api.database.db.transaction((tx) => pauseCampaign(tx, id, 'bounce_rate', { test: 'paused by the test' }));
    expect((await get(api, p, id)).status).toBe('PAUSED');
    expect((await client(api.app, p).post(`/campaigns/${id}/resume`, {})).status).toBe(200);
    const waiting = await waitCampaign(api, p, id, 'WAITING', (c) => c.abTest.phase === 'WAITING');
    expect(Date.parse(waiting.abTest.decideAt)).toBeGreaterThan(Date.now() + 3_000_000);
    const testSize = (await rowsOf(api, id)).length;

    const picked = await client(api.app, p).post(`/campaigns/${id}/winner`, { variant: 2 });
    expect(picked.status).toBe(200);
    expect(picked.body.data.abTest).toMatchObject({
      winner: 2,
      decision: { by: 'manual', basis: 'choice', winner: 2 },
    });
    await waitCampaign(api, p, id, 'SENT', (c) => c.status === 'SENT', 90_000);
    await expectOneEach(api, id, audience, 30, 3, 2);
    const report = (await client(api.app, p).get(`/campaigns/${id}/variants`)).body.data;
    expect(report.variants.reduce((n: number, v: { recipients: number }) => n + v.recipients, 0)).toBe(120);
    expect(report.decision.variants.reduce((n: number, v: { sent: number }) => n + v.sent, 0)).toBe(testSize);
  }, 150_000);

  test('cancelled while waiting: the rest of the audience never gets anything, and no winner can be picked', async () => {
    const p = await createTestProject(api.database);
    const audience = await seed(api, p.id, 60, 'cancel');
    const id = await startAb(api, p, 2, { testShare: 50, metric: 'opens', waitSeconds: 3600 });
    await waitCampaign(api, p, id, 'WAITING', (c) => c.abTest.phase === 'WAITING');
    const testRows = await rowsOf(api, id);
    expect((await client(api.app, p).post(`/campaigns/${id}/cancel`, {})).body.data.status).toBe('CANCELLED');
    expect((await client(api.app, p).post(`/campaigns/${id}/winner`, {})).status).toBe(409);
    // The campaign's job has had its chance once it ended.
    await waitFor(
      async () => {
        const job = await api.queues.campaign.getJob(id);
        return !job || (await job.isCompleted()) || (await job.isFailed());
      },
      20_000,
      'the campaign job ended',
    );
    expect(await rowsOf(api, id)).toHaveLength(testRows.length);
    const sends = await sesSendsTo([...audience.keys()]);
    expect(sends.map((s) => s.to[0].toLowerCase()).sort()).toEqual(testRows.map((r) => r.to).sort());
  }, 90_000);
});

describe('workers killed during an A/B test', () => {
  const workers = useWorkerProcesses({
    // As above: the waits poll faster than the default per-project limit allows for a minute.
    RATE_LIMIT_PER_MINUTE: '100000',
    SES_MAX_SEND_RATE: '40',
    WORKER_CONCURRENCY: '4',
    WORKER_LOCK_MS: '3000',
    SEND_LEASE_MS: '3000',
    CAMPAIGN_TICK_MS: '100',
    CAMPAIGN_BATCH_SIZE: '20',
    CAMPAIGN_QUEUE_WINDOW: '30',
    CAMPAIGN_AB_MIN_WAIT_SECONDS: '1',
  });
  const { env, children } = workers;

  const spawn = () => {
    const w = spawnWorker(env);
    children.push(w);
    return w;
  };

  test('killed while the variants are sending: another worker finishes the test, decides, and sends the rest once', async () => {
    const p = await createTestProject(workers.api.database);
    const audience = await seed(workers.api, p.id, 160, 'killtest');
    const id = await startAb(workers.api, p, 2, { testShare: 50, metric: 'opens', waitSeconds: 2 });
    const first = spawn();
    await waitFor(
      async () => (await sesSendsTo([...audience.keys()])).length >= 20 || undefined,
      60_000,
      '20 test sends',
    );
    first.kill('SIGKILL');
    await exited(first);
    expect((await get(workers.api, p, id)).abTest.phase).toBe('TESTING');
    const respawnedAt = Date.now();
    spawn();
    const done = await waitCampaign(workers.api, p, id, 'SENT', (c) => c.status === 'SENT', 120_000);
    expect(done.abTest).toMatchObject({ phase: 'WINNER', winner: 0, decision: { by: 'auto', withinNoise: true } });
    const rows = await rowsOf(workers.api, id);
    expect(rows).toHaveLength(160);
    expect(new Set(rows.map((r) => r.contactId)).size).toBe(160);
    expect(rows.every((r) => r.status === 'sent' && r.variant === (assignVariant(id, r.contactId!, 50, 2) ?? 0))).toBe(
      true,
    );
    const sends = await sesSendsTo([...audience.keys()]);
    const counts = new Map<string, number>();
    for (const s of sends) counts.set(s.to[0].toLowerCase(), (counts.get(s.to[0].toLowerCase()) ?? 0) + 1);
    expect(counts.size).toBe(160);
    // As for any email: only a message whose SES request was in flight at the kill can go again (same Message-ID),
    // so one kill duplicates at most WORKER_CONCURRENCY (4) emails, each once, all before the new worker started.
    const twice = [...counts].filter(([, n]) => n > 1);
    expect(twice.length).toBeLessThanOrEqual(4);
    expect(twice.every(([, n]) => n === 2)).toBe(true);
    for (const [address] of twice) expect((await sesSendsTo([address]))[0].at).toBeLessThan(respawnedAt);
    console.log(`A/B kill in the test phase: duplicates ${twice.length}`);
  }, 180_000);

  test('killed while waiting, the winner picked with no worker alive: the next worker sends the rest, one email each', async () => {
    const p = await createTestProject(workers.api.database);
    const audience = await seed(workers.api, p.id, 80, 'killwait');
    const id = await startAb(workers.api, p, 2, { testShare: 25, metric: 'clicks', waitSeconds: 3600 });
    const first = spawn();
    await waitCampaign(workers.api, p, id, 'WAITING', (c) => c.abTest.phase === 'WAITING', 90_000);
    first.kill('SIGKILL');
    await exited(first);
    const testSize = (await rowsOf(workers.api, id)).length;
    // The decision is committed in Postgres while no worker runs; the phase moves only when a worker takes it up.
    const picked = await client(workers.api.app, p).post(`/campaigns/${id}/winner`, { variant: 1 });
    expect(picked.status).toBe(200);
    expect(picked.body.data.abTest).toMatchObject({ phase: 'WAITING', winner: 1 });
    expect(await rowsOf(workers.api, id)).toHaveLength(testSize);
    spawn();
    await waitCampaign(workers.api, p, id, 'SENT', (c) => c.status === 'SENT', 120_000);
    const byAddress = await expectOneEach(workers.api, id, audience, 25, 2, 1);
    // Nothing was in flight at the kill: not a single duplicate.
    expect([...byAddress.values()].every((list) => list.length === 1)).toBe(true);
  }, 180_000);
});
