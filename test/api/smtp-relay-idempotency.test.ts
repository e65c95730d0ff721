/**
 * Idempotent submission to the SMTP relay when messages share a write statement: a message with the client's own
 * Message-ID is claimed by the batched write itself (the relay's writer here lets one statement run at a time, so
 * concurrent messages go together). The same message from many sessions at once is written once and every session
 * gets 250; one Message-ID to other recipients is another submission; other bytes under a Message-ID being
 * accepted are refused; a resubmission is answered with the first answer (the emails, their contacts, a suppressed
 * recipient's cause).
 */
import { randomBytes, randomUUID } from 'node:crypto';
import request from 'supertest';
import { createLogger } from '@mailroom/platform/logger';
import { acceptRelay } from '@mailroom/sending/relay/accept-relay';
import { transactionalBatcher } from '@mailroom/sending/write-batcher';
import {
  createTestProject,
  recipient,
  startTestApi,
  testConfig,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { smtpClient, smtpEnv, startTestRelay, type TestRelay } from '../support/smtp';

let api: TestApi;
let relay: TestRelay;
let p: TestProject;

beforeAll(async () => {
  api = await startTestApi(testConfig(await smtpEnv()));
  // One write statement at a time: what arrives meanwhile shares the next.
  relay = await startTestRelay(api, { ...api.config, writeBatchInFlight: 1 });
  p = await createTestProject(api.database);
});
afterAll(async () => {
  await relay?.close();
  await api?.close();
});

const emailsTo = async (addresses: string[]) =>
  (
    await api.database.pool.query<{ id: string; to_email: string }>(
      `select id, to_email from emails where project_id = $1 and to_email = any($2)`,
      [p.id, addresses],
    )
  ).rows;

const rawMessage = (id: string, to: string, body = 'body') =>
  [
    `From: ann@${p.domain}`,
    `To: ${to}`,
    'Subject: once',
    `Message-ID: ${id}`,
    'Date: Thu, 01 Jan 2026 00:00:00 +0000',
    '',
    body,
    '',
  ].join('\r\n');

/** Sends each message on a session of its own, all at once; each one's reply (or refusal code). */
async function sendAtOnce(messages: { to: string[]; raw: string }[]) {
  const clients = messages.map(() => smtpClient(relay.starttlsPort, p.secretKey));
  try {
    return await Promise.all(
      messages.map((m, i) =>
        clients[i].sendMail({ envelope: { from: `ann@${p.domain}`, to: m.to }, raw: m.raw }).then(
          (info) => ({ code: 250, response: info.response }),
          (err: { responseCode: number; response: string }) => ({ code: err.responseCode, response: err.response }),
        ),
      ),
    );
  } finally {
    for (const c of clients) c.close();
  }
}

test('the same message from 8 sessions at once is written once; every session gets 250, one of them as the first acceptance', async () => {
  const to = recipient('same');
  const id = `<${randomBytes(8).toString('hex')}@${p.domain}>`;
  const replies = await sendAtOnce(Array.from({ length: 8 }, () => ({ to: [to], raw: rawMessage(id, to) })));
  expect(replies.map((r) => r.code)).toEqual(Array(8).fill(250));
  expect(replies.filter((r) => !r.response.includes('already accepted'))).toHaveLength(1);
  const emails = await emailsTo([to]);
  expect(emails).toHaveLength(1);
  // Every answer names the one Message-ID.
  for (const r of replies) expect(r.response).toContain(`queued as ${id}`);
});

test('one Message-ID to other recipients at once: separate submissions, each written; other bytes to the same ones: refused', async () => {
  const id = `<${randomBytes(8).toString('hex')}@${p.domain}>`;
  const [a, b, c] = [recipient('a'), recipient('b'), recipient('c')];
  const replies = await sendAtOnce([
    { to: [a], raw: rawMessage(id, a) },
    { to: [b], raw: rawMessage(id, b) },
    { to: [c], raw: rawMessage(id, c) },
    { to: [a, b], raw: rawMessage(id, a) },
  ]);
  expect(replies.map((r) => r.code)).toEqual([250, 250, 250, 250]);
  expect(replies.every((r) => !r.response.includes('already accepted'))).toBe(true);
  expect((await emailsTo([a, b, c])).map((e) => e.to_email).sort()).toEqual([a, a, b, b, c].sort());

  // The same Message-ID and recipient with two different bodies at once: one is accepted, the other refused for good.
  const d = recipient('d');
  const id2 = `<${randomBytes(8).toString('hex')}@${p.domain}>`;
  const conflict = await sendAtOnce([
    { to: [d], raw: rawMessage(id2, d, 'one') },
    { to: [d], raw: rawMessage(id2, d, 'two') },
  ]);
  expect(conflict.map((r) => r.code).sort()).toEqual([250, 550]);
  expect(conflict.find((r) => r.code === 550)!.response).toContain('already submitted');
  expect(await emailsTo([d])).toHaveLength(1);
});

test('a resubmission is answered with the first answer: the same emails and contacts, a suppressed recipient with its cause', async () => {
  const [ok, blocked] = [recipient('ok'), recipient('blocked')];
  expect(
    (await request(api.app).post('/suppressions').set('Authorization', p.auth).send({ email: blocked })).status,
  ).toBeLessThan(300);
  const key = { projectId: p.id, keyId: randomUUID(), mode: 'live' as const, allowedDomains: null };
  const deps = {
    db: api.database.db,
    writer: transactionalBatcher(api.database.db, { maxBatch: 50, maxInFlight: 1 }),
    config: api.config,
    sendQueue: api.queues.send,
    webhookQueue: api.queues.webhook,
    log: createLogger(api.config, 'test'),
    redis: api.redis,
  };
  const raw = Buffer.from(rawMessage(`<${randomBytes(8).toString('hex')}@${p.domain}>`, ok));
  const later: (() => Promise<void>)[] = [];
  const first = await acceptRelay(deps, key, [ok, blocked], raw, (fn) => later.push(fn));
  for (const fn of later) await fn();
  const again = await acceptRelay(deps, key, [blocked, ok], raw, () => {
    throw new Error('a replay enqueues nothing');
  });
  expect(first.replayed).toBe(false);
  expect(again.replayed).toBe(true);
  expect(again.messageId).toBe(first.messageId);
  expect(first.suppressed).toEqual([blocked]);
  expect(again.suppressed).toEqual([blocked]);
  expect(again.emails).toEqual(first.emails);
  expect(first.emails.find((e) => e.status === 'suppressed')).toMatchObject({ reason: 'suppression_list' });
  expect(await emailsTo([ok, blocked])).toHaveLength(2);
});
