/**
 * Marketing email and the contact's subscription: `POST /v1/send` with a MARKETING template to a contact who is
 * not subscribed (unsubscribed through the one-click link, or created by this very send without `subscribed`)
 * stores the email `suppressed` with reason `unsubscribed`, answers it in the 202 like a recipient on the
 * suppression list, and records `email.suppressed`; a TRANSACTIONAL template to the same contact goes. And the
 * worker's guard: a contact who unsubscribes between acceptance and send is not mailed.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import { projects } from '@mailroom/db/schema';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { startWorker } from '../../apps/worker/src/main';
import {
  client,
  createTestProject,
  recipient,
  sesRecordedTo,
  useApiWithProject,
  waitFor,
  type TestProject,
} from '../support/harness';

const ctx = useApiWithProject();

/** A project with a MARKETING and a TRANSACTIONAL template and a webhook endpoint taking `email.*`. */
async function setup() {
  const p = await createTestProject(ctx.api.database);
  const as = client(ctx.api.app, p);
  const tpl = async (type: 'MARKETING' | 'TRANSACTIONAL') =>
    (
      await as.post('/templates', {
        name: type,
        subject: 'Hi',
        body: '<p>Hi</p><a href="{{unsubscribeUrl}}">stop</a>',
        type,
        from: `news@${p.domain}`,
      })
    ).body.data.id as string;
  await createWebhookEndpoint(ctx.api.database.db, p.id, {
    url: 'https://hooks.example.com/x',
    eventTypes: ['email.*'],
    secret: 'whsec_x',
  });
  return { p, as, marketing: await tpl('MARKETING'), transactional: await tpl('TRANSACTIONAL') };
}

/** Unsubscribes an email's contact the way a mailbox provider does: RFC 8058 one-click POST to its link. */
async function oneClick(p: TestProject, emailId: string) {
  const [{ signingKey }] = await ctx.api.database.db
    .select({ signingKey: projects.signingKey })
    .from(projects)
    .where(eq(projects.id, p.id));
  const res = await request(ctx.api.app)
    .post(`/unsubscribe/${createUnsubscribeToken(emailId, signingKey)}`)
    .set('Accept', 'application/json');
  expect(res.body.data).toMatchObject({ unsubscribed: true, changed: true });
}

const suppressedHooks = async (p: TestProject) =>
  (
    await ctx.api.database.db.execute<{ payload: { data: Record<string, unknown> } }>(
      sql`select payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type = 'email.suppressed' order by id`,
    )
  ).rows.map((r) => r.payload.data);

describe('at acceptance', () => {
  test('a MARKETING send to a contact who unsubscribed through the one-click link is suppressed, reason unsubscribed, with email.suppressed', async () => {
    const { p, as, marketing, transactional } = await setup();
    const to = recipient('optout');
    expect((await as.post('/contacts', { email: to, subscribed: true })).status).toBe(201);
    const first = await as.post('/v1/send', { to, template: marketing });
    expect(first.body.data.emails[0]).toMatchObject({ status: 'queued' });
    await oneClick(p, first.body.data.emails[0].email);

    const res = await as.post('/v1/send', { to, template: marketing });
    expect(res.status).toBe(202);
    const [e] = res.body.data.emails;
    expect(e).toMatchObject({ status: 'suppressed', reason: 'unsubscribed', contact: { email: to } });
    expect(res.body.data.suppressed).toEqual([to]);
    const stored = await as.get(`/emails/${e.email}`);
    expect(stored.body.data).toMatchObject({
      status: 'suppressed',
      error: 'suppressed: contact is unsubscribed from marketing email',
    });
    expect(stored.body.data.timeline).toEqual([
      expect.objectContaining({
        type: 'suppressed',
        data: { reason: 'contact is unsubscribed from marketing email', cause: 'unsubscribed' },
      }),
    ]);
    expect(await suppressedHooks(p)).toEqual([
      expect.objectContaining({
        emailId: e.email,
        to,
        status: 'suppressed',
        reason: 'contact is unsubscribed from marketing email',
        cause: 'unsubscribed',
      }),
    ]);
    // The send left the subscription as it was (an omitted `subscribed` never changes a contact).
    expect((await as.get(`/contacts/${e.contact.id}`)).body.data.subscribed).toBe(false);

    // Transactional mail is not marketing: it still goes.
    const receipt = await as.post('/v1/send', { to, template: transactional });
    expect(receipt.body.data.emails[0]).toMatchObject({ status: 'queued' });
    expect(receipt.body.data.emails[0].reason).toBeUndefined();
  });

  test('the contact as this very request leaves it decides: created without `subscribed` (unsubscribed) or with `subscribed: true`', async () => {
    const { as, marketing } = await setup();
    const [fresh, optedIn] = [recipient('fresh'), recipient('optin')];
    const res = await as.post('/v1/send', { to: fresh, template: marketing });
    expect(res.body.data.emails[0]).toMatchObject({ status: 'suppressed', reason: 'unsubscribed' });
    expect((await as.get(`/contacts/${res.body.data.emails[0].contact.id}`)).body.data.subscribed).toBe(false);

    const ok = await as.post('/v1/send', { to: optedIn, template: marketing, subscribed: true });
    expect(ok.body.data.emails[0]).toMatchObject({ status: 'queued' });
    expect(ok.body.data.suppressed).toEqual([]);
    // Re-subscribing in the request lets the mail go to the contact held back before.
    const again = await as.post('/v1/send', { to: [fresh, optedIn], template: marketing, subscribed: true });
    expect(again.body.data.emails.map((e: { status: string }) => e.status)).toEqual(['queued', 'queued']);
  });

  test('the suppression list wins over the subscription as the reason', async () => {
    const { as, marketing } = await setup();
    const to = recipient('both');
    await as.post('/suppressions', { email: to });
    const res = await as.post('/v1/send', { to, template: marketing });
    expect(res.body.data.emails[0]).toMatchObject({ status: 'suppressed', reason: 'suppression_list' });
  });
});

describe('at the worker', () => {
  test('a contact who unsubscribes between acceptance and send is not mailed: the email ends suppressed, reason unsubscribed', async () => {
    const { p, as, marketing } = await setup();
    const to = recipient('between');
    const res = await as.post('/v1/send', { to, template: marketing, subscribed: true });
    const id = res.body.data.emails[0].email as string;
    expect(res.body.data.emails[0].status).toBe('queued');
    // No worker runs yet: the email waits queued while its contact unsubscribes through its own link.
    await oneClick(p, id);

    const worker = await startWorker(ctx.api.config, { healthPort: null });
    try {
      const done = await waitFor(
        async () => {
          const e = (await as.get(`/emails/${id}`)).body.data;
          return e.status === 'queued' || e.status === 'sending' ? undefined : e;
        },
        20_000,
        'the email final',
      );
      expect(done).toMatchObject({ status: 'suppressed', error: 'contact is unsubscribed from marketing email' });
      expect(done.timeline.map((t: { type: string }) => t.type)).toEqual(
        expect.arrayContaining(['queued', 'unsubscribed', 'suppressed']),
      );
      expect(done.timeline.find((t: { type: string }) => t.type === 'suppressed').data).toEqual({
        reason: 'contact is unsubscribed from marketing email',
        cause: 'unsubscribed',
      });
      expect(await suppressedHooks(p)).toEqual([
        expect.objectContaining({ emailId: id, status: 'suppressed', cause: 'unsubscribed' }),
      ]);
      expect(await sesRecordedTo([to])).toEqual([]);
    } finally {
      await worker.stop();
    }
  });
});
