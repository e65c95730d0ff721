/**
 * Campaigns end to end (API → Postgres → campaign job → send jobs → SES emulator): FILTERED audiences reach
 * exactly their contacts, marketing mail carries a working one-click unsubscribe, replayed batches and transient
 * SES failures send nobody twice, a killed worker's campaign resumes and ends SENT, scheduling, rescheduling and
 * cancelling, and transactional mail overtaking a running campaign.
 *
 * Each describe has its own database: the worker's reconciler adopts every SENDING campaign of its database.
 */
import request from 'supertest';
import { and, eq, sql } from 'drizzle-orm';
import type { Config } from '@mailroom/config/config';
import { newId } from '@mailroom/platform/ids';
import { emails } from '@mailroom/db/schema/emails';
import { campaignJobSize } from '@mailroom/campaigns/lane';
import { events } from '@mailroom/db/schema/events';
import type { RunningWorker } from '../../apps/worker/src/main';
import {
  client,
  createTestProject,
  exited,
  parseMail,
  recipient,
  sesFault,
  sesSendsTo,
  spawnWorker,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { useWorkerProcesses } from '../support/worker-processes';
import { useE2e } from '../support/e2e';
import { transactionalProbe } from '../support/transactional-probe';
import { queuesSettled } from '../support/worker-queues';

/** Inserts contacts (one per address) with `data` and subscription; returns their addresses. */
async function seed(
  api: TestApi,
  projectId: string,
  n: number,
  tag: string,
  data: object | null,
  subscribed = true,
): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient(tag));
  await api.database.db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select gen_random_uuid(), ${projectId}::uuid, e, e, ${subscribed}, ${JSON.stringify(data ?? {})}::jsonb
    from unnest(${sql.param(to)}::text[]) as e`);
  return to;
}

/** Contact ids are normally UUIDv7; seeded ones use v4, so order by id is random, which the fan-out must not mind. */
const recipientsOf = async (api: TestApi, campaignId: string) =>
  api.database.db
    .select({ to: emails.toEmail, status: emails.status, sentAt: emails.sentAt, contactId: emails.contactId })
    .from(emails)
    .where(eq(emails.campaignId, campaignId));

/** No email of the campaign is queued or in flight: no send job can claim one any more. */
const noneInFlight = async (api: TestApi, campaignId: string) =>
  (await recipientsOf(api, campaignId)).every((r) => r.status !== 'queued' && r.status !== 'sending');

/** A campaign job has ended (finished jobs are removed; a failed one is kept, and ended too). */
const jobEnded = async (api: TestApi, jobId: string) => {
  const job = await api.queues.campaign.getJob(jobId);
  return !job || (await job.isCompleted()) || (await job.isFailed());
};

const acceptedTo = async (addresses: string[]) => (await sesSendsTo(addresses)).map((s) => s.to[0].toLowerCase());

function countsOf(list: string[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const a of list) m.set(a, (m.get(a) ?? 0) + 1);
  return m;
}

async function startCampaign(api: TestApi, p: TestProject, body: object, scheduledAt?: Date): Promise<string> {
  const as = client(api.app, p);
  const created = await as.post('/campaigns', {
    name: 'c',
    subject: 'Hello {{plan ?? "you"}}',
    body: '<p>Hi</p><a href="{{unsubscribeUrl}}">Unsubscribe</a>',
    from: `news@${p.domain}`,
    ...body,
  });
  expect(created.status).toBe(201);
  const sent = await as.post(
    `/campaigns/${created.body.data.id}/send`,
    scheduledAt ? { scheduledAt: scheduledAt.toISOString() } : {},
  );
  expect(sent.status).toBe(200);
  return created.body.data.id;
}

async function waitStatus(api: TestApi, p: TestProject, id: string, status: string, timeoutMs = 30_000) {
  return waitFor(
    async () => {
      const c = (await client(api.app, p).get(`/campaigns/${id}`)).body.data;
      return c.status === status ? c : undefined;
    },
    timeoutMs,
    `campaign ${status}`,
  );
}

describe('with a worker', () => {
  const e2e = useE2e({
    isolated: true,
    env: {
      SES_MAX_SEND_RATE: '50',
      CAMPAIGN_TICK_MS: '100',
      CAMPAIGN_BATCH_SIZE: '7',
      CAMPAIGN_QUEUE_WINDOW: '10',
      SEND_BACKOFF_MS: '100',
    },
  });
  let config: Config;
  let api: TestApi;
  let worker: RunningWorker;
  beforeAll(() => {
    ({ config, api, worker } = e2e);
  });

  test('FILTERED on data.plan equals "pro" reaches exactly the subscribed pro contacts; notEquals reaches all the others, planless included', async () => {
    const p = await createTestProject(api.database);
    const pro = await seed(api, p.id, 25, 'pro', { plan: 'pro' });
    const proUnsubscribed = await seed(api, p.id, 5, 'prou', { plan: 'pro' }, false);
    const free = await seed(api, p.id, 12, 'free', { plan: 'free' });
    const planless = await seed(api, p.id, 8, 'none', null);
    const everyone = [...pro, ...proUnsubscribed, ...free, ...planless];

    const eq = await startCampaign(api, p, {
      audienceType: 'FILTERED',
      audienceFilter: {
        logic: 'AND',
        groups: [{ filters: [{ field: 'data.plan', operator: 'equals', value: 'pro' }] }],
      },
    });
    const done = await waitStatus(api, p, eq, 'SENT');
    expect(done.recipients).toBe(25);
    expect((await acceptedTo(everyone)).sort()).toEqual([...pro].sort());
    const mail = await parseMail((await sesSendsTo([pro[0]]))[0]);
    expect(mail.subject).toBe('Hello pro');

    const ne = await startCampaign(api, p, {
      audienceType: 'FILTERED',
      audienceFilter: [{ field: 'data.plan', operator: 'notEquals', value: 'pro' }],
    });
    await waitStatus(api, p, ne, 'SENT');
    expect((await acceptedTo(everyone)).sort()).toEqual([...pro, ...free, ...planless].sort());

    const stats = (await client(api.app, p).get(`/campaigns/${ne}/stats`)).body.data;
    expect(stats).toMatchObject({
      status: 'SENT',
      recipients: 20,
      sent: 20,
      queued: 0,
      failed: 0,
      progress: 1,
      audienceComplete: true,
      etaSeconds: null,
    });
    expect(stats.sendRate).toBeGreaterThan(0);
  });

  test('marketing mail: List-Unsubscribe one-click (RFC 8058) and {{unsubscribeUrl}} unsubscribe the contact once; forged tokens change nothing', async () => {
    const p = await createTestProject(api.database);
    const [to] = await seed(api, p.id, 1, 'unsub', { plan: 'x' });
    const id = await startCampaign(api, p, { audienceType: 'ALL' });
    await waitStatus(api, p, id, 'SENT');
    const mail = await parseMail((await sesSendsTo([to]))[0]);
    // mailparser parses List-* headers into objects; read the raw lines.
    const raw = (name: string) => mail.headerLines.find((h) => h.key === name)?.line.replace(/^[^:]+:\s*/, '');
    const header = raw('list-unsubscribe') ?? '';
    const url = /<(http[^>]+)>/.exec(header)?.[1];
    expect(url).toMatch(new RegExp(`^${config.publicUrl}/unsubscribe/[A-Za-z0-9_-]{43}$`));
    expect(raw('list-unsubscribe-post')).toBe('List-Unsubscribe=One-Click');
    expect(mail.html).toContain(`href="${url}"`);
    const path = new URL(url!).pathname;

    const page = await request(api.app).get(path);
    expect(page.status).toBe(200);
    expect(page.text).toContain(to);
    expect(page.text).toContain('<form method="post">');
    const contact = (await client(api.app, p).get(`/contacts?search=${encodeURIComponent(to)}`)).body.data.items[0];
    expect(contact.subscribed).toBe(true);

    const token = path.split('/').pop()!;
    const forged = `${token.slice(0, 30)}${token[30] === 'A' ? 'B' : 'A'}${token.slice(31)}`;
    expect(
      (await request(api.app).post(`/unsubscribe/${forged}`).type('form').send('List-Unsubscribe=One-Click')).status,
    ).toBe(404);
    expect((await request(api.app).post('/unsubscribe/short')).status).toBe(404);
    expect((await client(api.app, p).get(`/contacts/${contact.id}`)).body.data.subscribed).toBe(true);

    const first = await request(api.app).post(path).type('form').send('List-Unsubscribe=One-Click');
    expect(first.status).toBe(200);
    const again = await request(api.app)
      .post(path)
      .set('Accept', 'application/json')
      .type('form')
      .send('List-Unsubscribe=One-Click');
    expect(again.body).toEqual({ success: true, data: { email: to, unsubscribed: true, changed: false } });
    expect((await client(api.app, p).get(`/contacts/${contact.id}`)).body.data.subscribed).toBe(false);
    const evs = await api.database.db
      .select()
      .from(events)
      .where(and(eq(events.contactId, contact.id), eq(events.name, 'contact.unsubscribed')));
    expect(evs).toHaveLength(1);
    expect(evs[0].data).toMatchObject({ campaignId: id, method: 'one-click' });
    expect((await client(api.app, p).get(`/campaigns/${id}/stats`)).body.data.unsubscribed).toBe(1);
    const emailId = (await api.database.db.select({ id: emails.id }).from(emails).where(eq(emails.campaignId, id)))[0]
      .id;
    const timeline = (await client(api.app, p).get(`/emails/${emailId}`)).body.data.timeline.map(
      (t: { type: string }) => t.type,
    );
    expect(timeline).toEqual(['queued', 'sent', 'unsubscribed']);
    // The next campaign skips the unsubscribed contact.
    const next = await startCampaign(api, p, { audienceType: 'ALL' });
    expect((await waitStatus(api, p, next, 'SENT')).recipients).toBe(0);
  });

  test('a replayed fan-out and transient SES failures send nobody twice', async () => {
    const p = await createTestProject(api.database);
    const to = await seed(api, p.id, 30, 'retry', { plan: 'r' });
    // Two addresses fail twice with a transient SES error before succeeding.
    for (const a of to.slice(0, 2))
      await sesFault({ match: a, status: 500, type: 'InternalFailure', message: 'transient', times: 2 });
    const id = await startCampaign(api, p, { audienceType: 'ALL' });
    await waitStatus(api, p, id, 'SENT');
    expect([...countsOf(await acceptedTo(to)).values()]).toEqual(Array(30).fill(1));

    // Replay the whole fan-out as a duplicated or retried job would (cursor lost, campaign SENDING again).
    await api.database.db.execute(
      sql`update campaigns set status = 'SENDING', fanout_cursor = null, fanout_done = false, enqueue_cursor = null where id = ${id}::uuid`,
    );
    const replays = [newId(), newId()];
    for (const jobId of replays)
      await api.queues.campaign.add('campaign', { campaignId: id, projectId: p.id }, { jobId });
    await waitStatus(api, p, id, 'SENT');
    expect((await recipientsOf(api, id)).length).toBe(30);
    // Nothing more can reach SES once both replayed jobs have ended, no email of the campaign is queued or in
    // flight, and the worker holds no send job (whatever the replay enqueued has run).
    await waitFor(
      async () =>
        (await jobEnded(api, replays[0])) && (await jobEnded(api, replays[1])) && (await noneInFlight(api, id)),
      20_000,
      'the replayed jobs ended, no email in flight',
    );
    await queuesSettled(worker, ['send']);
    expect([...countsOf(await acceptedTo(to)).values()]).toEqual(Array(30).fill(1));
  });

  test('scheduled: fires at its time; a reschedule moves it; a cancelled schedule never sends', async () => {
    const p = await createTestProject(api.database);
    const [a] = await seed(api, p.id, 1, 'sched', null);
    const at = new Date(Date.now() + 1500);
    const id = await startCampaign(api, p, { audienceType: 'ALL' }, at);
    expect((await client(api.app, p).get(`/campaigns/${id}`)).body.data.status).toBe('SCHEDULED');
    await waitStatus(api, p, id, 'SENT', 10_000);
    const [send] = await sesSendsTo([a]);
    expect(send.at).toBeGreaterThanOrEqual(at.getTime() - 50);

    const q = await createTestProject(api.database);
    const [b] = await seed(api, q.id, 1, 'resched', null);
    const moved = await startCampaign(api, q, { audienceType: 'ALL' }, new Date(Date.now() + 1000));
    // Far enough that the sentinel below is sent well before it, on a loaded machine too.
    const later = new Date(Date.now() + 5000);
    expect(
      (await client(api.app, q).post(`/campaigns/${moved}/send`, { scheduledAt: later.toISOString() })).body.data
        .scheduledAt,
    ).toBe(later.toISOString());
    const [c] = await seed(api, q.id, 1, 'cancelled', null);
    const r = await createTestProject(api.database);
    await seed(api, r.id, 1, 'never', null);
    const cancelled = await startCampaign(api, r, { audienceType: 'ALL' }, new Date(Date.now() + 1000));
    expect((await client(api.app, r).post(`/campaigns/${cancelled}/cancel`, {})).body.data.status).toBe('CANCELLED');

    // A sentinel scheduled after both original times: once it is SENT, the worker has run the campaign jobs due
    // by then, so the moved and the cancelled campaign have had their chance to fire at their old time.
    const s = await createTestProject(api.database);
    const [sentinelTo] = await seed(api, s.id, 1, 'sentinel', null);
    const sentinel = await startCampaign(api, s, { audienceType: 'ALL' }, new Date(Date.now() + 1000));
    await waitStatus(api, s, sentinel, 'SENT', 10_000);
    expect(await sesSendsTo([sentinelTo])).toHaveLength(1);
    expect((await client(api.app, q).get(`/campaigns/${moved}`)).body.data.status).toBe('SCHEDULED');
    expect(await sesSendsTo([b, c])).toHaveLength(0);
    await waitStatus(api, q, moved, 'SENT', 10_000);
    const sends = await sesSendsTo([b, c]);
    expect(sends).toHaveLength(2);
    expect(Math.min(...sends.map((s) => s.at))).toBeGreaterThanOrEqual(later.getTime() - 50);
    expect((await client(api.app, r).get(`/campaigns/${cancelled}`)).body.data).toMatchObject({
      status: 'CANCELLED',
      recipients: 0,
    });
  });

  test('cancel during SENDING stops every email SES has not received', async () => {
    const p = await createTestProject(api.database);
    const to = await seed(api, p.id, 150, 'stop', null);
    const id = await startCampaign(api, p, { audienceType: 'ALL' });
    await waitFor(async () => (await sesSendsTo(to)).length >= 15 || undefined, 20_000, '15 sends');
    const cancel = await client(api.app, p).post(`/campaigns/${id}/cancel`, {});
    expect(cancel.body.data.status).toBe('CANCELLED');
    const afterCancel = (await sesSendsTo(to)).length;
    // The campaign has had its chance once its job has ended (it sweeps the audience the queue never received)
    // and none of its emails is queued or in flight.
    await waitFor(
      async () => (await jobEnded(api, id)) && (await noneInFlight(api, id)),
      20_000,
      'the campaign job ended, no email queued or in flight',
    );
    const settled = (await sesSendsTo(to)).length;
    // Only emails already claimed by the worker may still reach SES: at most its concurrency's send jobs, each one
    // SendBulkEmail call of its emails (at 50/s, 2 per job).
    expect(settled - afterCancel).toBeLessThanOrEqual(
      config.sendConcurrency * campaignJobSize(config.sesMaxSendRate ?? 14, config.campaignJobEmails),
    );
    // Once the worker holds no send job (the cancelled emails' jobs have run and skipped), still nothing new.
    await queuesSettled(worker, ['send']);
    expect((await sesSendsTo(to)).length).toBe(settled);
    expect(settled).toBeLessThan(150);
    const rows = await recipientsOf(api, id);
    const stats = (await client(api.app, p).get(`/campaigns/${id}/stats`)).body.data;
    expect(stats.sent).toBe(settled);
    expect(stats.sent + stats.cancelled).toBe(rows.length);
    expect(stats.queued).toBe(0);
    // The cancel answers the queued emails it cancelled itself; the worker cancels the rest of the audience after
    // it (how many were already fanned out at that moment depends on the machine's load).
    expect(cancel.body.data.cancelledEmails).toBeLessThanOrEqual(stats.cancelled);
    expect(stats.sent).toBeLessThan(150);
  });

  test("transactional mail sent during a large campaign goes out before the campaign's remaining mail", async () => {
    const p = await createTestProject(api.database);
    const to = await seed(api, p.id, 200, 'bulk', null);
    const id = await startCampaign(api, p, { audienceType: 'ALL' });
    await waitFor(async () => (await sesSendsTo(to)).length >= 20 || undefined, 20_000, '20 campaign sends');
    const { acceptedAt, send: sent } = await transactionalProbe(api.app, p, 'urgent');
    const campaignBefore = (await sesSendsTo(to)).filter((s) => s.at < sent.at).length;
    console.log(
      `priority: transactional sent after ${campaignBefore} of 200 campaign emails; accepted-to-SES ${Math.round(sent.at - acceptedAt)} ms after acceptance`,
    );
    expect(200 - campaignBefore).toBeGreaterThan(100);
    await client(api.app, p).post(`/campaigns/${id}/cancel`, {});
  });
});

describe('a worker killed mid-campaign', () => {
  const workers = useWorkerProcesses({
    SES_MAX_SEND_RATE: '40',
    WORKER_CONCURRENCY: '4',
    WORKER_LOCK_MS: '3000',
    SEND_LEASE_MS: '3000',
    CAMPAIGN_TICK_MS: '100',
    CAMPAIGN_BATCH_SIZE: '20',
    CAMPAIGN_QUEUE_WINDOW: '30',
  });
  const { env, children } = workers;

  test('the campaign resumes on another worker and ends SENT with every recipient once', async () => {
    const p = await createTestProject(workers.api.database);
    const to = await seed(workers.api, p.id, 160, 'kc', null);
    const id = await startCampaign(workers.api, p, { audienceType: 'ALL' });
    const first = spawnWorker(env);
    children.push(first);
    await waitFor(async () => (await sesSendsTo(to)).length >= 40 || undefined, 30_000, '40 sends');
    first.kill('SIGKILL');
    await exited(first);
    const before = (await sesSendsTo(to)).length;
    const respawnedAt = Date.now();
    children.push(spawnWorker(env));
    await waitStatus(workers.api, p, id, 'SENT', 60_000);
    const rows = await recipientsOf(workers.api, id);
    expect(rows).toHaveLength(160);
    expect(new Set(rows.map((r) => r.contactId)).size).toBe(160);
    expect(rows.every((r) => r.status === 'sent')).toBe(true);
    const counts = countsOf(await acceptedTo(to));
    expect(counts.size).toBe(160);
    const twice = [...counts].filter(([, n]) => n > 1);
    // As for any email: only a message whose SES request was in flight at the kill can be sent again (same
    // Message-ID), so one kill duplicates at most WORKER_CONCURRENCY (4 here) emails, each at most once.
    expect(twice.length).toBeLessThanOrEqual(4);
    expect(twice.every(([, n]) => n === 2)).toBe(true);
    for (const [address] of twice) expect((await sesSendsTo([address]))[0].at).toBeLessThan(respawnedAt);
    console.log(`campaign kill: ${before} of 160 sent before SIGKILL, duplicates: ${twice.length}`);
  }, 120_000);
});

describe('lost jobs and marketing templates', () => {
  const e2e = useE2e({
    isolated: true,
    env: {
      SES_MAX_SEND_RATE: '50',
      CAMPAIGN_TICK_MS: '100',
      RECONCILE_INTERVAL_MS: '300',
      RECONCILE_AFTER_MS: '0',
    },
  });
  let api: TestApi;
  beforeAll(() => {
    ({ api } = e2e);
  });

  test('a scheduled campaign whose job Redis lost is re-created by the reconciler and still sends', async () => {
    const p = await createTestProject(api.database);
    const to = await seed(api, p.id, 3, 'lost', null);
    const id = await startCampaign(api, p, { audienceType: 'ALL' }, new Date(Date.now() + 60_000));
    await api.queues.campaign.remove(id);
    expect(await api.queues.campaign.getJob(id)).toBeUndefined();
    // Bring the time forward without telling the queue: only the reconciler can notice.
    await api.database.db.execute(sql`update campaigns set scheduled_at = now() where id = ${id}::uuid`);
    await waitStatus(api, p, id, 'SENT', 15_000);
    expect((await acceptedTo(to)).sort()).toEqual([...to].sort());
  });

  test('/v1/send with a MARKETING template carries the unsubscribe link and List-Unsubscribe; TRANSACTIONAL does not', async () => {
    const p = await createTestProject(api.database);
    const as = client(api.app, p);
    const body = '<p>Deals</p><a href="{{unsubscribeUrl}}">stop</a>';
    const marketing = (
      await as.post('/templates', { name: 'm', subject: 'm', body, type: 'MARKETING', from: `m@${p.domain}` })
    ).body.data.id;
    const transactional = (
      await as.post('/templates', { name: 't', subject: 't', body: '<p>Receipt</p>', from: `t@${p.domain}` })
    ).body.data.id;
    const a = recipient('mkt');
    const b = recipient('trx');
    // /v1/send creates contacts unsubscribed (Plunk's rule); this one opted in.
    await as.post('/contacts', { email: a, subscribed: true });
    expect((await as.post('/v1/send', { to: a, template: marketing })).status).toBe(202);
    expect((await as.post('/v1/send', { to: b, template: transactional })).status).toBe(202);
    const [ma, mb] = await waitFor(
      async () => {
        const [x, y] = [await sesSendsTo([a]), await sesSendsTo([b])];
        return x.length && y.length ? [await parseMail(x[0]), await parseMail(y[0])] : undefined;
      },
      10_000,
      'both sent',
    );
    const line = ma.headerLines.find((h) => h.key === 'list-unsubscribe')?.line ?? '';
    const url = /<(http[^>]+)>/.exec(line)?.[1];
    expect(url).toBeDefined();
    expect(ma.html).toContain(`href="${url}"`);
    expect(mb.headerLines.some((h) => h.key === 'list-unsubscribe')).toBe(false);
    const res = await request(api.app).post(new URL(url!).pathname).set('Accept', 'application/json');
    expect(res.body.data).toMatchObject({ email: a, unsubscribed: true, changed: true });
  });
});
