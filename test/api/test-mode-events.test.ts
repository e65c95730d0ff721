/**
 * Test mode, events: every route that records contact events from a request records test events (`events.test`,
 * shown by `GET /events`) when called with a test key — `/v1/track`, `/events/track`, `/v1/send` and
 * `POST /contacts` (a new subscribed contact's `contact.subscribed`), `PATCH /contacts/{id}` (`contact.unsubscribed`),
 * STATIC segment membership (`segment.<name>.entry/exit`) — and the unsubscribe link of a test email records a test
 * event. The same calls with a live key record live events. Workflows reading the flag: test/e2e/test-mode-workflows.test.ts.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { createUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { loadConfig } from '@mailroom/config/config';
import { addDomain, createProject, type CreatedProject } from '@mailroom/projects/queries/projects';
import { projects } from '@mailroom/db/schema/projects';
import { recipient, startTestApi, testEnv, type TestApi } from '../support/harness';

let api: TestApi;
let p: CreatedProject & { domain: string };
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv()));
  const created = await createProject(api.database.db, `tme ${randomBytes(3).toString('hex')}`);
  const domain = `tme${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(api.database.db, created.id, domain, true);
  p = { ...created, domain };
});
afterAll(async () => {
  await api.close();
});

const as = (key: string) => ({
  post: (path: string, body: object) => request(api.app).post(path).set('Authorization', `Bearer ${key}`).send(body),
  patch: (path: string, body: object) => request(api.app).patch(path).set('Authorization', `Bearer ${key}`).send(body),
  get: (path: string) => request(api.app).get(path).set('Authorization', `Bearer ${key}`),
});

/** `[name, test]` of a contact's events, by name (events of one statement share a millisecond: no order). */
async function eventsOf(contactId: string): Promise<[string, boolean][]> {
  const res = await as(p.secretKey).get(`/events?contactId=${contactId}&limit=100`);
  expect(res.status).toBe(200);
  return (res.body.data.items as { name: string; test: boolean }[])
    .map((e): [string, boolean] => [e.name, e.test])
    .sort((a, b) => a[0].localeCompare(b[0]));
}

describe.each([
  ['test', true],
  ['live', false],
] as const)('with a %s key', (mode, isTest) => {
  const keys = () => (isTest ? { sk: p.testSecretKey, pk: p.testPublicKey } : { sk: p.secretKey, pk: p.publicKey });

  test(`/v1/track and /events/track record ${mode} events (and the new contact's contact.subscribed)`, async () => {
    const email = recipient('trk');
    const tracked = await as(keys().pk).post('/v1/track', { email, event: 'signup', data: { plan: 'pro' } });
    expect(tracked.status).toBe(200);
    const plunk = await as(keys().sk).post('/events/track', { email, name: 'login' });
    expect(plunk.status).toBe(201);
    expect(await eventsOf(tracked.body.data.contact)).toEqual([
      ['contact.subscribed', isTest],
      ['login', isTest],
      ['signup', isTest],
    ]);
  });

  test(`POST /contacts, PATCH /contacts/{id}, /v1/send and STATIC segment membership record ${mode} events`, async () => {
    const email = recipient('con');
    const created = await as(keys().sk).post('/contacts', { email, subscribed: true });
    expect(created.status).toBe(201);
    const id = created.body.data.id as string;
    expect((await as(keys().sk).patch(`/contacts/${id}`, { subscribed: false })).status).toBe(200);
    const sent = await as(keys().sk).post('/v1/send', {
      to: email,
      from: `a@${p.domain}`,
      subject: 'S',
      body: '<p>B</p>',
      subscribed: true,
    });
    expect(sent.status).toBe(202);
    const segment = await as(p.secretKey).post('/segments', {
      name: `static ${randomBytes(3).toString('hex')}`,
      type: 'STATIC',
      trackMembership: true,
    });
    expect(segment.status).toBe(201);
    const name = segment.body.data.name as string;
    expect(
      (await as(keys().sk).post(`/segments/${segment.body.data.id}/members`, { contactIds: [id] })).body.data.changed,
    ).toBe(1);
    expect(
      (await as(keys().sk).post(`/segments/${segment.body.data.id}/members/remove`, { emails: [email] })).body.data
        .changed,
    ).toBe(1);
    expect(await eventsOf(id)).toEqual([
      ['contact.subscribed', isTest],
      ['contact.subscribed', isTest],
      ['contact.unsubscribed', isTest],
      [`segment.${name}.entry`, isTest],
      [`segment.${name}.exit`, isTest],
    ]);
  });

  test(`the unsubscribe link of a ${mode} email records a ${mode} contact.unsubscribed`, async () => {
    const email = recipient('uns');
    const sent = await as(keys().sk).post('/v1/send', {
      to: email,
      from: `a@${p.domain}`,
      subject: 'S',
      body: '<p>B</p>',
      subscribed: true,
    });
    expect(sent.status).toBe(202);
    const emailId = sent.body.data.emails[0].email as string;
    const contactId = sent.body.data.emails[0].contact.id as string;
    const [{ key }] = await api.database.db
      .select({ key: projects.signingKey })
      .from(projects)
      .where(eq(projects.id, p.id));
    const res = await request(api.app)
      .post(`/unsubscribe/${createUnsubscribeToken(emailId, key)}`)
      .set('Accept', 'application/json')
      .type('form')
      .send({ 'List-Unsubscribe': 'One-Click' });
    expect(res.status).toBe(200);
    expect(await eventsOf(contactId)).toEqual([
      ['contact.subscribed', isTest],
      ['contact.unsubscribed', isTest],
    ]);
  });
});
