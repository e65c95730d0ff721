/**
 * A send job carrying several emails through SES `SendBulkEmail` (`@mailroom/sending/job-bulk`), with the real
 * sender, Postgres and a BullMQ queue on Redis, and a transport the test scripts (SES's answers per call and per
 * entry): the job's emails go in one call, each entry with the email's own rendering, headers and tags, each row
 * `sent` with its entry's message id; a failed entry is its email's alone (rejected: failed; throttled: the queue
 * pauses and it waits as its own job); an unreachable SES puts every entry back unsent, counted once; a call
 * refused as a whole is sent one email at a time (and, denied by IAM, campaign mail goes one by one for a while);
 * the job run again sends nothing twice.
 */
import { inArray } from 'drizzle-orm';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import { SendPriority } from '@mailroom/queues/catalog';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { createEmailSender } from '@mailroom/sending/job';
import { recipient, testConfig } from '../../../../test/support/harness';
import { discardingWebhookQueue, useSender } from '../../../../test/support/sender';
import { resetScriptedSes, scriptedSes } from '../../../../test/support/scripted-ses';
import { runSendBatch, type SendBatchDeps } from './send-batch';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');

/** An SES error as the SDK throws it. */
const sesError = (name: string, status?: number) =>
  Object.assign(new Error(name), { name, ...(status ? { $metadata: { httpStatusCode: status } } : {}) });

const transport = scriptedSes();
const paused: number[] = [];
let deps: SendBatchDeps;
const fx = useSender({
  name: 'test-send-bulk',
  env: { SEND_LEASE_MS: '5000', SEND_BACKOFF_MS: '700', SEND_MAX_ATTEMPTS: '4' },
  transport,
  sendQueue: true,
});
const { config } = fx;
beforeAll(() => {
  deps = { config, sendQueue: fx.sendQueue, rateLimit: async (ms) => void paused.push(ms) };
});
beforeEach(() => {
  resetScriptedSes(transport);
  paused.length = 0;
});

/** `n` queued marketing emails to new contacts named Zoë0…, in id order. */
async function queued(n: number): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient('Bulk'));
  const contacts = await upsertContacts(
    fx.database.db,
    fx.p.id,
    to.map((email, i) => ({ email: normalizeEmail(email), defaultSubscribed: true, data: { name: `Zoë${i}` } })),
  );
  const rows = contacts.map((c) => ({
    id: newId(),
    projectId: fx.p.id,
    contactId: c.id,
    templateId: null,
    source: 'campaign' as const,
    marketing: true,
    toEmail: c.email,
    toName: null,
    fromEmail: `news@${fx.p.domain}`,
    fromName: 'Zoë’s News',
    replyTo: `reply@${fx.p.domain}`,
    subject: 'Hi {{name}}',
    body: '<p>Hello {{name}} <a href="{{unsubscribeUrl}}">leave</a></p>',
    bodyFormat: 'html' as const,
    variables: {},
    headers: {},
    attachmentIds: [],
    test: false,
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

const run = (ids: string[], attemptsMade = 0) =>
  runSendBatch(
    fx.send,
    deps,
    { attemptsMade, opts: { attempts: config.sendMaxAttempts, priority: SendPriority.campaign } },
    { emailId: ids[0], projectId: fx.p.id, emailIds: ids },
    log,
  );

test('the emails of a job go in one SendBulkEmail, each rendered and tagged as its own; run again, nothing twice', async () => {
  const ids = await queued(5);
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 5, outcomes: { sent: 5 }, deferred: 0 });
  expect(transport.sent).toHaveLength(0);
  expect(transport.calls).toHaveLength(1);
  const [call] = transport.calls;
  expect(call.from).toBe(`=?UTF-8?Q?Zo=C3=AB=E2=80=99s_News?= <news@${fx.p.domain}>`);
  expect(call.replyTo).toEqual([`reply@${fx.p.domain}`]);
  expect(call.stream).toBe('marketing');
  expect(call.priority).toBe(SendPriority.campaign);
  expect(call.entries.map((e) => e.tags.email_id)).toEqual(ids);
  const names: string[] = [];
  for (const e of call.entries) {
    expect(e.tags.project_id).toBe(fx.p.id);
    const data = JSON.parse(e.data) as { subject: string; html: string; text: string };
    const name = /^Hi (Zoë\d)$/.exec(data.subject)![1];
    names.push(name);
    expect(data.text).toContain(`Hello ${name}`);
    // The email's own signed unsubscribe URL, in the body and in the RFC 8058 pair.
    const url = /href="([^"]+)"/.exec(data.html)![1];
    expect(url).toMatch(/\/unsubscribe\//);
    expect(e.headers).toEqual(
      expect.arrayContaining([
        ['List-Unsubscribe', `<${url}>`],
        ['List-Unsubscribe-Post', 'List-Unsubscribe=One-Click'],
        ['Precedence', 'bulk'],
      ]),
    );
  }
  expect(names.sort()).toEqual(['Zoë0', 'Zoë1', 'Zoë2', 'Zoë3', 'Zoë4']);
  expect(new Set(call.entries.map((e) => JSON.parse(e.data).html)).size).toBe(5);
  expect((await rowsOf(ids)).map((r) => [r.status, r.messageId])).toEqual(ids.map((id) => ['sent', `ses-bulk-${id}`]));

  expect(await run(ids, 1)).toEqual({ outcome: 'batch', emails: 5, outcomes: { skipped: 5 }, deferred: 0 });
  expect(transport.calls).toHaveLength(1);
});

test('a rejected entry fails its email alone; a throttled one pauses the queue and waits as its own job', async () => {
  const ids = await queued(4);
  transport.entryStatus.set(ids[1], 'MessageRejected');
  transport.entryStatus.set(ids[2], 'TooManyRequestsException');
  expect(await run(ids)).toEqual({
    outcome: 'batch',
    emails: 4,
    outcomes: { sent: 2, failed: 1 },
    deferred: 1,
  });
  const rows = await rowsOf(ids);
  expect(rows.map((r) => r.status)).toEqual(['sent', 'failed', 'queued', 'sent']);
  expect(rows[1].error).toMatch(/MessageRejected/);
  expect(paused).toEqual([1_000]);
  const own = await fx.sendQueue.getJob(ids[2]);
  expect(await own?.getState()).toBe('delayed');
  expect(own!.opts.attempts).toBe(config.sendMaxAttempts); // no attempt spent
  await own!.remove();
});

test('SES unreachable: every entry goes back unsent, no attempt spent, the pause counted once; the retry sends each once', async () => {
  const ids = await queued(6);
  transport.callError = sesError('TimeoutError');
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 6, outcomes: {}, deferred: 6 });
  expect(paused).toEqual([config.sendBackoffMs]); // the first step of the backoff, not the sixth
  expect((await rowsOf(ids)).map((r) => r.status)).toEqual(ids.map(() => 'queued'));
  for (const id of ids) {
    const own = await fx.sendQueue.getJob(id);
    expect(own!.opts.attempts).toBe(config.sendMaxAttempts);
    await own!.remove();
  }
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 6, outcomes: { sent: 6 }, deferred: 0 });
  expect(transport.calls).toHaveLength(2);
  expect((await rowsOf(ids)).map((r) => r.status)).toEqual(ids.map(() => 'sent'));
});

test('a call SES refuses as a whole (400) is sent again one email at a time, each once', async () => {
  const ids = await queued(3);
  transport.callError = sesError('BadRequestException', 400);
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 3, outcomes: { sent: 3 }, deferred: 0 });
  expect(transport.sent.map((m) => m.tags?.email_id).sort()).toEqual([...ids].sort());
  expect((await rowsOf(ids)).map((r) => r.messageId?.startsWith('ses-one-'))).toEqual([true, true, true]);
});

test('SES denies SendBulkEmail (IAM): the call goes one by one, and so does campaign mail after it, without a bulk try', async () => {
  const denied = createEmailSender({
    config,
    database: fx.database,
    transport,
    webhookQueue: discardingWebhookQueue,
    redis: fx.redis,
  });
  const runDenied = (ids: string[]) =>
    runSendBatch(
      denied,
      deps,
      { attemptsMade: 0, opts: { attempts: config.sendMaxAttempts, priority: SendPriority.campaign } },
      { emailId: ids[0], projectId: fx.p.id, emailIds: ids },
      log,
    );
  const first = await queued(3);
  transport.callError = sesError('AccessDeniedException', 403);
  expect(await runDenied(first)).toEqual({ outcome: 'batch', emails: 3, outcomes: { sent: 3 }, deferred: 0 });
  const next = await queued(3);
  expect(await runDenied(next)).toEqual({ outcome: 'batch', emails: 3, outcomes: { sent: 3 }, deferred: 0 });
  expect(transport.calls).toHaveLength(1);
  expect(transport.sent.map((m) => m.tags?.email_id).sort()).toEqual([...first, ...next].sort());
});

test('an email whose headers SES would not take as ours goes by SendEmail; the others in the call', async () => {
  const ids = await queued(3);
  await fx.database.db
    .update(emails)
    .set({ headers: { 'X-Campaign-Note': 'café' } })
    .where(inArray(emails.id, [ids[0]]));
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 3, outcomes: { sent: 3 }, deferred: 0 });
  expect(transport.sent.map((m) => m.tags?.email_id)).toEqual([ids[0]]);
  expect(transport.calls.map((c) => c.entries.map((e) => e.tags.email_id))).toEqual([[ids[1], ids[2]]]);
});

test('SES_BULK_SEND=false: the same job goes one SendEmail per email', async () => {
  const off = createEmailSender({
    config: testConfig({ SES_BULK_SEND: 'false' }),
    database: fx.database,
    transport,
    webhookQueue: discardingWebhookQueue,
    redis: fx.redis,
  });
  expect(off.sendMany).toBeUndefined();
  expect(fx.send.sendMany).toBeDefined();
});
