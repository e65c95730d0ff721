/**
 * Batched tracking (`@mailroom/contacts/queries/track-batch`, `trackBatcher`): a batch has exactly the effect of its
 * tracks written one by one, across projects; a batch that cannot be one statement writes nothing; concurrent
 * tracks through the batcher are each recorded once, with batches formed under load.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { createDatabase, type Database } from '@mailroom/db/client';
import { createProject } from '@mailroom/projects/queries/projects';
import { type TrackInput } from './queries/contacts';
import { DuplicateContactInBatch, trackEvent, trackEvents } from './queries/track-batch';
import { trackBatcher } from './events';

let database: Database;

beforeAll(() => {
  database = createDatabase({ url: process.env.TEST_DATABASE_URL!, poolSize: 6, applicationName: 'test-track-batch' });
});
afterAll(() => database.close());

const project = async () => (await createProject(database.db, `track batch ${randomUUID().slice(0, 6)}`)).id;

/**
 * A project's contacts and events, without ids or times: what two ways of writing must agree on. Events are compared
 * as a set per contact: two events of one request (the track and the `contact.*` event its subscription change
 * makes) may get ids of one millisecond, whose order is random (UUIDv7).
 */
async function state(projectId: string) {
  const contacts = await database.db.execute<{ email: string; subscribed: boolean; data: unknown }>(
    sql`select email, subscribed, data from contacts where project_id = ${projectId} order by email_key`,
  );
  const events = await database.db.execute<{ email: string; name: string; data: unknown; test: boolean }>(
    sql`select c.email, e.name, e.data, e.test from events e join contacts c on c.id = e.contact_id
        where e.project_id = ${projectId} order by c.email_key, e.name, e.data::text, e.test`,
  );
  return { contacts: contacts.rows, events: events.rows };
}

const track = (email: string, name: string, more: Partial<TrackInput> = {}): TrackInput => ({
  email,
  name,
  contactData: {},
  eventData: {},
  ...more,
});

// Rounds of tracks; within a round every track is for another contact (one batch each), across rounds they meet
// existing contacts: data merged and removed, subscription stated, switched, omitted; test events; address case.
const rounds = (tag: string): TrackInput[][] => [
  [
    track(`Ann.${tag}@Example.com`, 'signup', { contactData: { plan: 'free', seats: 1 }, eventData: { source: 'ad' } }),
    track(`bob.${tag}@example.com`, 'signup', { subscribed: false }),
    track(`cy.${tag}@example.com`, 'login', { test: true, contactData: { nested: { a: [1, 'two'] } } }),
  ],
  [
    track(`ann.${tag}@example.com`, 'upgrade', {
      contactData: { plan: 'pro', seats: null },
      eventData: { price: 9.5 },
    }),
    track(`BOB.${tag}@example.com`, 'login', { subscribed: true }),
    track(`cy.${tag}@example.com`, 'logout', { subscribed: false, test: true }),
    track(`dee.${tag}@example.com`, 'signup', { subscribed: true, contactData: { 'odd key "q"': 'x\\y' } }),
  ],
  [
    track(`ann.${tag}@example.com`, 'login', { subscribed: true }),
    track(`bob.${tag}@example.com`, 'login', { subscribed: false, contactData: { gone: null } }),
  ],
];

test('a batch has the effect of its tracks written one by one', async () => {
  const [alone, batched] = [await project(), await project()];
  for (const round of rounds('x')) {
    for (const input of round) await trackEvent(database.db, alone, input);
    const results = await trackEvents(
      database.db,
      round.map((input) => ({ projectId: batched, input })),
    );
    expect(results.map((r) => r.contact.email.toLowerCase())).toEqual(round.map((t) => t.email.toLowerCase()));
  }
  const [a, b] = [await state(alone), await state(batched)];
  expect(b).toEqual(a);
  expect(a.events.filter((e) => e.name.startsWith('contact.')).length).toBeGreaterThanOrEqual(5);
});

test('one batch may hold several projects; each result is its own track', async () => {
  const [p1, p2] = [await project(), await project()];
  const email = `same.${randomUUID().slice(0, 6)}@example.com`;
  const results = await trackEvents(database.db, [
    { projectId: p1, input: track(email, 'a', { contactData: { in: 'p1' } }) },
    { projectId: p2, input: track(email, 'b', { contactData: { in: 'p2' } }) },
  ]);
  expect(results[0].contact.id).not.toBe(results[1].contact.id);
  expect(results[0].contact.data).toEqual({ in: 'p1' });
  expect(results[1].contact.data).toEqual({ in: 'p2' });
  expect((await state(p1)).events.map((e) => e.name)).toEqual(['a', 'contact.subscribed']);
  expect((await state(p2)).events.map((e) => e.name)).toContain('b');
});

test('two tracks for one contact are refused as a batch before anything is written', async () => {
  const p = await project();
  const email = `dup.${randomUUID().slice(0, 6)}@example.com`;
  await expect(
    trackEvents(database.db, [
      { projectId: p, input: track(email, 'a') },
      { projectId: p, input: track(email.toUpperCase(), 'b') },
    ]),
  ).rejects.toBeInstanceOf(DuplicateContactInBatch);
  expect(await state(p)).toEqual({ contacts: [], events: [] });
});

test('concurrent tracks through the batcher: each recorded once, batched under load, same contact included', async () => {
  const p = await project();
  const sizes: number[] = [];
  const writer = trackBatcher(database.db, { maxBatch: 50, maxInFlight: 2, observe: (n) => sizes.push(n) });
  const tag = randomUUID().slice(0, 6);
  // 300 tracks: 250 contacts, one of which gets 51 tracks (each batch holding it twice falls back to single writes).
  const inputs = Array.from({ length: 300 }, (_, i) =>
    i < 250
      ? track(`c${i}.${tag}@example.com`, 'visit', { contactData: { [`k${i % 5}`]: i } })
      : track(`c0.${tag}@example.com`, 'visit', { contactData: { [`extra${i}`]: true } }),
  );
  const results = await Promise.all(inputs.map((input) => writer(database.db, p, input)));
  expect(new Set(results.map((r) => r.eventId)).size).toBe(300);
  const s = await state(p);
  expect(s.contacts).toHaveLength(250);
  expect(s.events.filter((e) => e.name === 'visit')).toHaveLength(300);
  expect(s.events.filter((e) => e.name === 'contact.subscribed')).toHaveLength(250);
  const c0 = s.contacts.find((c) => c.email === `c0.${tag}@example.com`)!.data as Record<string, unknown>;
  for (let i = 250; i < 300; i++) expect(c0[`extra${i}`]).toBe(true);
  expect(Math.max(...sizes)).toBeGreaterThan(1);
  const byId = new Map(results.map((r, i) => [r.eventId, inputs[i].email]));
  const stored = await database.db.execute<{ id: string; email: string }>(
    sql`select e.id, c.email from events e join contacts c on c.id = e.contact_id where e.project_id = ${p} and e.name = 'visit'`,
  );
  for (const row of stored.rows) expect(byId.get(row.id)).toBe(row.email);
});

test('a track inside a caller transaction is written in that transaction, not batched', async () => {
  const p = await project();
  const writer = trackBatcher(database.db, { maxBatch: 50, maxInFlight: 1 });
  const email = `tx.${randomUUID().slice(0, 6)}@example.com`;
  await expect(
    database.db.transaction(async (tx) => {
      await writer(tx, p, track(email, 'inside'));
      throw new Error('roll back');
    }),
  ).rejects.toThrow('roll back');
  expect(await state(p)).toEqual({ contacts: [], events: [] });
});
