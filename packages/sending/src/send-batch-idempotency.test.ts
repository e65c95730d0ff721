/**
 * Idempotency keys claimed by the batched write statement itself (`idempotency` of
 * `@mailroom/sending/queries/transactional-batch`): a key is claimed with its stored answer in the statement that writes
 * the request, a held key writes nothing (`keyHeld`) while the batch's other requests write, a refused sender
 * claims nothing, a batch claiming one key twice is refused before writing, an expired key is taken over, and a key
 * held by a transaction still running makes the statement wait for its outcome.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { normalizeEmail, normalizedKey } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createDatabase, type Database } from '@mailroom/db/client';
import { addDomain, createProject } from '@mailroom/projects/queries/projects';
import { findIdempotencyKey } from './queries/idempotency';
import {
  SharedContactInBatch,
  writeTransactionalBatch,
  type TransactionalRequest,
} from './queries/transactional-batch';

let database: Database;

beforeAll(() => {
  database = createDatabase({
    url: process.env.TEST_DATABASE_URL!,
    poolSize: 4,
    applicationName: 'test-send-batch-idem',
  });
});
afterAll(() => database.close());

async function project() {
  const p = await createProject(database.db, `send batch idem ${randomUUID().slice(0, 6)}`);
  const domain = `good-${p.id}.example`;
  await addDomain(database.db, p.id, domain, true);
  return { id: p.id, domain };
}

/** A one-recipient request from `sender`'s domain, claiming `key` (if given) with the emails' ids as its answer. */
function request(
  p: { id: string; domain: string },
  to: string,
  key?: string,
  fingerprint = 'f1',
  senderDomain = p.domain,
): TransactionalRequest {
  const email = normalizeEmail(to);
  const recipients = [{ id: newId(), email, emailKey: normalizedKey(email), name: null }];
  return {
    projectId: p.id,
    contacts: [{ email, defaultSubscribed: false }],
    recipients,
    content: {
      templateId: null,
      marketing: false,
      tracking: null,
      tags: null,
      fromEmail: `a@${senderDomain}`,
      fromName: null,
      replyTo: null,
      subject: 'Hi',
      body: '',
      bodyFormat: 'mime',
      variables: {},
      headers: {},
      attachmentIds: [],
      test: false,
    },
    webhookTimestamp: '2026-11-25T00:00:00.000Z',
    senderDomains: [senderDomain],
    ...(key
      ? { idempotency: { key, fingerprint, statusCode: 250, response: { emailIds: recipients.map((r) => r.id) } } }
      : {}),
  };
}

const emailsOf = async (projectId: string) =>
  (
    await database.db.execute<{ id: string; to_email: string }>(
      sql`select id, to_email from emails where project_id = ${projectId} order by to_email`,
    )
  ).rows;

test('keys are claimed with their answer in the statement; a held key writes nothing while the rest of its batch writes', async () => {
  const p = await project();
  const [k1, k2] = [`smtp:${randomUUID()}`, `smtp:${randomUUID()}`];
  const first = [request(p, 'a@example.com', k1), request(p, 'b@example.com'), request(p, 'c@example.com', k2)];
  const out = await writeTransactionalBatch(database.db, first);
  expect(out.map((w) => [w.keyHeld ?? false, w.senderRefused])).toEqual([
    [false, false],
    [false, false],
    [false, false],
  ]);
  const stored = await findIdempotencyKey(database.db, p.id, k1);
  expect(stored).toMatchObject({
    fingerprint: 'f1',
    statusCode: 250,
    response: { emailIds: [first[0].recipients[0].id] },
  });
  expect(stored!.emails).toEqual([
    expect.objectContaining({
      id: first[0].recipients[0].id,
      toEmail: 'a@example.com',
      contactEmail: 'a@example.com',
      status: 'queued',
      contactId: out[0].contacts.get('a@example.com')!.id,
    }),
  ]);

  // Again: k1 held (nothing written for it, whatever its fingerprint), a new key and a keyless request write.
  const again = [
    request(p, 'a@example.com', k1, 'other'),
    request(p, 'd@example.com', `smtp:${randomUUID()}`),
    request(p, 'e@example.com'),
  ];
  const out2 = await writeTransactionalBatch(database.db, again);
  expect(out2.map((w) => w.keyHeld ?? false)).toEqual([true, false, false]);
  expect(out2[0].senderRefused).toBe(false);
  expect(out2[0].contacts.size).toBe(0);
  expect((await emailsOf(p.id)).map((e) => e.to_email)).toEqual([
    'a@example.com',
    'b@example.com',
    'c@example.com',
    'd@example.com',
    'e@example.com',
  ]);
  // The stored answer is the first one's.
  expect((await findIdempotencyKey(database.db, p.id, k1))!.fingerprint).toBe('f1');

  // A batch whose every request is held still answers (one row naming them).
  const held = await writeTransactionalBatch(database.db, [
    request(p, 'a@example.com', k1),
    request(p, 'c@example.com', k2),
  ]);
  expect(held.map((w) => w.keyHeld)).toEqual([true, true]);
  expect(await emailsOf(p.id)).toHaveLength(5);
});

test('a refused sender claims no key; a batch claiming one key twice is refused before writing', async () => {
  const p = await project();
  const key = `smtp:${randomUUID()}`;
  const [refused] = await writeTransactionalBatch(database.db, [
    request(p, 'a@example.com', key, 'f1', 'unverified.example'),
  ]);
  expect(refused).toMatchObject({ senderRefused: true });
  expect(refused.keyHeld).toBeUndefined();
  expect(await findIdempotencyKey(database.db, p.id, key)).toBeUndefined();

  await expect(
    writeTransactionalBatch(database.db, [request(p, 'a@example.com', key), request(p, 'b@example.com', key)]),
  ).rejects.toBeInstanceOf(SharedContactInBatch);
  expect(await findIdempotencyKey(database.db, p.id, key)).toBeUndefined();
  expect(await emailsOf(p.id)).toEqual([]);
});

test('a key past its 24 hours is taken over as new', async () => {
  const p = await project();
  const key = `smtp:${randomUUID()}`;
  await database.db
    .execute(sql`insert into idempotency_keys (project_id, key, fingerprint, status_code, response, created_at)
    values (${p.id}::uuid, ${key}, 'old', 250, '{"emailIds":[]}'::json, now() - interval '25 hours')`);
  const r = request(p, 'a@example.com', key, 'new');
  const [w] = await writeTransactionalBatch(database.db, [r]);
  expect(w.keyHeld).toBeUndefined();
  expect(await findIdempotencyKey(database.db, p.id, key)).toMatchObject({
    fingerprint: 'new',
    response: { emailIds: [r.recipients[0].id] },
  });
  expect(await emailsOf(p.id)).toHaveLength(1);
});

describe('a key held by a transaction still running', () => {
  /** Opens a transaction holding `key` (uncommitted), and resolves once `promise`'s statement waits on it. */
  async function holdWhile(
    p: { id: string },
    key: string,
    during: (waiting: Promise<unknown>) => Promise<void>,
    end: 'commit' | 'rollback',
  ) {
    const client = await database.pool.connect();
    try {
      await client.query('begin');
      await client.query(
        `insert into idempotency_keys (project_id, key, fingerprint, status_code, response, created_at) values ($1, $2, 'f1', 250, '{"emailIds":[]}', now())`,
        [p.id, key],
      );
      const holder = (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0].pid;
      await during(
        (async () => {
          // Waits until a backend is blocked by the holder (the statement under test), then ends the holder.
          for (;;) {
            const r = await database.pool.query(
              `select 1 from pg_stat_activity where $1 = any(pg_blocking_pids(pid))`,
              [holder],
            );
            if (r.rows.length > 0) break;
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
          await client.query(end);
        })(),
      );
    } finally {
      client.release();
    }
  }

  test('its commit makes the statement write nothing (held); its rollback lets the statement claim the key', async () => {
    const p = await project();
    const committed = `smtp:${randomUUID()}`;
    await holdWhile(
      p,
      committed,
      async (ended) => {
        const [w] = await Promise.all([
          writeTransactionalBatch(database.db, [request(p, 'a@example.com', committed), request(p, 'b@example.com')]),
          ended,
        ]);
        expect(w.map((x) => x.keyHeld ?? false)).toEqual([true, false]);
      },
      'commit',
    );
    expect((await emailsOf(p.id)).map((e) => e.to_email)).toEqual(['b@example.com']);

    const rolledBack = `smtp:${randomUUID()}`;
    await holdWhile(
      p,
      rolledBack,
      async (ended) => {
        const [w] = await Promise.all([
          writeTransactionalBatch(database.db, [request(p, 'c@example.com', rolledBack, 'mine')]),
          ended,
        ]);
        expect(w[0].keyHeld).toBeUndefined();
      },
      'rollback',
    );
    expect(await findIdempotencyKey(database.db, p.id, rolledBack)).toMatchObject({ fingerprint: 'mine' });
    expect((await emailsOf(p.id)).map((e) => e.to_email)).toEqual(['b@example.com', 'c@example.com']);
  });
});
