/**
 * Snoozing contacts through the API and the unsubscribe page (no worker): `snoozedUntil` on `POST` and
 * `PATCH /contacts` (returned by GET, 422 for a past or malformed time, 404 for another project's contact),
 * `contact.snoozed` / `contact.unsnoozed` events and webhook deliveries once per change, the page's "pause for 30 or
 * 90 days" form (plain HTML, the signed token, 422 for another number of days, 404 for a forged token), a
 * MARKETING `/v1/send` to a snoozed contact held back with cause `snoozed` while a TRANSACTIONAL one is accepted,
 * and the segment fields `snoozed` and `snoozedUntil`.
 */
import request from 'supertest';
import { and, eq, sql } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { projects } from '@mailroom/db/schema/projects';
import { events } from '@mailroom/db/schema/events';
import { createWebhookEndpoint } from '@mailroom/webhooks/queries/webhooks';
import { client, createTestProject, recipient, useApiWithProject, type TestProject } from '../support/harness';

const ctx = useApiWithProject();
const DAY = 86_400_000;

async function project() {
  const p = await createTestProject(ctx.api.database);
  await createWebhookEndpoint(ctx.api.database.db, p.id, {
    url: 'https://hooks.example.com/x',
    eventTypes: ['contact.*'],
    secret: 'whsec_x',
  });
  return { p, as: client(ctx.api.app, p) };
}

const hooks = async (p: TestProject) =>
  (
    await ctx.api.database.db.execute<{ event_type: string; payload: { data: Record<string, unknown> } }>(
      sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type like 'contact.%snoozed' order by id`,
    )
  ).rows.map((r) => ({ type: r.event_type, ...r.payload.data }));

const contactEvents = async (contactId: string) =>
  (
    await ctx.api.database.db
      .select()
      .from(events)
      .where(and(eq(events.contactId, contactId), sql`${events.name} like 'contact.%snoozed'`))
      .orderBy(events.id)
  ).map((e) => ({
    name: e.name,
    ...(e.data as object),
  }));

describe('the contacts API', () => {
  test('POST and PATCH set, move and clear snoozedUntil; GET returns it; each change is one event and one webhook', async () => {
    const { p, as } = await project();
    const to = recipient('snz');
    const until = new Date(Date.now() + 10 * DAY).toISOString();
    const created = await as.post('/contacts', { email: to, snoozedUntil: until });
    expect(created.status).toBe(201);
    expect(created.body.data).toMatchObject({ email: to, subscribed: true, snoozedUntil: until });
    const id = created.body.data.id as string;
    expect((await as.get(`/contacts/${id}`)).body.data.snoozedUntil).toBe(until);

    // The same time again changes nothing and records nothing.
    expect((await as.patch(`/contacts/${id}`, { snoozedUntil: until })).body.data.snoozedUntil).toBe(until);
    const later = new Date(Date.now() + 20 * DAY).toISOString();
    const moved = await as.patch(`/contacts/${id}`, { snoozedUntil: later, data: { plan: 'pro' } });
    expect(moved.status).toBe(200);
    expect(moved.body.data).toMatchObject({ snoozedUntil: later, data: { plan: 'pro' } });

    const cleared = await as.patch(`/contacts/${id}`, { snoozedUntil: null });
    expect(cleared.body.data.snoozedUntil).toBeNull();
    // Clearing again: nothing to clear.
    expect((await as.patch(`/contacts/${id}`, { snoozedUntil: null })).status).toBe(200);
    // A POST without the field leaves it as it is.
    expect((await as.post('/contacts', { email: to, data: { x: 1 } })).body.data.snoozedUntil).toBeNull();

    expect(await contactEvents(id)).toEqual([
      { name: 'contact.snoozed', method: 'api', snoozedUntil: expect.any(String), previousSnoozedUntil: null },
      {
        name: 'contact.snoozed',
        method: 'api',
        snoozedUntil: expect.any(String),
        previousSnoozedUntil: expect.any(String),
      },
      { name: 'contact.unsnoozed', method: 'api', snoozedUntil: null, previousSnoozedUntil: expect.any(String) },
    ]);
    expect(await hooks(p)).toEqual([
      {
        type: 'contact.snoozed',
        contactId: id,
        email: to,
        snoozedUntil: until,
        previousSnoozedUntil: null,
        method: 'api',
      },
      {
        type: 'contact.snoozed',
        contactId: id,
        email: to,
        snoozedUntil: later,
        previousSnoozedUntil: until,
        method: 'api',
      },
      {
        type: 'contact.unsnoozed',
        contactId: id,
        email: to,
        snoozedUntil: null,
        previousSnoozedUntil: later,
        method: 'api',
      },
    ]);
  });

  test('422 naming snoozedUntil for a past or malformed time; 404 for another project; nothing changes', async () => {
    const { as } = await project();
    const other = await project();
    const to = recipient('snz422');
    const id = (await as.post('/contacts', { email: to })).body.data.id as string;
    for (const snoozedUntil of [new Date(Date.now() - 1000).toISOString(), 'tomorrow', 17]) {
      const res = await as.patch(`/contacts/${id}`, { snoozedUntil });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('VALIDATION_ERROR');
      expect(res.body.error.errors[0].field).toBe('snoozedUntil');
    }
    const post = await as.post('/contacts', { email: to, snoozedUntil: '2001-01-01T00:00:00Z' });
    expect(post.status).toBe(422);
    expect(post.body.error.errors[0].field).toBe('snoozedUntil');
    const foreign = await other.as.patch(`/contacts/${id}`, { snoozedUntil: new Date(Date.now() + DAY).toISOString() });
    expect(foreign.status).toBe(404);
    expect((await as.get(`/contacts/${id}`)).body.data.snoozedUntil).toBeNull();
    expect(await contactEvents(id)).toEqual([]);
  });

  test('a MARKETING /v1/send to a snoozed contact is held back (cause snoozed); a TRANSACTIONAL one is accepted', async () => {
    const { p, as } = await project();
    const to = recipient('snzsend');
    await as.post('/contacts', { email: to, snoozedUntil: new Date(Date.now() + DAY).toISOString() });
    const tpl = async (type: string) =>
      (await as.post('/templates', { name: type, subject: 'Hi', body: '<p>Hi</p>', type, from: `news@${p.domain}` }))
        .body.data.id as string;
    const marketing = await as.post('/v1/send', { to, template: await tpl('MARKETING') });
    expect(marketing.status).toBe(202);
    expect(marketing.body.data.emails[0]).toMatchObject({ status: 'suppressed', reason: 'snoozed' });
    const stored = (await as.get(`/emails/${marketing.body.data.emails[0].email}`)).body.data;
    expect(stored.timeline[0].data).toEqual({
      reason: 'contact has paused marketing email (snoozed)',
      cause: 'snoozed',
    });
    const receipt = await as.post('/v1/send', { to, template: await tpl('TRANSACTIONAL') });
    expect(receipt.body.data.emails[0].status).toBe('queued');
  });

  test('segment filters: snoozed equals true/false and snoozedUntil comparisons', async () => {
    const { as } = await project();
    const [a, b, c] = [recipient('sga'), recipient('sgb'), recipient('sgc')];
    await as.post('/contacts', { email: a, snoozedUntil: new Date(Date.now() + 5 * DAY).toISOString() });
    await as.post('/contacts', { email: b, snoozedUntil: new Date(Date.now() + 50 * DAY).toISOString() });
    await as.post('/contacts', { email: c });
    const emailsOf = async (filter: object) => {
      const res = await as.get(`/contacts?filter=${encodeURIComponent(JSON.stringify(filter))}`);
      expect(res.status).toBe(200);
      return res.body.data.items.map((x: { email: string }) => x.email).sort();
    };
    expect(await emailsOf([{ field: 'snoozed', operator: 'equals', value: true }])).toEqual([a, b].sort());
    expect(await emailsOf([{ field: 'snoozed', operator: 'equals', value: false }])).toEqual([c]);
    expect(await emailsOf([{ field: 'snoozed', operator: 'notEquals', value: true }])).toEqual([c]);
    expect(
      await emailsOf([
        { field: 'snoozedUntil', operator: 'greaterThan', value: new Date(Date.now() + 10 * DAY).toISOString() },
      ]),
    ).toEqual([b]);
    const bad = await as.get(
      `/contacts?filter=${encodeURIComponent(JSON.stringify([{ field: 'snoozed', operator: 'contains', value: 'x' }]))}`,
    );
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('filter.0.operator');
  });
});

describe('the unsubscribe page', () => {
  async function tokenFor(p: TestProject, to: string) {
    const sent = await client(ctx.api.app, p).post('/v1/send', {
      to,
      from: `a@${p.domain}`,
      subject: 'S',
      body: '<p>B</p>',
      subscribed: true,
    });
    const [{ key }] = await ctx.api.database.db
      .select({ key: projects.signingKey })
      .from(projects)
      .where(eq(projects.id, p.id));
    return {
      emailId: sent.body.data.emails[0].email as string,
      contactId: sent.body.data.emails[0].contact.id as string,
      token: createUnsubscribeToken(sent.body.data.emails[0].email as string, key),
    };
  }

  test('offers a pause for 30 or 90 days as a plain form; posting it snoozes the contact, keeps it subscribed, and is announced', async () => {
    const { p, as } = await project();
    const to = recipient('pause');
    const { token, emailId, contactId } = await tokenFor(p, to);
    const page = await request(ctx.api.app).get(`/unsubscribe/${token}`);
    expect(page.status).toBe(200);
    expect(page.text).not.toMatch(/<script/i);
    expect(page.text).toContain(`<form method="post" action="${token}/pause">`);
    expect(page.text).toContain('<button type="submit" name="days" value="30">');
    expect(page.text).toContain('<button type="submit" name="days" value="90">');

    const before = Date.now();
    const html = await request(ctx.api.app).post(`/unsubscribe/${token}/pause`).type('form').send('days=30');
    expect(html.status).toBe(200);
    expect(html.type).toBe('text/html');
    expect(html.text).toContain('Paused');
    expect(html.headers['content-security-policy']).toContain("default-src 'none'");
    const contact = (await as.get(`/contacts/${contactId}`)).body.data;
    expect(contact.subscribed).toBe(true);
    const until = Date.parse(contact.snoozedUntil);
    expect(until).toBeGreaterThanOrEqual(before + 30 * DAY - 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + 30 * DAY + 1000);

    const json = await request(ctx.api.app)
      .post(`/unsubscribe/${token}/pause`)
      .set('Accept', 'application/json')
      .type('form')
      .send('days=90');
    expect(json.body).toMatchObject({ success: true, data: { email: to, days: 90, changed: true } });
    expect(Date.parse((await as.get(`/contacts/${contactId}`)).body.data.snoozedUntil)).toBeGreaterThan(
      until + 59 * DAY,
    );
    expect(await hooks(p)).toEqual([
      expect.objectContaining({
        type: 'contact.snoozed',
        contactId,
        method: 'link',
        emailId,
        campaignId: null,
        previousSnoozedUntil: null,
      }),
      expect.objectContaining({ type: 'contact.snoozed', contactId, method: 'link', emailId }),
    ]);
  });

  test('another number of days is 422 naming days; a forged token is 404; neither changes the contact', async () => {
    const { p, as } = await project();
    const { token, contactId } = await tokenFor(p, recipient('pause422'));
    const bad = await request(ctx.api.app)
      .post(`/unsubscribe/${token}/pause`)
      .set('Accept', 'application/json')
      .type('form')
      .send('days=7');
    expect(bad.status).toBe(422);
    expect(bad.body.error.errors[0].field).toBe('days');
    const forged = `${token.slice(0, 30)}${token[30] === 'A' ? 'B' : 'A'}${token.slice(31)}`;
    expect((await request(ctx.api.app).post(`/unsubscribe/${forged}/pause`).type('form').send('days=30')).status).toBe(
      404,
    );
    expect((await as.get(`/contacts/${contactId}`)).body.data.snoozedUntil).toBeNull();
  });
});
