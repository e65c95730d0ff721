/**
 * Topic columns of a contact import end to end (`topic:<name>`): the choices a CSV sets, read back through
 * GET /contacts/{id}/topics; the events and webhook deliveries of changed standings only; an unknown topic column
 * refused at upload naming the column; the webhooks delivered once their batch commits; a re-import changing nothing; another project's topic of the same name
 * untouched.
 */
import request from 'supertest';
import { eq, sql } from 'drizzle-orm';
import { contactImports } from '@mailroom/db/schema/imports';
import { startReceiver, type Receiver } from '../support/receiver';
import { client, createTestProject, waitFor, type TestProject } from '../support/harness';
import { useE2e } from '../support/e2e';

const e2e = useE2e({ env: { IMPORT_BATCH_SIZE: '3', WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true' } });
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  e2e.onTeardown(() => receiver.close());
});

const upload = (project: TestProject, content: string, filename = 'contacts.csv') =>
  request(e2e.api.app)
    .post('/contacts/import')
    .set('Authorization', project.auth)
    .attach('file', Buffer.from(content), filename);

async function finished(project: TestProject, id: string) {
  return waitFor(
    async () => {
      const res = await request(e2e.api.app).get(`/contacts/import/${id}`).set('Authorization', project.auth);
      return ['completed', 'failed'].includes(res.body.data.status) ? res.body.data : undefined;
    },
    30_000,
    `import ${id}`,
  );
}

async function topic(project: TestProject, name: string, defaultSubscription: 'opt_in' | 'opt_out') {
  const res = await client(e2e.api.app, project).post('/topics', { name, defaultSubscription });
  expect(res.status).toBe(201);
  return res.body.data.id as string;
}

async function contactId(project: TestProject, email: string): Promise<string> {
  const rows = await e2e.api.database.db.execute<{ id: string }>(
    sql`select id from contacts where project_id = ${project.id}::uuid and email = ${email}`,
  );
  return rows.rows[0].id;
}

/** `{ topic name: [subscribed, explicit] }` as GET /contacts/{id}/topics answers. */
async function standing(project: TestProject, email: string) {
  const res = await client(e2e.api.app, project).get(`/contacts/${await contactId(project, email)}/topics`);
  expect(res.status).toBe(200);
  return Object.fromEntries(
    res.body.data.topics.map((t: { name: string; subscribed: boolean; explicit: boolean }) => [
      t.name,
      [t.subscribed, t.explicit],
    ]),
  );
}

async function topicEvents(projectId: string) {
  const rows = await e2e.api.database.db.execute<{ email: string; name: string; data: Record<string, unknown> }>(sql`
    select c.email, e.name, e.data from events e join contacts c on c.id = e.contact_id
    where e.project_id = ${projectId}::uuid and e.name like 'contact.topic_%' order by c.email, e.name`);
  return rows.rows.map((r) => [r.email, r.name, r.data.topicName, r.data.method]);
}

test('two topic columns set the subscriptions; events and webhooks only for changed standings; a re-import changes nothing', async () => {
  const p = await createTestProject(e2e.api.database);
  const as = client(e2e.api.app, p);
  expect(
    (
      await as.post('/webhooks/endpoints', {
        url: receiver.url,
        eventTypes: ['contact.topic_subscribed', 'contact.topic_unsubscribed'],
      })
    ).status,
  ).toBe(201);
  const news = await topic(p, 'Product news', 'opt_out');
  const letter = await topic(p, 'Newsletter', 'opt_in');
  // Another project with a topic of the same name, and a contact of the same address.
  const other = await createTestProject(e2e.api.database);
  const otherLetter = await topic(other, 'Newsletter', 'opt_in');
  await client(e2e.api.app, other).post('/contacts', { email: 'a@x.test' });

  // Existing contacts: e already chose the newsletter; f only changes a topic.
  const e = (await as.post('/contacts', { email: 'e@x.test', data: { name: 'E' } })).body.data;
  await as.put(`/contacts/${e.id}/topics`, { topics: [{ topicId: letter, subscribed: true }] });
  await as.post('/contacts', { email: 'f@x.test', data: { name: 'F' } });
  await e2e.api.database.db.execute(sql`delete from webhook_deliveries where project_id = ${p.id}::uuid`);
  await e2e.api.database.db.execute(
    sql`delete from events where project_id = ${p.id}::uuid and name like 'contact.topic_%'`,
  );

  const csv = [
    'email,name,Topic:product NEWS,topic: Newsletter',
    'a@x.test,A,no,yes',
    'b@x.test,B,,TRUE',
    'c@x.test,C,0,',
    'd@x.test,D,maybe,1',
    'e@x.test,E,,yes',
    'f@x.test,F,no,',
    'g@x.test,G,1,0',
  ].join('\n');
  const res = await upload(p, csv);
  expect(res.status).toBe(202);
  const done = await finished(p, res.body.data.id);
  expect(done.status).toBe('completed');
  expect(done.counts).toEqual({ created: 4, updated: 1, skipped: 1, failed: 1 });
  expect(done.errors).toEqual([
    {
      row: 4,
      email: 'd@x.test',
      errors: [expect.objectContaining({ field: 'Topic:product NEWS', code: 'invalid_type' })],
    },
  ]);

  expect(await standing(p, 'a@x.test')).toEqual({ 'Product news': [false, true], Newsletter: [true, true] });
  expect(await standing(p, 'b@x.test')).toEqual({ 'Product news': [true, false], Newsletter: [true, true] });
  expect(await standing(p, 'c@x.test')).toEqual({ 'Product news': [false, true], Newsletter: [false, false] });
  expect(await standing(p, 'e@x.test')).toEqual({ 'Product news': [true, false], Newsletter: [true, true] });
  expect(await standing(p, 'f@x.test')).toEqual({ 'Product news': [false, true], Newsletter: [false, false] });
  // g chose what the defaults already gave: stored as explicit choices, no event.
  expect(await standing(p, 'g@x.test')).toEqual({ 'Product news': [true, true], Newsletter: [false, true] });

  const expected = [
    ['a@x.test', 'contact.topic_subscribed', 'Newsletter', 'import'],
    ['a@x.test', 'contact.topic_unsubscribed', 'Product news', 'import'],
    ['b@x.test', 'contact.topic_subscribed', 'Newsletter', 'import'],
    ['c@x.test', 'contact.topic_unsubscribed', 'Product news', 'import'],
    ['f@x.test', 'contact.topic_unsubscribed', 'Product news', 'import'],
  ];
  expect(await topicEvents(p.id)).toEqual(expected);
  const hooks = await e2e.api.database.db.execute<{ event_type: string; payload: { data: Record<string, unknown> } }>(
    sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid order by payload->'data'->>'email', event_type`,
  );
  expect(hooks.rows.map((h) => [h.payload.data.email, h.event_type])).toEqual(
    expected.map(([email, type]) => [email, type]),
  );
  expect(hooks.rows[0].payload.data).toEqual({
    contactId: await contactId(p, 'a@x.test'),
    email: 'a@x.test',
    topicId: letter,
    topicName: 'Newsletter',
    method: 'import',
    emailId: null,
  });
  expect(hooks.rows[1].payload.data).toMatchObject({ topicId: news, topicName: 'Product news', method: 'import' });
  // Enqueued when their batch committed, and delivered.
  const delivered = () =>
    receiver.received.filter((r) => r.status === 200 && JSON.parse(r.body).data?.method === 'import');
  await waitFor(async () => delivered().length >= expected.length, 30_000, "the import's topic webhooks");
  expect(
    delivered()
      .map((r) => JSON.parse(r.body).type)
      .sort(),
  ).toEqual(expected.map(([, type]) => type).sort());

  // The same file again: every contact is as it says, nothing is written or announced twice.
  const again = await finished(p, (await upload(p, csv)).body.data.id);
  expect(again.counts).toEqual({ created: 0, updated: 0, skipped: 6, failed: 1 });
  expect(await topicEvents(p.id)).toEqual(expected);
  expect(
    (await e2e.api.database.db.execute(sql`select 1 from webhook_deliveries where project_id = ${p.id}::uuid`)).rows,
  ).toHaveLength(expected.length);

  // The other project's topic of the same name is untouched.
  const otherA = await client(e2e.api.app, other).get(`/contacts/${await contactId(other, 'a@x.test')}/topics`);
  expect(otherA.body.data.topics).toEqual([
    { topicId: otherLetter, name: 'Newsletter', subscribed: false, explicit: false },
  ]);
  expect(await topicEvents(other.id)).toEqual([]);
});

test('an unknown topic column (or one of another project) is refused at upload, naming the column; nothing is stored', async () => {
  const p = await createTestProject(e2e.api.database);
  await topic(p, 'Newsletter', 'opt_in');
  const other = await createTestProject(e2e.api.database);
  await topic(other, 'Deals', 'opt_in');
  const res = await upload(p, 'email,topic:newsletter,topic:Deals,TOPIC:Gone\na@x.test,yes,yes,no\n');
  expect(res.status).toBe(422);
  expect(res.body.error.code).toBe('VALIDATION_ERROR');
  expect(res.body.error.errors).toEqual([
    expect.objectContaining({ field: 'file', message: expect.stringContaining('"topic:Deals" names no topic') }),
    expect.objectContaining({ field: 'file', message: expect.stringContaining('"TOPIC:Gone" names no topic') }),
  ]);
  const empty = await upload(p, 'email,topic:\na@x.test,yes\n');
  expect(empty.status).toBe(422);
  expect(empty.body.error.errors[0]).toMatchObject({
    field: 'file',
    message: expect.stringContaining('names no topic'),
  });
  expect(await e2e.api.database.db.select().from(contactImports).where(eq(contactImports.projectId, p.id))).toEqual([]);
});
