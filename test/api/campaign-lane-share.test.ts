/**
 * Who shares the campaign lane (docs/architecture.md#priority-lanes-and-fair-share): live and test campaigns are
 * counted apart, so a test campaign never takes a part of the lane from the live projects (and test traffic keeps a
 * share of its own).
 *
 * Own database: the share counts every SENDING campaign of its database.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { addDomain, createProject, type CreatedProject } from '@mailroom/projects/queries/projects';
import { campaignLaneShare } from '@mailroom/db/queries/send-quota';
import { campaignLaneDepth, campaignWindow } from '@mailroom/campaigns/lane';
import { recipient, useIsolatedApi } from '../support/harness';

const ctx = useIsolatedApi();

async function project(): Promise<CreatedProject & { domain: string }> {
  const p = await createProject(ctx.api.database.db, `lane ${randomBytes(3).toString('hex')}`);
  const domain = `ln${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(ctx.api.database.db, p.id, domain, true);
  await request(ctx.api.app)
    .post('/contacts')
    .set('Authorization', `Bearer ${p.secretKey}`)
    .send({ email: recipient('lane'), subscribed: true })
    .expect(201);
  return { ...p, domain };
}

/** A campaign moved to SENDING with `key` (no worker here: it stays SENDING, fan-out not done, so it is feeding). */
async function sending(p: { domain: string }, key: string): Promise<string> {
  const as = (path: string, body: object) =>
    request(ctx.api.app).post(path).set('Authorization', `Bearer ${key}`).send(body);
  const draft = await as('/campaigns', {
    name: 'lane',
    subject: 'S',
    body: '<p>b</p>',
    from: `n@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(draft.status).toBe(201);
  expect((await as(`/campaigns/${draft.body.data.id}/send`, {})).status).toBe(200);
  return draft.body.data.id as string;
}

test("test campaigns take no part of the live projects' share; they share a lane of their own", async () => {
  const [a, b] = [await project(), await project()];
  const live1 = await sending(a, a.secretKey);
  const live2 = await sending(a, a.secretKey);
  const testA = await sending(a, a.testSecretKey);
  const testB = await sending(b, b.testSecretKey);

  // Live: one project (A) with two live campaigns; the two test campaigns (of A and B) are not counted.
  expect(await campaignLaneShare(ctx.api.database.db, live1, a.id)).toEqual({ projects: 1, campaignsOfProject: 2 });
  expect(await campaignLaneShare(ctx.api.database.db, live2, a.id)).toEqual({ projects: 1, campaignsOfProject: 2 });
  // Test: two projects with one test campaign each; A's live campaigns are not counted.
  expect(await campaignLaneShare(ctx.api.database.db, testA, a.id)).toEqual({ projects: 2, campaignsOfProject: 1 });
  expect(await campaignLaneShare(ctx.api.database.db, testB, b.id)).toEqual({ projects: 2, campaignsOfProject: 1 });

  // At 14/s (lane 42): each live campaign of A keeps 21 jobs, as with no test campaign at all (with them counted
  // it was 42 / 2 projects / 3 campaigns = 7).
  const depth = campaignLaneDepth(14, { campaignLaneSeconds: 3, campaignTickMs: 1_000 });
  expect(campaignWindow(depth, await campaignLaneShare(ctx.api.database.db, live1, a.id), 5_000)).toBe(21);
});
