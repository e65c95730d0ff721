/**
 * `POST /campaigns/{id}/retry-failed` through the API alone (no worker; the send path is in
 * test/e2e/retry-failed.test.ts): which emails a retry re-queues (transient failures whose contact still exists,
 * is subscribed and is not suppressed) and which it never touches (permanent failures, bounced, complained,
 * suppressed, sent, failures of unknown kind), the campaign's move back to SENDING with its feeding cursor
 * cleared, the timelines and the `campaign.sending` webhook, once per campaign (also under concurrent calls),
 * nothing to retry, every refused state, tenant isolation and key kinds.
 */
import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { campaigns } from '@mailroom/db/schema/campaigns';
import { emails } from '@mailroom/db/schema/emails';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { pauseCampaign } from '@mailroom/campaigns/queries/campaign-pause';
import { retriedEmailIds } from '@mailroom/campaigns/queries/campaign-retry';
import { webhookDeliveries } from '@mailroom/db/schema/webhooks';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const as = (project: TestProject) => client(ctx.api.app, project);
const db = () => ctx.api.database.db;

/** What one recipient's email looks like when the campaign is SENT. */
type Case = {
  status: 'sent' | 'failed' | 'bounced' | 'complained' | 'suppressed';
  failureKind?: 'transient' | 'permanent' | null;
  contact?: 'subscribed' | 'unsubscribed' | 'suppressed' | 'deleted';
};

/** A campaign started through the API (SENDING, nothing fanned out: no worker), with a DRAFT's content. */
async function createCampaign(p: TestProject, send = true): Promise<string> {
  const created = await as(p).post('/campaigns', {
    name: 'Launch',
    subject: 'Hi',
    body: '<p>News</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  if (send) expect((await as(p).post(`/campaigns/${id}/send`, {})).body.data.status).toBe('SENDING');
  return id;
}

/**
 * A SENT campaign whose recipients' emails ended as `cases` say, as the worker would have left it (fan-out done,
 * every email final, cursors at the last contact). @returns the campaign id and each case's email id and address.
 */
async function sentCampaign(
  p: TestProject,
  cases: Record<string, Case>,
): Promise<{ id: string; email: Record<string, { id: string; to: string }> }> {
  const id = await createCampaign(p);
  const email: Record<string, { id: string; to: string; contactId: string }> = {};
  for (const name of Object.keys(cases)) {
    const to = recipient(name.toLowerCase());
    const contactId = randomUUID();
    await db().execute(
      sql`insert into contacts (id, project_id, email, email_key, subscribed, data) values (${contactId}::uuid, ${p.id}::uuid, ${to}, ${to}, true, '{}'::jsonb)`,
    );
    email[name] = { id: newId(), to, contactId };
  }
  await db().transaction((tx) =>
    insertQueuedEmails(
      tx,
      Object.values(email).map((e) => ({
        id: e.id,
        projectId: p.id,
        campaignId: id,
        contactId: e.contactId,
        source: 'campaign' as const,
        marketing: true,
        toEmail: e.to,
        fromEmail: `news@${p.domain}`,
      })),
    ),
  );
  for (const [name, c] of Object.entries(cases)) {
    const e = email[name];
    const error =
      c.status === 'failed'
        ? c.failureKind === 'permanent'
          ? 'MessageRejected: no'
          : 'gave up after 1 attempts: InternalFailure: internal'
        : null;
    await db().execute(sql`
      update emails set status = ${c.status}, failure_kind = ${c.failureKind ?? null}, error = ${error}, attempts = 1,
        bounce_type = ${c.status === 'bounced' ? 'hard' : null}, sent_at = ${c.status === 'failed' || c.status === 'suppressed' ? null : new Date()}
      where id = ${e.id}::uuid`);
    if (c.contact === 'unsubscribed')
      await db().execute(sql`update contacts set subscribed = false where id = ${e.contactId}::uuid`);
    if (c.contact === 'deleted') await db().execute(sql`delete from contacts where id = ${e.contactId}::uuid`);
    if (c.contact === 'suppressed') expect((await as(p).post('/suppressions', { email: e.to })).status).toBe(201);
  }
  const last = Object.values(email)
    .map((e) => e.contactId)
    .sort()
    .at(-1)!;
  await db().execute(sql`
    update campaigns set status = 'SENT', fanout_done = true, fanout_cursor = ${last}::uuid, enqueue_cursor = ${last}::uuid,
      recipients = ${Object.keys(cases).length}, completed_at = now()
    where id = ${id}::uuid`);
  return { id, email };
}

const emailRow = async (id: string) => (await db().select().from(emails).where(eq(emails.id, id)))[0];
const campaignRow = async (id: string) => (await db().select().from(campaigns).where(eq(campaigns.id, id)))[0];
const retry = (p: TestProject, id: string) => as(p).post(`/campaigns/${id}/retry-failed`, {});

test('re-queues exactly the transient failures of recipients still mailable; the campaign is SENDING again with its feeding cursor cleared', async () => {
  const p = await createTestProject(ctx.api.database);
  const hook = await as(p).post('/webhooks/endpoints', {
    url: 'https://hooks.example.com/mailroom',
    eventTypes: ['campaign.*'],
  });
  expect(hook.status).toBe(201);
  const { id, email } = await sentCampaign(p, {
    retryA: { status: 'failed', failureKind: 'transient' },
    retryB: { status: 'failed', failureKind: 'transient' },
    unsubscribed: { status: 'failed', failureKind: 'transient', contact: 'unsubscribed' },
    suppressed: { status: 'failed', failureKind: 'transient', contact: 'suppressed' },
    deleted: { status: 'failed', failureKind: 'transient', contact: 'deleted' },
    permanent: { status: 'failed', failureKind: 'permanent' },
    unknownKind: { status: 'failed', failureKind: null },
    bounced: { status: 'bounced' },
    complained: { status: 'complained' },
    suppressedEmail: { status: 'suppressed' },
    sent: { status: 'sent' },
  });
  const before = await campaignRow(id);
  const untouched = [
    'unsubscribed',
    'suppressed',
    'deleted',
    'permanent',
    'unknownKind',
    'bounced',
    'complained',
    'suppressedEmail',
    'sent',
  ];
  const rowsBefore = Object.fromEntries(
    await Promise.all(untouched.map(async (n) => [n, await emailRow(email[n].id)] as const)),
  );

  const res = await retry(p, id);
  expect(res.status).toBe(202);
  expect(res.body.data).toMatchObject({
    id,
    status: 'SENDING',
    retried: 2,
    skipped: 3,
    completedAt: null,
    recipients: 11,
  });

  for (const n of ['retryA', 'retryB']) {
    expect(await emailRow(email[n].id)).toMatchObject({
      status: 'queued',
      failureKind: null,
      error: null,
      claimToken: null,
      retriedAt: expect.any(Date),
      attempts: 1,
    });
  }
  for (const n of untouched) expect([n, await emailRow(email[n].id)]).toEqual([n, rowsBefore[n]]);

  const after = await campaignRow(id);
  expect(after).toMatchObject({
    status: 'SENDING',
    enqueueCursor: null,
    fanoutDone: true,
    fanoutCursor: before.fanoutCursor,
    retryFailedAt: expect.any(Date),
    completedAt: null,
  });

  // The worker's feed finds the retried rows among a chunk, and only them.
  const allIds = Object.values(email).map((e) => e.id);
  expect((await retriedEmailIds(db(), id, allIds)).sort()).toEqual([email.retryA.id, email.retryB.id].sort());

  const timeline = (await as(p).get(`/emails/${email.retryA.id}`)).body.data;
  expect(timeline.status).toBe('queued');
  expect(timeline.timeline.map((e: { type: string }) => e.type)).toEqual(['queued', 'retried']);
  expect(timeline.timeline[1].data).toEqual({ previousError: 'gave up after 1 attempts: InternalFailure: internal' });

  const events = (await as(p).get(`/campaigns/${id}/timeline`)).body.data.data;
  expect(events).toEqual([
    expect.objectContaining({
      type: 'retry_failed',
      data: { retried: 2, skipped: 3, previousCompletedAt: before.completedAt!.toISOString() },
    }),
  ]);

  const hooks = await db().select().from(webhookDeliveries).where(eq(webhookDeliveries.projectId, p.id));
  const sending = hooks.filter(
    (h) => h.eventType === 'campaign.sending' && (h.payload as { data: { retryFailed?: boolean } }).data.retryFailed,
  );
  expect(sending.map((h) => (h.payload as { data: unknown }).data)).toEqual([
    { campaignId: id, retryFailed: true, retried: 2 },
  ]);

  const again = await retry(p, id);
  expect(again.status).toBe(409);
  expect(again.body.error).toMatchObject({
    code: 'INVALID_STATE',
    message: expect.stringMatching(/already retried .*runs once per campaign/),
  });
});

test('nothing to retry: 200, the campaign stays SENT, and the retry is used', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sentCampaign(p, {
    ok: { status: 'sent' },
    rejected: { status: 'failed', failureKind: 'permanent' },
  });
  const completedAt = (await campaignRow(id)).completedAt!;
  const res = await retry(p, id);
  expect(res.status).toBe(200);
  expect(res.body.data).toMatchObject({
    status: 'SENT',
    retried: 0,
    skipped: 0,
    completedAt: completedAt.toISOString(),
  });
  expect((await as(p).get(`/campaigns/${id}/timeline`)).body.data.data).toEqual([
    expect.objectContaining({
      type: 'retry_failed',
      data: { retried: 0, skipped: 0, previousCompletedAt: completedAt.toISOString() },
    }),
  ]);
  expect((await retry(p, id)).status).toBe(409);
  expect((await campaignRow(id)).status).toBe('SENT');
});

test('two concurrent calls: one retries, the other is refused', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id, email } = await sentCampaign(p, {
    a: { status: 'failed', failureKind: 'transient' },
    b: { status: 'failed', failureKind: 'transient' },
  });
  const answers = await Promise.all([retry(p, id), retry(p, id), retry(p, id)]);
  expect(answers.map((r) => r.status).sort()).toEqual([202, 409, 409]);
  expect(answers.find((r) => r.status === 202)!.body.data.retried).toBe(2);
  const timeline = (await as(p).get(`/emails/${email.a.id}`)).body.data.timeline as { type: string }[];
  expect(timeline.filter((e) => e.type === 'retried')).toHaveLength(1);
});

test('refused unless SENT (409 naming the state); other projects, unknown ids and public keys are refused without changing anything', async () => {
  const p = await createTestProject(ctx.api.database);
  const other = await createTestProject(ctx.api.database);

  const draft = await createCampaign(p, false);
  const draftRetry = await retry(p, draft);
  expect(draftRetry.status).toBe(409);
  expect(draftRetry.body.error).toMatchObject({
    code: 'INVALID_STATE',
    message: "Cannot retry the failed emails of a campaign that is DRAFT; only a SENT campaign's can be retried",
  });

  const sending = await createCampaign(p);
  expect((await retry(p, sending)).body.error.message).toMatch(/campaign that is SENDING/);
  expect((await retry(p, sending)).status).toBe(409);

  const paused = await createCampaign(p);
  await db().transaction((tx) => pauseCampaign(tx, paused, 'bounce_rate', { hardBounceRate: 0.1 }));
  expect((await retry(p, paused)).body.error.message).toMatch(/campaign that is PAUSED/);

  const cancelled = await createCampaign(p);
  expect((await as(p).post(`/campaigns/${cancelled}/cancel`, {})).status).toBe(200);
  expect((await retry(p, cancelled)).body.error.message).toMatch(/campaign that is CANCELLED/);

  const { id, email } = await sentCampaign(p, { a: { status: 'failed', failureKind: 'transient' } });
  const otherProject = await retry(other, id);
  expect(otherProject.status).toBe(404);
  expect(otherProject.body.error.code).toBe('NOT_FOUND');
  expect((await retry(p, newId())).status).toBe(404);
  expect((await retry(p, 'not-a-uuid')).status).toBe(400);
  const publicKey = await request(ctx.api.app)
    .post(`/campaigns/${id}/retry-failed`)
    .set('Authorization', `Bearer ${p.publicKey}`)
    .send({});
  expect(publicKey.status).toBe(403);
  expect(publicKey.body.error.code).toBe('PUBLIC_KEY_NOT_ALLOWED');
  expect((await request(ctx.api.app).post(`/campaigns/${id}/retry-failed`).send({})).status).toBe(401);

  // None of the refused calls used the retry or touched an email.
  for (const c of [draft, sending, paused, cancelled, id]) expect((await campaignRow(c)).retryFailedAt).toBeNull();
  expect(await emailRow(email.a.id)).toMatchObject({ status: 'failed', failureKind: 'transient', retriedAt: null });
  expect((await retry(p, id)).status).toBe(202);
});
