/**
 * Retention of the test-mode sink (`TEST_MESSAGE_RETENTION_HOURS`): the worker's `test-messages` maintenance pass
 * deletes test messages stored longer ago than the retention, in batches of 1,000 rows, and keeps recent ones;
 * `GET /emails/{id}/raw` of a sent test email whose message was deleted answers 404 saying it expired.
 *
 * Runs on the shared database: a pass deletes only messages stored more than 24 hours ago, and only this file
 * back-dates any.
 */
import request from 'supertest';
import { randomBytes } from 'node:crypto';
import { eq, inArray, sql } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { loadConfig } from '@mailroom/config/config';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { emails } from '@mailroom/db/schema/emails';
import { pruneTestMessages, storeTestMessage, TEST_MESSAGE_PRUNE_BATCH } from '@mailroom/sending/queries/test-messages';
import { testMessages } from '@mailroom/db/schema/deliverability';
import { pruneTestMessagesOnce } from '@mailroom/sending/test-messages';
import { testMessagesTask, PRUNE_INTERVAL_MS } from '../../apps/worker/src/processors/test-messages';
import { recipient, startTestApi, testEnv, type TestApi } from '../support/harness';

const RETENTION_HOURS = 24;
let api: TestApi;
beforeAll(async () => {
  api = await startTestApi(loadConfig(testEnv({ TEST_MESSAGE_RETENTION_HOURS: String(RETENTION_HOURS) })));
});
afterAll(async () => {
  await api.close();
});

const deps = () => ({ config: api.config, database: api.database, logger: createLogger(api.config, 'test') });

/** A project with a verified sending domain and its test secret key. */
async function project(): Promise<{ id: string; domain: string; testSecretKey: string }> {
  const p = await createProject(api.database.db, `ret ${randomBytes(3).toString('hex')}`);
  const domain = `ret${randomBytes(5).toString('hex')}.example.com`;
  await addDomain(api.database.db, p.id, domain, true);
  return { id: p.id, domain, testSecretKey: p.testSecretKey };
}

/** A test email accepted by /v1/send, delivered to the sink `hoursAgo` hours ago (as the worker would: message, then `sent`). */
async function sentTestEmail(
  p: { id: string; domain: string; testSecretKey: string },
  hoursAgo: number,
): Promise<{ id: string; raw: Buffer }> {
  const res = await request(api.app)
    .post('/v1/send')
    .set('Authorization', `Bearer ${p.testSecretKey}`)
    .send({ to: recipient('ret'), from: `a@${p.domain}`, subject: 'Hi', body: '<p>Hi</p>' });
  expect(res.status).toBe(202);
  const id = res.body.data.emails[0].email as string;
  const raw = Buffer.from(
    `Subject: Hi\r\nMessage-ID: <${id}@${p.domain}>\r\n\r\n${randomBytes(8).toString('hex')}\r\n`,
  );
  await storeTestMessage(api.database.db, id, p.id, raw);
  await api.database.db.update(emails).set({ status: 'sent', sentAt: new Date() }).where(eq(emails.id, id));
  await api.database.db.execute(
    sql`update test_messages set created_at = now() - make_interval(hours => ${hoursAgo}::int) where email_id = ${id}::uuid`,
  );
  return { id, raw };
}

const stored = async (ids: string[]) =>
  (
    await api.database.db
      .select({ id: testMessages.emailId })
      .from(testMessages)
      .where(inArray(testMessages.emailId, ids))
  ).map((r) => r.id);

const getRaw = (p: { testSecretKey: string }, id: string) =>
  request(api.app)
    .get(`/emails/${id}/raw`)
    .set('Authorization', `Bearer ${p.testSecretKey}`)
    .buffer(true)
    .parse((r, cb) => {
      const chunks: Buffer[] = [];
      r.on('data', (c: Buffer) => chunks.push(c));
      r.on('end', () => cb(null, Buffer.concat(chunks)));
    });

test('one pass deletes a message stored longer ago than the retention, keeps a recent one; the raw endpoint says the old one expired', async () => {
  const p = await project();
  const old = await sentTestEmail(p, RETENTION_HOURS + 1);
  const recent = await sentTestEmail(p, RETENTION_HOURS - 1);
  expect((await getRaw(p, old.id)).status).toBe(200);

  const pass = await pruneTestMessagesOnce(deps());
  expect(pass.deleted).toBeGreaterThanOrEqual(1);
  expect(pass.more).toBe(false);
  expect(await stored([old.id, recent.id])).toEqual([recent.id]);

  const gone = await request(api.app).get(`/emails/${old.id}/raw`).set('Authorization', `Bearer ${p.testSecretKey}`);
  expect(gone.status).toBe(404);
  expect(gone.body.error.code).toBe('NOT_FOUND');
  expect(gone.body.error.message).toBe(
    `The message of this test email has expired: test messages are kept ${RETENTION_HOURS} hours (TEST_MESSAGE_RETENTION_HOURS)`,
  );
  // The email itself stays.
  const email = await request(api.app).get(`/emails/${old.id}`).set('Authorization', `Bearer ${p.testSecretKey}`);
  expect(email.status).toBe(200);
  expect(email.body.data).toMatchObject({ id: old.id, status: 'sent', test: true });

  const kept = await getRaw(p, recent.id);
  expect(kept.status).toBe(200);
  expect(Buffer.compare(kept.body as Buffer, recent.raw)).toBe(0);

  // A test email not sent yet still answers 409 (no message yet), not "expired".
  const queued = (
    await request(api.app)
      .post('/v1/send')
      .set('Authorization', `Bearer ${p.testSecretKey}`)
      .send({ to: recipient('ret'), from: `a@${p.domain}`, subject: 'S', body: 'B' })
  ).body.data.emails[0].email as string;
  const pending = await request(api.app).get(`/emails/${queued}/raw`).set('Authorization', `Bearer ${p.testSecretKey}`);
  expect(pending.status).toBe(409);
  expect(pending.body.error.code).toBe('INVALID_STATE');
});

test('deletes in batches of 1,000 rows until fewer are left; a pass out of budget stops after a batch and says more', async () => {
  const p = await project();
  const template = await sentTestEmail(p, 0);
  const n = 2 * TEST_MESSAGE_PRUNE_BATCH + 150;
  // n sent test emails copied from one row, each with a message stored RETENTION_HOURS + 2 hours ago.
  const copies = await api.database.db.execute<{ id: string }>(sql`
    insert into emails (id, project_id, marketing, source, to_email, from_email, subject, body, body_format, status, test, sent_at)
    select gen_random_uuid(), e.project_id, e.marketing, e.source, 'r' || g || '-' || e.to_email, e.from_email, e.subject, e.body, e.body_format, 'sent', true, now()
    from emails e, generate_series(1, ${n}::int) g where e.id = ${template.id}::uuid
    returning id`);
  const ids = copies.rows.map((r) => r.id);
  expect(ids).toHaveLength(n);
  await api.database.db.execute(sql`
    insert into test_messages (email_id, project_id, raw, created_at)
    select id, ${p.id}::uuid, '\\x00'::bytea, now() - make_interval(hours => ${RETENTION_HOURS + 2}::int) from unnest(${sql.param(ids)}::uuid[]) as t(id)`);

  // Out of budget at once: exactly one statement, one full batch, more left.
  const first = await pruneTestMessages(api.database.db, RETENTION_HOURS, 0);
  expect(first).toEqual({ deleted: TEST_MESSAGE_PRUNE_BATCH, more: true });
  expect(await stored(ids)).toHaveLength(n - TEST_MESSAGE_PRUNE_BATCH);

  // A pass of the task loops until a statement deletes fewer than a batch.
  const pass = await pruneTestMessagesOnce(deps());
  expect(pass.deleted).toBeGreaterThanOrEqual(n - TEST_MESSAGE_PRUNE_BATCH);
  expect(pass.more).toBe(false);
  expect(await stored(ids)).toEqual([]);
  expect(await stored([template.id])).toEqual([template.id]);
});

test('the maintenance task: one pass per interval across processes (its lock expires, never released)', () => {
  const task = testMessagesTask(deps());
  expect(task).toMatchObject({ name: 'test-messages', intervalMs: PRUNE_INTERVAL_MS, release: false });
  expect(task.lockMs).toBeLessThan(task.intervalMs);
  expect(task.lockMs).toBeGreaterThan(task.intervalMs / 2);
});

test('TEST_MESSAGE_RETENTION_HOURS: default 168, at least 1', () => {
  expect(loadConfig(testEnv()).testMessageRetentionHours).toBe(168);
  expect(() => loadConfig(testEnv({ TEST_MESSAGE_RETENTION_HOURS: '0' }))).toThrow(
    /TEST_MESSAGE_RETENTION_HOURS must be between 1 and/,
  );
  expect(() => loadConfig(testEnv({ TEST_MESSAGE_RETENTION_HOURS: '1.5' }))).toThrow(
    /TEST_MESSAGE_RETENTION_HOURS must be a whole number/,
  );
});
