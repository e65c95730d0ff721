/**
 * The PAUSED state through the API alone (no worker): a SENDING campaign paused by the guardrail machinery
 * (`pauseCampaign`) shows why, keeps its queued emails unclaimable, resumes exactly once (every other resume a
 * 409), cancels from PAUSED, and tells its story in `GET /campaigns/{id}/timeline`. Tenant isolation.
 */
import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { claimEmail } from '@mailroom/sending/queries/email-batches';
import { pauseCampaign } from '@mailroom/campaigns/queries/campaign-pause';
import { newId } from '@mailroom/platform/ids';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  recipient,
  useApiWithProject,
  type TestProject,
} from '../support/harness';

const ctx = useApiWithProject();
const as = (project: TestProject) => client(ctx.api.app, project);

/** A SENDING campaign (no worker runs, so nothing is fanned out) with one queued email of its own. */
async function sendingCampaign(p: TestProject): Promise<{ id: string; emailId: string }> {
  const created = await as(p).post('/campaigns', {
    name: 'Launch',
    subject: 'Hi',
    body: '<p>News</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  expect((await as(p).post(`/campaigns/${id}/send`, {})).body.data.status).toBe('SENDING');
  const emailId = newId();
  await ctx.api.database.db.transaction((tx) =>
    insertQueuedEmails(tx, [
      {
        id: emailId,
        projectId: p.id,
        campaignId: id,
        source: 'campaign',
        marketing: true,
        toEmail: recipient(),
        fromEmail: `news@${p.domain}`,
      },
    ]),
  );
  return { id, emailId };
}

const pause = (id: string) =>
  ctx.api.database.db.transaction((tx) =>
    pauseCampaign(tx, id, 'bounce_rate', { hardBounceRate: 0.125, outcomes: 200, threshold: 0.02 }),
  );

test('a paused campaign shows why; its queued emails cannot be claimed; resume moves it back to SENDING once', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id, emailId } = await sendingCampaign(p);
  expect((await pause(id)).moved).toBe(true);
  // Pausing is a move from SENDING only: a second pause changes nothing.
  expect((await pause(id)).moved).toBe(false);

  const paused = (await as(p).get(`/campaigns/${id}`)).body.data;
  expect(paused).toMatchObject({
    status: 'PAUSED',
    pausedReason: 'bounce_rate',
    pauseDetails: { hardBounceRate: 0.125, outcomes: 200, threshold: 0.02 },
  });
  expect(Date.parse(paused.pausedAt)).toBeGreaterThan(Date.now() - 60_000);

  const claim = await claimEmail(ctx.api.database.db, emailId, randomUUID(), 60_000);
  expect(claim).toEqual({ ok: false, kind: 'paused', campaignId: id });
  expect((await as(p).get(`/emails/${emailId}`)).body.data.status).toBe('queued');

  const resumed = await as(p).post(`/campaigns/${id}/resume`, {});
  expect(resumed.status).toBe(200);
  expect(resumed.body.data).toMatchObject({
    status: 'SENDING',
    pausedReason: null,
    pausedAt: null,
    pauseDetails: null,
  });
  const again = await as(p).post(`/campaigns/${id}/resume`, {});
  expect(again.status).toBe(409);
  expect(again.body.error).toMatchObject({
    code: 'INVALID_STATE',
    message: 'Cannot resume a campaign that is SENDING',
  });

  const timeline = (await as(p).get(`/campaigns/${id}/timeline`)).body.data;
  expect(timeline.data.map((e: { type: string }) => e.type)).toEqual(['paused', 'resumed']);
  expect(timeline.data[0].data).toEqual({
    reason: 'bounce_rate',
    hardBounceRate: 0.125,
    outcomes: 200,
    threshold: 0.02,
  });
  expect(timeline.data[1].data).toMatchObject({
    previousReason: 'bounce_rate',
    by: 'api',
    pausedMs: expect.any(Number),
  });
  expect(timeline.nextCursor).toBeNull();

  // Resumed, the email is claimable again.
  expect((await claimEmail(ctx.api.database.db, emailId, randomUUID(), 60_000)).ok).toBe(true);
});

test('cancel ends a paused campaign and its queued emails handed to the queue', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sendingCampaign(p);
  await pause(id);
  const cancelled = await as(p).post(`/campaigns/${id}/cancel`, {});
  expect(cancelled.status).toBe(200);
  expect(cancelled.body.data.status).toBe('CANCELLED');
  expect((await as(p).post(`/campaigns/${id}/resume`, {})).status).toBe(409);
});

test('resume is refused for campaigns that are not paused, and for other projects', async () => {
  const p = await createTestProject(ctx.api.database);
  const other = await createTestProject(ctx.api.database);
  const draft = await as(p).post('/campaigns', {
    name: 'D',
    subject: 'Hi',
    body: '<p>x</p>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  const draftResume = await as(p).post(`/campaigns/${draft.body.data.id}/resume`, {});
  expect(draftResume.status).toBe(409);
  expect(draftResume.body.error.message).toBe('Cannot resume a campaign that is DRAFT');

  const { id } = await sendingCampaign(p);
  await pause(id);
  expect((await as(other).post(`/campaigns/${id}/resume`, {})).status).toBe(404);
  expect((await as(other).get(`/campaigns/${id}/timeline`)).status).toBe(404);
  expect((await as(p).post(`/campaigns/${newId()}/resume`, {})).status).toBe(404);
  const publicKey = await request(ctx.api.app)
    .post(`/campaigns/${id}/resume`)
    .set('Authorization', `Bearer ${p.publicKey}`)
    .send({});
  expect(publicKey.status).toBe(403);
  // Still paused: none of the refused calls moved it.
  expect((await as(p).get(`/campaigns/${id}`)).body.data.status).toBe('PAUSED');
});

test('a recipient who unsubscribed while the campaign was paused is not mailed after the resume', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sendingCampaign(p);
  const contact = await as(p).post('/contacts', { email: recipient('unsub'), subscribed: true });
  expect(contact.status).toBe(201);
  const emailId = newId();
  await ctx.api.database.db.transaction((tx) =>
    insertQueuedEmails(tx, [
      {
        id: emailId,
        projectId: p.id,
        campaignId: id,
        contactId: contact.body.data.id,
        source: 'campaign',
        marketing: true,
        toEmail: contact.body.data.email,
        fromEmail: `news@${p.domain}`,
      },
    ]),
  );
  await pause(id);
  expect((await as(p).patch(`/contacts/${contact.body.data.id}`, { subscribed: false })).status).toBe(200);
  expect((await as(p).post(`/campaigns/${id}/resume`, {})).status).toBe(200);
  // The worker's claim sees the unsubscribe (the send processor then suppresses the email instead of sending it).
  const claim = await claimEmail(ctx.api.database.db, emailId, randomUUID(), 60_000);
  expect(claim.ok && claim.email.suppression).toBe('unsubscribed');
});

test('a test key cannot resume a live campaign (that would send real mail)', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sendingCampaign(p);
  await pause(id);
  const testKey = await request(ctx.api.app)
    .post(`/admin/projects/${p.id}/rotate-keys?mode=test`)
    .set('Authorization', `Bearer ${ADMIN_TOKEN}`)
    .send();
  expect(testKey.status).toBe(200);
  const refused = await request(ctx.api.app)
    .post(`/campaigns/${id}/resume`)
    .set('Authorization', `Bearer ${testKey.body.data.secretKey}`)
    .send({});
  expect(refused.status).toBe(403);
  expect(refused.body.error).toMatchObject({
    code: 'FORBIDDEN',
    message: 'A test key cannot resume a live campaign: that would send real mail',
  });
  const retry = await request(ctx.api.app)
    .post(`/campaigns/${id}/retry-failed`)
    .set('Authorization', `Bearer ${testKey.body.data.secretKey}`)
    .send({});
  expect(retry.status).toBe(403);
  expect((await as(p).get(`/campaigns/${id}`)).body.data.status).toBe('PAUSED');
});

test('a malformed timeline cursor is a 400 naming the field', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sendingCampaign(p);
  for (const cursor of ['abc', newId()]) {
    const res = await as(p).get(`/campaigns/${id}/timeline?cursor=${cursor}`);
    expect(res.status).toBe(400);
    expect(res.body.error.errors[0]).toMatchObject({ field: 'cursor' });
  }
});

test('the timeline pages by cursor', async () => {
  const p = await createTestProject(ctx.api.database);
  const { id } = await sendingCampaign(p);
  for (let i = 0; i < 3; i++) {
    await pause(id);
    expect((await as(p).post(`/campaigns/${id}/resume`, {})).status).toBe(200);
  }
  const first = (await as(p).get(`/campaigns/${id}/timeline?limit=4`)).body.data;
  expect(first.data).toHaveLength(4);
  const second = (await as(p).get(`/campaigns/${id}/timeline?limit=4&cursor=${first.nextCursor}`)).body.data;
  expect(second.data.map((e: { type: string }) => e.type)).toEqual(['paused', 'resumed']);
  expect(second.nextCursor).toBeNull();
});
