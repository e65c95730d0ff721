/**
 * One-email send jobs sharing `SendBulkEmail` calls (`SES_BULK_COALESCE`, `job-bulk.ts`: `sendTogether`), with the
 * real sender, Postgres and Redis, and a transport the test scripts: jobs whose claims one statement returned go in
 * one call, each entry its own email (rendering, tags, row, outcome); an email alone in its turn, one from another
 * sender, one SES could not build as ours and a test email go on their own as before (`SendEmail` with our
 * Message-ID); a shared call carries 50 ms of sending at the connection's rate; a rejected entry fails its email
 * alone; an unreachable SES puts each back without spending an attempt, counted once; a throttle puts each back; a
 * call refused as a whole sends each on its own; jobs run again send nothing twice; the setting off sends every job
 * on its own.
 */
import { eq, inArray } from 'drizzle-orm';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import { SendPriority } from '@mailroom/queues/catalog';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { recipient, testConfig } from '../../../test/support/harness';
import { discardingWebhookQueue, useSender } from '../../../test/support/sender';
import { createEmailSender, type SendStep } from './job';
import { gatheredPerTurn } from './job-bulk';
import { resetScriptedSes, scriptedSes } from '../../../test/support/scripted-ses';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');

const transport = scriptedSes();
const fx = useSender({ name: 'test-send-coalesce', env: { SEND_LEASE_MS: '5000', SEND_BACKOFF_MS: '700' }, transport });
beforeEach(() => {
  resetScriptedSes(transport);
});

/** `n` queued transactional emails from `from` (a local part of the project's domain), each to a new contact. */
async function queued(
  n: number,
  from = 'hello',
  over: { test?: boolean; headers?: Record<string, string>; n?: number } = {},
) {
  const to = Array.from({ length: n }, () => normalizeEmail(recipient('Coalesce')));
  const contacts = await upsertContacts(
    fx.database.db,
    fx.p.id,
    to.map((email) => ({ email, defaultSubscribed: false })),
    { test: over.test ?? false },
  );
  const rows = contacts.map((c, i) => ({
    id: newId(),
    projectId: fx.p.id,
    contactId: c.id,
    templateId: null,
    source: 'transactional' as const,
    toEmail: c.email,
    toName: null,
    fromEmail: `${from}@${fx.p.domain}`,
    fromName: null,
    replyTo: null,
    subject: 'Receipt {{n}}',
    body: '<p>Order {{n}}</p>',
    bodyFormat: 'html' as const,
    variables: { n: String((over.n ?? 0) + i) },
    headers: over.headers ?? {},
    attachmentIds: [],
    test: over.test ?? false,
  }));
  await insertQueuedEmails(fx.database.db, rows);
  return rows.map((r) => r.id);
}

const rowsOf = async (ids: string[]) => {
  const rows = await fx.database.db
    .select({ id: emails.id, status: emails.status, messageId: emails.messageId, error: emails.error })
    .from(emails)
    .where(inArray(emails.id, ids));
  return ids.map((id) => rows.find((r) => r.id === id)!);
};

/** The one-email jobs of `ids`, all started in one turn (as BullMQ starts the jobs of free slots). */
const runAll = (ids: string[], made = 0, sender = fx.send): Promise<SendStep[]> =>
  Promise.all(
    ids.map((emailId) => sender({ emailId, attempt: { made, max: 3 }, priority: SendPriority.transactional, log })),
  );

const sentStep = (messageId: string): SendStep => ({ kind: 'done', result: { outcome: 'sent', messageId } });

test('jobs ready in one turn share one SendBulkEmail call, each entry its own email; run again, nothing twice', async () => {
  const ids = await queued(5);
  expect(await runAll(ids)).toEqual(ids.map((id) => sentStep(`ses-bulk-${id}`)));
  expect(transport.sent).toHaveLength(0);
  expect(transport.calls).toHaveLength(1);
  const [call] = transport.calls;
  expect(call.from).toBe(`hello@${fx.p.domain}`);
  expect(call.stream).toBe('transactional');
  expect(call.priority).toBe(SendPriority.transactional);
  expect(call.entries.map((e) => e.tags.email_id)).toEqual(ids);
  call.entries.forEach((e, i) => {
    expect(JSON.parse(e.data)).toMatchObject({ subject: `Receipt ${i}`, html: expect.stringContaining(`Order ${i}`) });
    expect(e.tags.project_id).toBe(fx.p.id);
  });
  expect((await rowsOf(ids)).map((r) => [r.status, r.messageId])).toEqual(ids.map((id) => ['sent', `ses-bulk-${id}`]));

  const again = await runAll(ids, 1);
  expect(again.map((s) => s.kind === 'done' && s.result.outcome)).toEqual(ids.map(() => 'skipped'));
  expect(transport.calls).toHaveLength(1);
});

test('alone in its turn, from another sender, with a header SES would not take, or a test email: SendEmail with our Message-ID', async () => {
  const [lone] = await queued(1);
  expect(await runAll([lone])).toEqual([sentStep(`ses-one-${lone}`)]);
  expect(transport.calls).toHaveLength(0);
  expect(transport.sent[0].raw.toString()).toContain(`Message-ID: <${lone}@${fx.p.domain}>`);

  transport.sent = [];
  const shared = await queued(2);
  const [other] = await queued(1, 'billing');
  const [accented] = await queued(1, 'hello', { headers: { 'X-Note': 'café' }, n: 7 });
  const [testMail] = await queued(1, 'hello', { test: true });
  const steps = await runAll([shared[0], other, accented, shared[1], testMail]);
  expect(steps).toEqual([
    sentStep(`ses-bulk-${shared[0]}`),
    sentStep(`ses-one-${other}`),
    sentStep(`ses-one-${accented}`),
    sentStep(`ses-bulk-${shared[1]}`),
    sentStep(`test-${testMail}`),
  ]);
  expect(transport.calls.map((c) => c.entries.map((e) => e.tags.email_id))).toEqual([shared]);
  expect(transport.sent.map((m) => m.tags?.email_id).sort()).toEqual([other, accented].sort());
  const accentedRaw = transport.sent.find((m) => m.tags?.email_id === accented)!.raw.toString();
  expect(accentedRaw).toContain(`Message-ID: <${accented}@${fx.p.domain}>`);
  // Its own rendering (its row's variables) went into its own message.
  expect(accentedRaw).toContain('Receipt 7');
  expect(accentedRaw).toContain('Order 7');
});

test('a rejected entry fails its email alone; an unreachable SES puts every email back, no attempt spent, counted once', async () => {
  const ids = await queued(3);
  transport.entryStatus.set(ids[1], 'MessageRejected');
  const steps = await runAll(ids);
  expect(steps.map((s) => s.kind === 'done' && s.result.outcome)).toEqual(['sent', 'failed', 'sent']);
  const rows = await rowsOf(ids);
  expect(rows.map((r) => r.status)).toEqual(['sent', 'failed', 'sent']);
  expect(rows[1].error).toMatch(/MessageRejected/);

  const later = await queued(4);
  transport.callError = Object.assign(new Error('socket hang up'), { name: 'TimeoutError' });
  const backedOff = await runAll(later);
  // Counted once: each email's pause is the backoff's first step, not its fourth.
  expect(backedOff).toEqual(later.map(() => ({ kind: 'back-off', forMs: 700, cause: 'unreachable' })));
  expect((await rowsOf(later)).map((r) => r.status)).toEqual(later.map(() => 'queued'));
  expect(await runAll(later)).toEqual(later.map((id) => sentStep(`ses-bulk-${id}`)));
});

test('a shared call carries 50 ms of sending at the rate; below 40/s every email goes on its own', async () => {
  transport.rate = 40;
  const ids = await queued(5);
  expect(await runAll(ids)).toEqual([
    sentStep(`ses-bulk-${ids[0]}`),
    sentStep(`ses-bulk-${ids[1]}`),
    sentStep(`ses-bulk-${ids[2]}`),
    sentStep(`ses-bulk-${ids[3]}`),
    sentStep(`ses-one-${ids[4]}`),
  ]);
  expect(transport.calls.map((c) => c.entries.length)).toEqual([2, 2]);

  transport.calls = [];
  transport.rate = 39;
  const slow = await queued(3);
  expect(await runAll(slow)).toEqual(slow.map((id) => sentStep(`ses-one-${id}`)));
  expect(transport.calls).toHaveLength(0);
});

test('a throttled call puts each of its jobs back, no attempt spent; a call refused as a whole sends each on its own', async () => {
  const ids = await queued(3);
  transport.callError = Object.assign(new Error('Maximum sending rate exceeded.'), {
    name: 'TooManyRequestsException',
    $metadata: { httpStatusCode: 429 },
  });
  const throttled = await runAll(ids);
  expect(throttled.map((s) => s.kind === 'back-off' && s.cause)).toEqual(ids.map(() => 'throttled'));
  expect((await rowsOf(ids)).map((r) => r.status)).toEqual(ids.map(() => 'queued'));

  transport.callError = Object.assign(new Error('bad request'), {
    name: 'BadRequestException',
    $metadata: { httpStatusCode: 400 },
  });
  expect(await runAll(ids)).toEqual(ids.map((id) => sentStep(`ses-one-${id}`)));
  expect(transport.calls).toHaveLength(2);
  expect(transport.sent.map((m) => m.tags?.email_id).sort()).toEqual([...ids].sort());
  expect(transport.sent.map((m) => /Order (\d)/.exec(m.raw.toString())?.[1]).sort()).toEqual(['0', '1', '2']);
});

test('SES_BULK_COALESCE=false: the jobs of one turn go one SendEmail each', async () => {
  const off = createEmailSender({
    config: testConfig({ SEND_LEASE_MS: '5000', SES_BULK_COALESCE: 'false' }),
    database: fx.database,
    transport,
    webhookQueue: discardingWebhookQueue,
    redis: fx.redis,
  });
  const ids = await queued(3);
  expect(await runAll(ids, 0, off)).toEqual(ids.map((id) => sentStep(`ses-one-${id}`)));
  expect(transport.calls).toHaveLength(0);
  const [first] = await fx.database.db.select().from(emails).where(eq(emails.id, ids[0]));
  expect(first.status).toBe('sent');
});

test('gatheredPerTurn: the callers of one turn run together, a later turn apart; a throw rejects the turn', async () => {
  const runs: number[][] = [];
  const gather = gatheredPerTurn((items: number[]) => {
    if (items.includes(-1)) throw new Error('refused');
    runs.push(items);
    return items.map((i) => Promise.resolve(i * 10));
  });
  expect(await Promise.all([gather(1), gather(2), gather(3)])).toEqual([10, 20, 30]);
  expect(await gather(4)).toBe(40);
  expect(runs).toEqual([[1, 2, 3], [4]]);
  await expect(Promise.all([gather(5), gather(-1)])).rejects.toThrow('refused');
});
