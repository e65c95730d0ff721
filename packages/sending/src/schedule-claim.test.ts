/**
 * Scheduled rows and the claim against real Postgres (the run's shared test database), without HTTP or BullMQ:
 * a scheduled email is not claimed before its time (the claim says until when) and is claimed once it has come;
 * a cancelled one is never claimed; a claimed one can no longer be cancelled or rescheduled; a cancel and a claim
 * racing on one due row never both win; the batched claim follows the same rule.
 */
import { eq, sql } from 'drizzle-orm';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createDatabase, type Database } from '@mailroom/db/client';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { claimEmails } from './queries/email-batches';
import { cancelEmail, dueScheduledEmails, rescheduleEmail } from './queries/scheduled-emails';
import { emails } from '@mailroom/db/schema/emails';
import { createTestProject, recipient, testConfig, type TestProject } from '../../../test/support/harness';
import { claimForSending } from './claim';

const config = testConfig();
let database: Database;
let p: TestProject;
beforeAll(async () => {
  database = createDatabase({ url: config.databaseUrl, poolSize: 6, applicationName: 'test-sending-schedule' });
  p = await createTestProject(database);
});
afterAll(async () => {
  await database.close();
});

/** A transactional email stored `scheduled` for `at`. @returns its id. */
async function scheduledEmail(at: Date, projectId = p.id): Promise<string> {
  const to = normalizeEmail(recipient('sched'));
  const [contact] = await upsertContacts(database.db, projectId, [{ email: to, defaultSubscribed: false }]);
  const id = newId();
  await insertQueuedEmails(database.db, [
    {
      id,
      projectId,
      contactId: contact.id,
      templateId: null,
      source: 'transactional',
      marketing: false,
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
  await database.db.update(emails).set({ status: 'scheduled', scheduledAt: at }).where(eq(emails.id, id));
  return id;
}

const row = async (id: string) => (await database.db.select().from(emails).where(eq(emails.id, id)))[0];

test('not claimed before its time (the claim says until when), claimed once it has come', async () => {
  const at = new Date(Date.now() + 60_000);
  const id = await scheduledEmail(at);
  const early = await claimForSending(database.db, id, 30_000);
  expect(early).toEqual({ ok: false, kind: 'scheduled', until: at });
  expect((await row(id)).status).toBe('scheduled');
  expect(await claimEmails(database.db, [{ emailId: id, token: newId() }], 30_000)).toEqual(new Map());
  // Its time comes (moved to the past here, as a reschedule to now does).
  expect(await rescheduleEmail(database.db, p.id, id, new Date(Date.now() - 1000))).toEqual({ moved: true });
  const due = await claimForSending(database.db, id, 30_000);
  expect(due.ok).toBe(true);
  expect(await row(id)).toMatchObject({ status: 'sending', attempts: 1 });
});

test('the batched claim takes a due scheduled row', async () => {
  const id = await scheduledEmail(new Date(Date.now() - 10));
  const token = newId();
  const claimed = await claimEmails(database.db, [{ emailId: id, token }], 30_000);
  expect(claimed.get(token)?.id).toBe(id);
});

test('a cancelled email is never claimed; a claimed one is neither cancelled nor rescheduled', async () => {
  const cancelled = await scheduledEmail(new Date(Date.now() - 10));
  expect(await cancelEmail(database.db, p.id, cancelled)).toEqual({ moved: true });
  expect(await claimForSending(database.db, cancelled, 30_000)).toEqual({
    ok: false,
    kind: 'final',
    status: 'cancelled',
  });
  expect(await cancelEmail(database.db, p.id, cancelled)).toEqual({ moved: false, status: 'cancelled' });

  const claimed = await scheduledEmail(new Date(Date.now() - 10));
  expect((await claimForSending(database.db, claimed, 30_000)).ok).toBe(true);
  expect(await cancelEmail(database.db, p.id, claimed)).toEqual({ moved: false, status: 'sending' });
  expect(await rescheduleEmail(database.db, p.id, claimed, new Date(Date.now() + 60_000))).toEqual({
    moved: false,
    status: 'sending',
  });
  expect((await row(claimed)).status).toBe('sending');
});

test("another project's email is neither cancelled nor rescheduled (not found)", async () => {
  const other = await createTestProject(database);
  const id = await scheduledEmail(new Date(Date.now() + 60_000), other.id);
  expect(await cancelEmail(database.db, p.id, id)).toEqual({ moved: false, status: undefined });
  expect(await rescheduleEmail(database.db, p.id, id, new Date())).toEqual({ moved: false, status: undefined });
  expect((await row(id)).status).toBe('scheduled');
});

test('a cancel and a claim racing on due rows: each row is either cancelled or claimed, never both', async () => {
  const ids = await Promise.all(Array.from({ length: 20 }, () => scheduledEmail(new Date(Date.now() - 5))));
  const results = await Promise.all(
    ids.map((id) => Promise.all([claimForSending(database.db, id, 30_000), cancelEmail(database.db, p.id, id)])),
  );
  results.forEach(([claim, cancel]) => {
    // Exactly one of them won the row.
    expect(claim.ok !== cancel.moved).toBe(true);
    if (!claim.ok) expect(claim).toEqual({ ok: false, kind: 'final', status: 'cancelled' });
    else expect(cancel).toEqual({ moved: false, status: 'sending' });
  });
  const statuses = await database.db.execute<{ status: string; n: number }>(
    sql`select status, count(*)::int as n from emails where id = any(${sql.param(ids)}::uuid[]) group by status`,
  );
  const byStatus = Object.fromEntries(statuses.rows.map((r) => [r.status, r.n]));
  expect((byStatus.cancelled ?? 0) + (byStatus.sending ?? 0)).toBe(20);
});

test('the reconciler sees scheduled emails due within its window, soonest first, page by page', async () => {
  const soon = await scheduledEmail(new Date(Date.now() + 2_000));
  const overdue = await scheduledEmail(new Date(Date.now() - 2_000));
  const later = await scheduledEmail(new Date(Date.now() + 3_600_000));
  const all = [];
  let after = null;
  for (;;) {
    const page = await dueScheduledEmails(database.db, 10_000, after, 2);
    all.push(...page);
    if (page.length < 2) break;
    after = page[page.length - 1];
  }
  const ids = all.map((e) => e.id);
  expect(ids).toContain(soon);
  expect(ids).toContain(overdue);
  expect(ids).not.toContain(later);
  expect(ids.indexOf(overdue)).toBeLessThan(ids.indexOf(soon));
  expect(new Set(ids).size).toBe(ids.length);
});
