/**
 * The send job without BullMQ or SES: real Postgres and Redis, a transport the test scripts. What the job does
 * to the row and what it asks of the queue ({@link SendStep}) for a send SES accepts, a throttle, a refusal, a
 * transient failure on the last attempt, an email already sent, and a re-claimed email whose SES outcome was kept
 * in Redis (recorded, not sent again).
 */
import { eq } from 'drizzle-orm';
import type { Queue } from 'bullmq';
import { normalizeEmail, type NormalizedEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { recipient } from '../../../test/support/harness';
import { useSender } from '../../../test/support/sender';
import type { SendStep } from './job';
import { claimForSending } from './claim';
import { acceptedKey } from './ses-accepted';
import type { MailTransport, OutboundMessage } from './ses/transport';

const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
const webhookQueue = {
  addBulk: () => Promise.reject(new Error('nothing should be enqueued')),
} as unknown as Queue<WebhookJobPayload>;

/** A transport answering with `answer` (a message id, or an error to throw), recording what it was given. */
function scripted() {
  const t = {
    answer: undefined as string | Error | undefined,
    sent: [] as OutboundMessage[],
    send(m: OutboundMessage) {
      t.sent.push(m);
      const a = t.answer;
      return a instanceof Error ? Promise.reject(a) : Promise.resolve({ messageId: a ?? `ses-${newId()}` });
    },
    close() {},
  };
  return t satisfies MailTransport;
}

const transport = scripted();
const fx = useSender({ name: 'test-sending-job', env: { SEND_LEASE_MS: '5000' }, transport, webhookQueue });
const { config } = fx;
beforeEach(() => {
  transport.answer = undefined;
  transport.sent = [];
});

/** A queued transactional email to a new contact. */
async function queuedEmail(test = false): Promise<{ id: string; to: NormalizedEmail }> {
  const to = normalizeEmail(` ${recipient('Job')}`.replace('@inbox.test', '@Inbox.TEST'));
  const [contact] = await upsertContacts(fx.database.db, fx.p.id, [{ email: to, defaultSubscribed: false }], { test });
  const id = newId();
  await insertQueuedEmails(fx.database.db, [
    {
      id,
      projectId: fx.p.id,
      contactId: contact.id,
      templateId: null,
      source: 'transactional',
      toEmail: to,
      toName: null,
      fromEmail: `hello@${fx.p.domain}`,
      fromName: null,
      replyTo: null,
      subject: 'Hi {{name}}',
      body: '<p>B</p>',
      bodyFormat: 'html',
      variables: { name: 'Ann' },
      headers: {},
      attachmentIds: [],
      test,
    },
  ]);
  return { id, to };
}

const row = async (id: string) => (await fx.database.db.select().from(emails).where(eq(emails.id, id)))[0];
const run = (emailId: string, made = 0, max = 3): Promise<SendStep> =>
  fx.send({ emailId, attempt: { made, max }, log });

test('SES accepts: the stored (normalised) recipient goes to SES as it is, the row is sent', async () => {
  const { id, to } = await queuedEmail();
  expect(to).toMatch(/@inbox\.test$/);
  transport.answer = `ses-${id}`;
  expect(await run(id)).toEqual({ kind: 'done', result: { outcome: 'sent', messageId: `ses-${id}` } });
  expect(transport.sent).toHaveLength(1);
  expect(transport.sent[0]).toMatchObject({
    from: `hello@${fx.p.domain}`,
    to: [to],
    tags: { email_id: id, project_id: fx.p.id },
  });
  expect(transport.sent[0].raw.toString()).toContain(`Message-ID: <${id}@${fx.p.domain}>`);
  expect(await row(id)).toMatchObject({ status: 'sent', messageId: `ses-${id}`, renderedSubject: 'Hi Ann' });
  // Already final: skipped, SES not called again.
  expect(await run(id)).toEqual({ kind: 'done', result: { outcome: 'skipped', reason: 'already sent' } });
  expect(transport.sent).toHaveLength(1);
});

test('SES throttles: the row is queued again and the queue is asked to back off, no attempt spent', async () => {
  const { id } = await queuedEmail();
  transport.answer = Object.assign(new Error('slow down'), { name: 'TooManyRequestsException' });
  expect(await run(id)).toEqual({ kind: 'back-off', forMs: 1_000, cause: 'throttled' });
  expect(await row(id)).toMatchObject({ status: 'queued', claimToken: null });
});

test('SES refuses the message: failed, permanently', async () => {
  const { id } = await queuedEmail();
  transport.answer = Object.assign(new Error('Email address is not verified.'), { name: 'MessageRejected' });
  expect(await run(id)).toEqual({
    kind: 'done',
    result: { outcome: 'failed', reason: 'MessageRejected: Email address is not verified.' },
  });
  expect(await row(id)).toMatchObject({ status: 'failed', failureKind: 'permanent' });
});

test('a transient failure retries while attempts are left and fails the row on the last one', async () => {
  const { id } = await queuedEmail();
  const boom = Object.assign(new Error('internal'), { name: 'InternalFailure', $metadata: { httpStatusCode: 500 } });
  transport.answer = boom;
  expect(await run(id, 0, 2)).toEqual({ kind: 'retry', error: boom });
  expect(await row(id)).toMatchObject({ status: 'queued' });
  expect(await run(id, 1, 2)).toEqual({
    kind: 'done',
    result: { outcome: 'failed', reason: 'InternalFailure: internal' },
  });
  expect(await row(id)).toMatchObject({
    status: 'failed',
    failureKind: 'transient',
    error: 'gave up after 2 attempts: InternalFailure: internal',
  });
});

test('a test email goes to the sink, not to SES', async () => {
  const { id } = await queuedEmail(true);
  expect(await run(id)).toEqual({ kind: 'done', result: { outcome: 'sent', messageId: `test-${id}` } });
  expect(transport.sent).toHaveLength(0);
});

test('a re-claimed email whose SES outcome was kept in Redis is recorded as sent, not sent again', async () => {
  const { id } = await queuedEmail();
  // A worker claimed it, SES accepted, the sent write failed and the outcome was kept; then the lease ran out.
  await claimForSending(fx.database.db, id, 5_000);
  await fx.database.db
    .update(emails)
    .set({ claimedAt: new Date(Date.now() - 60_000) })
    .where(eq(emails.id, id));
  await fx.redis.set(
    acceptedKey(config, id),
    JSON.stringify({ messageId: `kept-${id}`, renderedSubject: 'Hi Ann' }),
    'EX',
    60,
  );
  expect(await run(id)).toEqual({ kind: 'done', result: { outcome: 'sent', messageId: `kept-${id}` } });
  expect(transport.sent).toHaveLength(0);
  expect(await row(id)).toMatchObject({ status: 'sent', messageId: `kept-${id}`, attempts: 2 });
  expect(await fx.redis.exists(acceptedKey(config, id))).toBe(0);
});
