/** Tracking on the test database: the name rule, the data split, and Plunk's body form. */
import { randomUUID } from 'node:crypto';
import { AppError } from '@mailroom/platform/errors';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { getContact } from './queries/contacts';
import { trackContactEvent, trackPlunkEvent } from './events';
import { upsertContact } from './contacts';

let database: Database;
let projectId: string;

beforeAll(async () => {
  database = createDatabase({
    url: process.env.TEST_DATABASE_URL!,
    poolSize: 2,
    applicationName: 'test-contacts-events',
  });
  projectId = (await createProject(database.db, 'events test')).id;
});
afterAll(() => database.close());

const address = () => `t.${randomUUID().slice(0, 8)}@example.com`;
const refusal = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: AppError) => ({ status: err.statusCode, fields: err.options.errors?.map((e) => e.field) }),
  );

test('an event upserts its contact; non-persistent values stay on the event', async () => {
  const email = address();
  const t = await trackContactEvent(database.db, projectId, {
    email,
    event: '  signed up ',
    data: { plan: 'pro', coupon: { value: 'X1', persistent: false } },
    test: false,
  });
  expect(t.name).toBe('signed up');
  expect(t.data).toEqual({ plan: 'pro', coupon: 'X1' });
  expect(t.r.contact.inserted).toBe(true);
  expect(await getContact(database.db, projectId, t.r.contact.id)).toMatchObject({
    email,
    subscribed: true,
    data: { plan: 'pro' },
  });
});

test('reserved or empty names are refused, naming the field that held them', async () => {
  expect(
    await refusal(trackContactEvent(database.db, projectId, { email: address(), event: 'email.sent', test: false })),
  ).toEqual({ status: 422, fields: ['event'] });
  expect(await refusal(trackPlunkEvent(database.db, projectId, { email: address(), name: '  ' }, false))).toEqual({
    status: 422,
    fields: ['name'],
  });
});

test("Plunk's form: exactly one of event/name and email/contactId; contactId must be the project's", async () => {
  expect(await refusal(trackPlunkEvent(database.db, projectId, {}, false))).toEqual({
    status: 422,
    fields: ['event', 'email'],
  });
  expect(
    await refusal(trackPlunkEvent(database.db, projectId, { event: 'a', name: 'a', email: address() }, false)),
  ).toEqual({ status: 422, fields: ['name'] });
  expect(
    await refusal(trackPlunkEvent(database.db, projectId, { event: 'a', contactId: randomUUID() }, false)),
  ).toMatchObject({ status: 404 });

  const c = await upsertContact(database.db, projectId, { email: address(), subscribed: false }, { test: false });
  expect(c.inserted).toBe(true);
  const t = await trackPlunkEvent(database.db, projectId, { name: 'opened app', contactId: c.id }, false);
  expect(t.r.contact.id).toBe(c.id);
  expect(t.r.contact.subscribed).toBe(false);
  expect(
    (await upsertContact(database.db, projectId, { email: c.email.toUpperCase() }, { test: false })).inserted,
  ).toBe(false);
});
