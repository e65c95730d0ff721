/**
 * Snoozed contacts through the worker and the SES emulator: a campaign leaves a snoozed contact out and counts it
 * (`stats.skipped.snoozed`) while the others are mailed; a transactional send to the snoozed contact is delivered;
 * a marketing workflow's SEND_EMAIL step is skipped with the cause `snoozed`, a transactional one sends; and a
 * snooze that runs out is cleared by the worker's expiry pass and announced once as `contact.unsnoozed`
 * (`method: expired`), after which a campaign reaches the contact again.
 *
 * The file has its own database: the worker's reconciler and expiry pass act on every project of theirs.
 */
import { sql } from 'drizzle-orm';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import {
  client,
  createTestProject,
  parseMail,
  recipient,
  sesSendsTo,
  waitFor,
  type TestProject,
} from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({
  isolated: true,
  env: { SES_MAX_SEND_RATE: '50', CAMPAIGN_TICK_MS: '100', WORKFLOW_INBOX_POLL_MS: '200' },
});
const ctx = e2e;

const DAY = 86_400_000;

async function campaign(p: TestProject): Promise<Record<string, unknown>> {
  const as = client(ctx.api.app, p);
  const created = await as.post('/campaigns', {
    name: 'c',
    subject: 'News',
    body: '<p>News</p><a href="{{unsubscribeUrl}}">stop</a>',
    from: `news@${p.domain}`,
    audienceType: 'ALL',
  });
  expect(created.status).toBe(201);
  const id = created.body.data.id as string;
  expect((await as.post(`/campaigns/${id}/send`, {})).status).toBe(200);
  await waitFor(async () => (await as.get(`/campaigns/${id}`)).body.data.status === 'SENT', 30_000, 'campaign SENT');
  return (await as.get(`/campaigns/${id}/stats`)).body.data;
}

test('a campaign skips a snoozed contact and counts it; a transactional send to that contact is delivered', async () => {
  const p = await createTestProject(ctx.api.database);
  const as = client(ctx.api.app, p);
  const [a, b, snoozed] = [recipient('cmpa'), recipient('cmpb'), recipient('cmpz')];
  for (const email of [a, b]) expect((await as.post('/contacts', { email })).status).toBe(201);
  expect(
    (await as.post('/contacts', { email: snoozed, snoozedUntil: new Date(Date.now() + 30 * DAY).toISOString() }))
      .status,
  ).toBe(201);

  const stats = await campaign(p);
  expect(stats).toMatchObject({ recipients: 2, sent: 2, suppressed: 0, skipped: { snoozed: 1 } });
  await waitFor(async () => (await sesSendsTo([a, b])).length === 2, 20_000, 'the two campaign emails at SES');
  expect(await sesSendsTo([snoozed])).toEqual([]);

  const receipt = await as.post('/v1/send', {
    to: snoozed,
    from: `app@${p.domain}`,
    subject: 'Your receipt',
    body: '<p>Paid</p>',
  });
  expect(receipt.status).toBe(202);
  const id = receipt.body.data.emails[0].email as string;
  await waitFor(async () => (await as.get(`/emails/${id}`)).body.data.status === 'sent', 20_000, 'the receipt sent');
  const sends = await sesSendsTo([snoozed]);
  expect(sends).toHaveLength(1);
});

test('a marketing workflow SEND_EMAIL step is skipped for a snoozed contact with the cause; a transactional step sends', async () => {
  const p = await createTestProject(ctx.api.database);
  const as = client(ctx.api.app, p);
  const tpl = async (type: string) =>
    (
      await as.post('/templates', {
        name: type,
        subject: `${type} mail`,
        body: '<p>Hi</p>',
        type,
        from: `wf@${p.domain}`,
      })
    ).body.data.id as string;
  const workflow = async (templateId: string) => {
    const id = (await as.post('/workflows', { name: 'wf', trigger: { type: 'MANUAL' } })).body.data.id as string;
    expect(
      (
        await as.put(`/workflows/${id}/graph`, {
          steps: [{ key: 's', type: 'SEND_EMAIL', config: { templateId } }],
          transitions: [{ from: null, to: 's' }],
        })
      ).status,
    ).toBe(200);
    expect((await as.patch(`/workflows/${id}`, { enabled: true })).status).toBe(200);
    return id;
  };
  const run = async (wid: string, email: string) => {
    const eid = (await as.post(`/workflows/${wid}/executions`, { email })).body.data.id as string;
    return waitFor(
      async () => {
        const x = (await as.get(`/workflows/${wid}/executions/${eid}`)).body.data;
        return x.status === 'COMPLETED' ? x : undefined;
      },
      20_000,
      'execution completed',
    );
  };
  const to = recipient('wfz');
  await as.post('/contacts', { email: to, snoozedUntil: new Date(Date.now() + 30 * DAY).toISOString() });

  const marketing = await run(await workflow(await tpl('MARKETING')), to);
  expect(marketing.steps[0]).toMatchObject({
    type: 'SEND_EMAIL',
    status: 'SKIPPED',
    output: { cause: 'snoozed', reason: 'contact has paused marketing email (snoozed)' },
  });

  const transactional = await run(await workflow(await tpl('TRANSACTIONAL')), to);
  expect(transactional.steps[0]).toMatchObject({ type: 'SEND_EMAIL', status: 'COMPLETED' });
  await waitFor(async () => (await sesSendsTo([to])).length === 1, 20_000, 'the transactional step at SES');
  expect((await parseMail((await sesSendsTo([to]))[0])).subject).toBe('TRANSACTIONAL mail');
});

test('a snooze that runs out is cleared by the worker and announced once as contact.unsnoozed (expired); the next campaign reaches the contact', async () => {
  const p = await createTestProject(ctx.api.database);
  const as = client(ctx.api.app, p);
  await createWebhookEndpoint(ctx.api.database.db, p.id, {
    url: 'https://hooks.example.com/x',
    eventTypes: ['contact.unsnoozed'],
    secret: 'whsec_x',
  });
  const to = recipient('expire');
  const until = new Date(Date.now() + 1500).toISOString();
  const id = (await as.post('/contacts', { email: to, snoozedUntil: until })).body.data.id as string;

  await waitFor(
    async () => (await as.get(`/contacts/${id}`)).body.data.snoozedUntil === null,
    20_000,
    'the snooze cleared',
  );
  const events = await ctx.api.database.db.execute<{ name: string; data: Record<string, unknown> }>(
    sql`select name, data from events where contact_id = ${id}::uuid and name = 'contact.unsnoozed'`,
  );
  expect(events.rows).toEqual([
    {
      name: 'contact.unsnoozed',
      data: { method: 'expired', snoozedUntil: null, previousSnoozedUntil: expect.any(String) },
    },
  ]);
  expect(Date.parse(String(events.rows[0].data.previousSnoozedUntil))).toBe(Date.parse(until));
  const hooks = await ctx.api.database.db.execute<{ payload: { data: Record<string, unknown> } }>(
    sql`select payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type = 'contact.unsnoozed'`,
  );
  expect(hooks.rows.map((r) => r.payload.data)).toEqual([
    { contactId: id, email: to, snoozedUntil: null, previousSnoozedUntil: until, method: 'expired' },
  ]);

  const stats = await campaign(p);
  expect(stats).toMatchObject({ recipients: 1, skipped: { snoozed: 0 } });
  await waitFor(async () => (await sesSendsTo([to])).length === 1, 20_000, 'the campaign email at SES');
  // Later passes found nothing more to announce.
  const again = await ctx.api.database.db.execute<{ n: number }>(
    sql`select count(*)::int as n from events where contact_id = ${id}::uuid and name = 'contact.unsnoozed'`,
  );
  expect(again.rows[0].n).toBe(1);
});
