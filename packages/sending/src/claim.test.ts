/**
 * The claim on an email row against real Postgres (the run's shared test database), without HTTP or BullMQ:
 * a queued email is claimed once with a token and a lease, a second claim is refused while the lease lives,
 * only the claim's token finishes it, a claim that outlived its lease can be taken over (and its old token no
 * longer finishes anything), and a final row is not claimed again; the claim reads the suppression rule.
 */
import { eq, sql } from 'drizzle-orm';
import type { Queue } from 'bullmq';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import { createDatabase, type Database } from '@mailroom/db/client';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { createTestProject, recipient, testConfig, type TestProject } from '../../../test/support/harness';
import { claimForSending, finishClaim, type Claim } from './claim';

const config = testConfig();
const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
// No webhook endpoints in these projects, so nothing is ever enqueued.
const webhookQueue = {
  addBulk: () => Promise.reject(new Error('nothing should be enqueued')),
} as unknown as Queue<WebhookJobPayload>;

let database: Database;
let p: TestProject;
beforeAll(async () => {
  database = createDatabase({ url: config.databaseUrl, poolSize: 2, applicationName: 'test-sending-claim' });
  p = await createTestProject(database);
});
afterAll(async () => {
  await database.close();
});

/**
 * A queued transactional email to a new contact of the project (unsubscribed unless `subscribed`), marketing
 * (a MARKETING template's) when `marketing`. @returns its id.
 */
async function queuedEmail(opts: { marketing?: boolean; subscribed?: boolean } = {}): Promise<string> {
  const to = normalizeEmail(recipient('claim'));
  const [contact] = await upsertContacts(database.db, p.id, [
    { email: to, defaultSubscribed: opts.subscribed ?? false },
  ]);
  const id = newId();
  await insertQueuedEmails(database.db, [
    {
      id,
      projectId: p.id,
      contactId: contact.id,
      templateId: null,
      source: 'transactional',
      marketing: opts.marketing ?? false,
      toEmail: to,
      toName: null,
      fromEmail: `hello@${p.domain}`,
      fromName: null,
      replyTo: null,
      subject: 'S',
      body: '<p>B</p>',
      bodyFormat: 'html',
      variables: {},
      headers: {},
      attachmentIds: [],
    },
  ]);
  return id;
}

const row = async (id: string) => (await database.db.select().from(emails).where(eq(emails.id, id)))[0];
// Message ids are unique in the table (and the database is shared): each carries its email's id.
const finish = (claim: Claim, tag: string) =>
  finishClaim(
    { config, db: database.db, webhookQueue },
    claim,
    { status: 'sent', messageId: `${tag}-${claim.email.id}`, renderedSubject: 'S' },
    log,
  );

async function claimed(id: string, leaseMs: number): Promise<Claim> {
  const r = await claimForSending(database.db, id, leaseMs);
  if (!r.ok) throw new Error(`expected a claim, got ${r.kind}`);
  return r.claim;
}

test('a queued email is claimed: sending, with the claim token, one attempt, the recipient as stored', async () => {
  const id = await queuedEmail();
  const before = Date.now();
  const claim = await claimed(id, 60_000);
  expect(claim.email).toMatchObject({
    id,
    status: 'sending',
    previousStatus: 'queued',
    projectDisabled: false,
    suppression: null,
  });
  expect(claim.claimedAt).toBeGreaterThanOrEqual(before);
  expect(await row(id)).toMatchObject({ status: 'sending', claimToken: claim.token, attempts: 1 });
  expect(claim.email.toEmail).toBe((await row(id)).toEmail);
});

test('a second claim is refused while the lease lives, and says until when', async () => {
  const id = await queuedEmail();
  await claimed(id, 60_000);
  const second = await claimForSending(database.db, id, 60_000);
  expect(second).toMatchObject({ ok: false, kind: 'leased' });
  if (second.ok || second.kind !== 'leased') return;
  const { claimedAt } = await row(id);
  expect(second.until.getTime()).toBe(claimedAt!.getTime() + 60_000);
});

test('the claim token finishes the row: sent, with the message id, the token cleared', async () => {
  const id = await queuedEmail();
  const claim = await claimed(id, 60_000);
  expect(await finish(claim, 'ses-1')).toBe(true);
  expect(await row(id)).toMatchObject({
    status: 'sent',
    messageId: `ses-1-${id}`,
    claimToken: null,
    renderedSubject: 'S',
  });
});

test('after the lease a new claim takes over; the stale token cannot finish, the new one can', async () => {
  const id = await queuedEmail();
  const stale = await claimed(id, 50);
  // The lease is judged by Postgres's clock (`claimed_at` against `now()`): move the claim back past its 50 ms
  // lease rather than sleep through it.
  await database.db.execute(
    sql`update emails set claimed_at = claimed_at - interval '150 milliseconds' where id = ${id}::uuid`,
  );
  const fresh = await claimed(id, 50);
  expect(fresh.token).not.toBe(stale.token);
  expect(fresh.email.previousStatus).toBe('sending');
  expect(await finish(stale, 'ses-stale')).toBe(false);
  expect(await row(id)).toMatchObject({ status: 'sending', claimToken: fresh.token, messageId: null, attempts: 2 });
  expect(await finish(fresh, 'ses-fresh')).toBe(true);
  expect(await row(id)).toMatchObject({ status: 'sent', messageId: `ses-fresh-${id}` });
});

test('a final row is skipped, and a missing one says so', async () => {
  const id = await queuedEmail();
  await finish(await claimed(id, 60_000), 'ses-2');
  expect(await claimForSending(database.db, id, 60_000)).toEqual({ ok: false, kind: 'final', status: 'sent' });
  expect(await claimForSending(database.db, newId(), 60_000)).toEqual({ ok: false, kind: 'missing' });
  expect(await row(id)).toMatchObject({ status: 'sent', messageId: `ses-2-${id}`, attempts: 1 });
});

test('the claim reads the suppression rule: a marketing email to a contact not subscribed, an address on the list', async () => {
  expect((await claimed(await queuedEmail({ marketing: true }), 60_000)).email.suppression).toBe('unsubscribed');
  expect(
    (await claimed(await queuedEmail({ marketing: true, subscribed: true }), 60_000)).email.suppression,
  ).toBeNull();
  // Not marketing: the subscription does not matter.
  expect((await claimed(await queuedEmail(), 60_000)).email.suppression).toBeNull();
  const listed = await queuedEmail({ marketing: true });
  await database.db.execute(sql`insert into suppressions (id, project_id, email, email_key, reason)
    select ${newId()}::uuid, project_id, to_email, lower(to_email), 'manual' from emails where id = ${listed}::uuid`);
  expect((await claimed(listed, 60_000)).email.suppression).toBe('suppression_list');
});
