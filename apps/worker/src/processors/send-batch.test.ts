/**
 * A send job carrying several emails, with the real sender, Postgres and a BullMQ queue on Redis, and a transport
 * the test scripts (SES's answers): every email sent once, an email already final skipped, one held by another
 * claim given a delayed job of its own, a throttle stopping the job with the rest handed to their own jobs (not
 * claimed, not sent), a transient failure retried with the attempts it has left, and the job run again after its
 * worker died (nothing sent twice).
 */
import { eq, inArray } from 'drizzle-orm';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import { SendPriority, sendBatchJobId } from '@mailroom/queues/catalog';
import { createQueues, createSendQueue } from '@mailroom/queues/create';
import { enqueueSendJobs } from '@mailroom/queues/enqueue';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { claimForSending } from '@mailroom/sending/claim';
import type { MailTransport, OutboundMessage } from '@mailroom/sending/ses/transport';
import { recipient, testConfig } from '../../../../test/support/harness';
import { useSender } from '../../../../test/support/sender';
import { CLAIM_AHEAD, runSendBatch, urgentMailWaiting, type SendBatchDeps } from './send-batch';
import { reconcileOnce } from './reconcile';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');

/** SES as scripted: `answers[n]` for the n-th call (an error to throw), else a message id. */
function scripted() {
  const t = {
    answers: new Map<number, Error>(),
    sent: [] as OutboundMessage[],
    send(m: OutboundMessage) {
      const answer = t.answers.get(t.sent.length);
      t.sent.push(m);
      return answer ? Promise.reject(answer) : Promise.resolve({ messageId: `ses-${newId()}` });
    },
    close() {},
  };
  return t satisfies MailTransport;
}

const transport = scripted();
const paused: number[] = [];
let throttles = 0;
let deps: SendBatchDeps;
const fx = useSender({
  name: 'test-send-batch',
  env: { SEND_LEASE_MS: '5000', SEND_BACKOFF_MS: '700', SEND_MAX_ATTEMPTS: '4' },
  transport,
  sendQueue: true,
});
const { config } = fx;
beforeAll(() => {
  deps = {
    config,
    sendQueue: fx.sendQueue,
    rateLimit: async (ms) => void paused.push(ms),
    onThrottled: () => void throttles++,
  };
});
beforeEach(() => {
  transport.answers.clear();
  transport.sent = [];
  paused.length = 0;
  throttles = 0;
});

/** `n` queued transactional emails to new contacts, in id order. */
async function queued(n: number, source: 'transactional' | 'campaign' = 'transactional'): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient('Batch'));
  const contacts = await upsertContacts(
    fx.database.db,
    fx.p.id,
    to.map((email) => ({ email: normalizeEmail(email), defaultSubscribed: false })),
  );
  const rows = contacts.map((c) => ({
    id: newId(),
    projectId: fx.p.id,
    contactId: c.id,
    templateId: null,
    source,
    toEmail: c.email,
    toName: null,
    fromEmail: `hello@${fx.p.domain}`,
    fromName: null,
    replyTo: null,
    subject: 'Hi',
    body: '<p>B</p>',
    bodyFormat: 'html' as const,
    variables: {},
    headers: {},
    attachmentIds: [],
    test: false,
  }));
  await insertQueuedEmails(fx.database.db, rows);
  return rows.map((r) => r.id);
}

const statuses = async (ids: string[]) => {
  const rows = await fx.database.db
    .select({ id: emails.id, status: emails.status })
    .from(emails)
    .where(inArray(emails.id, ids));
  return ids.map((id) => rows.find((r) => r.id === id)?.status);
};

const job = (attemptsMade = 0) => ({
  attemptsMade,
  opts: { attempts: config.sendMaxAttempts, priority: SendPriority.campaign },
});
const run = (ids: string[], attemptsMade = 0) =>
  runSendBatch(fx.send, deps, job(attemptsMade), { emailId: ids[0], projectId: fx.p.id, emailIds: ids }, log);

test('every email of the job is sent once, in order; run again (its worker died), nothing is sent twice', async () => {
  const ids = await queued(4);
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 4, outcomes: { sent: 4 }, deferred: 0 });
  expect(transport.sent.map((m) => m.tags?.email_id)).toEqual(ids);
  expect(await statuses(ids)).toEqual(['sent', 'sent', 'sent', 'sent']);

  expect(await run(ids, 1)).toEqual({ outcome: 'batch', emails: 4, outcomes: { skipped: 4 }, deferred: 0 });
  expect(transport.sent).toHaveLength(4);
  for (const id of ids) expect(await fx.sendQueue.getJob(id)).toBeUndefined();
});

test('an email held by another claim gets a delayed job of its own; the others go out', async () => {
  const ids = await queued(3);
  await claimForSending(fx.database.db, ids[1], 5_000); // another worker holds it
  const before = Date.now();
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 3, outcomes: { sent: 2 }, deferred: 1 });
  expect(transport.sent.map((m) => m.tags?.email_id)).toEqual([ids[0], ids[2]]);
  const own = await fx.sendQueue.getJob(ids[1]);
  expect(own?.data).toEqual({ emailId: ids[1], projectId: fx.p.id });
  expect(await own?.getState()).toBe('delayed');
  // Delayed until the other claim's lease ends (5 s), as a one-email job would wait.
  expect(own!.timestamp + own!.opts.delay!).toBeGreaterThan(before + 4_000);
  expect(own!.opts.priority).toBe(SendPriority.campaign);
});

test('SES throttles: the job stops, the queue pauses, the rest wait as their own jobs, claims given back, unsent', async () => {
  const ids = await queued(4);
  transport.answers.set(1, Object.assign(new Error('slow down'), { name: 'TooManyRequestsException' }));
  expect(await run(ids)).toEqual({ outcome: 'batch', emails: 4, outcomes: { sent: 1 }, deferred: 3 });
  expect(transport.sent).toHaveLength(2); // the first, and the throttled one; not the last two
  expect(paused).toEqual([1_000]);
  expect(throttles).toBe(1);
  expect(await statuses(ids)).toEqual(['sent', 'queued', 'queued', 'queued']);
  for (const id of ids.slice(1)) {
    const own = await fx.sendQueue.getJob(id);
    expect(await own?.getState()).toBe('delayed');
    expect(own!.opts.attempts).toBe(config.sendMaxAttempts); // no attempt spent
  }
  const [row] = await fx.database.db.select().from(emails).where(eq(emails.id, ids[1]));
  expect(row.claimToken).toBeNull();
});

test('a transient failure: that email retries in its own job with the backoff and the attempts it has left', async () => {
  const ids = await queued(2);
  transport.answers.set(
    0,
    Object.assign(new Error('internal'), { name: 'InternalFailure', $metadata: { httpStatusCode: 500 } }),
  );
  expect(await run(ids, 1)).toEqual({ outcome: 'batch', emails: 2, outcomes: { sent: 1 }, deferred: 1 });
  expect(await statuses(ids)).toEqual(['queued', 'sent']);
  const own = await fx.sendQueue.getJob(ids[0]);
  expect(await own?.getState()).toBe('delayed');
  expect(own!.opts.attempts).toBe(config.sendMaxAttempts - 2); // two made (this job's second attempt)
  expect(own!.opts.delay).toBeGreaterThan(1_000); // 700 ms × 2^1, less the time taken
  expect(own!.opts.delay).toBeLessThanOrEqual(1_400);
});

test('more urgent mail waits while every slot is busy: at its next group the job hands its untried emails back as one job', async () => {
  const ids = await queued(CLAIM_AHEAD + 2);
  let asked = 0;
  const yielding = { ...deps, yieldSlot: async () => ++asked >= 1 }; // asked before the second group
  const result = await runSendBatch(
    fx.send,
    yielding,
    job(),
    { emailId: ids[0], projectId: fx.p.id, emailIds: ids },
    log,
  );
  expect(result).toEqual({
    outcome: 'batch',
    emails: CLAIM_AHEAD + 2,
    outcomes: { sent: CLAIM_AHEAD },
    deferred: 0,
    handedBack: 2,
  });
  expect(asked).toBe(1);
  expect(transport.sent).toHaveLength(CLAIM_AHEAD);
  expect((await statuses(ids)).slice(CLAIM_AHEAD - 1)).toEqual(['sent', 'queued', 'queued']);
  const rest = ids.slice(CLAIM_AHEAD);
  const back = await fx.sendQueue.getJob(sendBatchJobId(rest));
  expect(back?.data).toEqual({ emailId: rest[0], projectId: fx.p.id, emailIds: rest });
  expect(await back?.getState()).toBe('prioritized');
  expect(back!.opts.priority).toBe(SendPriority.campaign);
  await back!.remove();
});

test('urgentMailWaiting: true once a job of a lane ahead of campaigns waits; one Redis call per interval', async () => {
  const queue = createSendQueue(testConfig(), fx.redis);
  try {
    let calls = 0;
    const counting = {
      getCountsPerPriority: (priorities: number[]) => {
        calls++;
        return queue.getCountsPerPriority(priorities);
      },
    };
    const urgent = urgentMailWaiting(counting, 60_000);
    await queue.add('send', { emailId: newId(), projectId: fx.p.id }, { priority: SendPriority.campaign });
    expect(await urgent()).toBe(false);
    const fresh = urgentMailWaiting(counting, 0);
    expect(await fresh()).toBe(false);
    await queue.add('send', { emailId: newId(), projectId: fx.p.id }, { priority: SendPriority.workflow });
    expect(await fresh()).toBe(true);
    expect(await urgent()).toBe(false); // the earlier answer, reused within its interval
    expect(calls).toBe(3);
    await queue.obliterate({ force: true });
  } finally {
    await queue.close();
  }
});

test('the reconciler leaves a campaign email carried by a live job of several emails to it, and gives the others a job', async () => {
  const [a, b, c] = await queued(3, 'campaign');
  await enqueueSendJobs(fx.sendQueue, config, [
    { emailId: a, emailIds: [a, b], projectId: fx.p.id, priority: SendPriority.campaign },
  ]);
  const queues = createQueues(config, fx.redis);
  try {
    const pass = await reconcileOnce({ config, database: fx.database, queues, logger: log }, 0);
    expect(pass.enqueued).toBeGreaterThanOrEqual(1);
    // a and b: carried by b-<a>, no job of their own; c: carried by nothing, given its own.
    expect(await fx.sendQueue.getJob(a)).toBeUndefined();
    expect(await fx.sendQueue.getJob(b)).toBeUndefined();
    expect((await fx.sendQueue.getJob(c))?.data).toEqual({ emailId: c, projectId: fx.p.id });
    await (await fx.sendQueue.getJob(sendBatchJobId([a, b])))!.remove();
    await (await fx.sendQueue.getJob(c))!.remove();
  } finally {
    await queues.closeAll();
  }
});
