/**
 * Claims and finishes batched across concurrent send jobs (`batcher.ts`, `createSendBatching`), against real
 * Postgres and Redis: items that arrive while a statement runs go together in the next one; a batch that fails
 * as a whole (one row's data refused) runs each item on its own, so the others keep their outcomes; a finish
 * whose claim was lost does not move its row while the rest of its batch does; every `sent` is counted once; and
 * a job retried after its process lost the batched `sent` write does not send again.
 */
import { eq, inArray, sql } from 'drizzle-orm';
import IORedis from 'ioredis';
import type { Queue } from 'bullmq';
import { normalizeEmail } from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import { createLogger } from '@mailroom/platform/logger';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import { createDatabase, type Database } from '@mailroom/db/client';
import { upsertContacts } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { emails } from '@mailroom/db/schema/emails';
import { createTestProject, recipient, testConfig, waitFor, type TestProject } from '../../../test/support/harness';
import { Batcher } from '@mailroom/platform/batcher';
import { createSendBatching, type Claim } from './claim';
import { createEmailSender } from './job';
import type { MailTransport, OutboundMessage } from './ses/transport';

const config = testConfig({ SEND_LEASE_MS: '5000' });
const log = createLogger({ logLevel: 'silent', logPretty: false }, 'test');
// No webhook endpoints in these projects, so nothing is ever enqueued.
const webhookQueue = {
  addBulk: () => Promise.reject(new Error('nothing should be enqueued')),
} as unknown as Queue<WebhookJobPayload>;

let database: Database;
let redis: IORedis;
let p: TestProject;
beforeAll(async () => {
  database = createDatabase({ url: config.databaseUrl, poolSize: 4, applicationName: 'test-sending-batching' });
  redis = new IORedis(config.redisUrl);
  p = await createTestProject(database);
});
afterAll(async () => {
  redis.disconnect();
  await database.close();
});

/** `n` queued transactional emails, each to a new contact of the project (one sending domain). @returns ids. */
async function queuedEmails(n: number): Promise<string[]> {
  const contacts = await upsertContacts(
    database.db,
    p.id,
    Array.from({ length: n }, () => ({ email: normalizeEmail(recipient('batch')), defaultSubscribed: false })),
  );
  const rows = contacts.map((c) => ({
    id: newId(),
    projectId: p.id,
    contactId: c.id,
    templateId: null,
    source: 'transactional' as const,
    toEmail: normalizeEmail(c.email),
    toName: null,
    fromEmail: `hello@${p.domain}`,
    fromName: null,
    replyTo: null,
    subject: 'Hi {{name}}',
    body: '<p>B</p>',
    bodyFormat: 'html' as const,
    variables: { name: 'Ann' },
    headers: {},
    attachmentIds: [],
  }));
  await insertQueuedEmails(database.db, rows);
  return rows.map((r) => r.id);
}

const rowsOf = (ids: string[]) => database.db.select().from(emails).where(inArray(emails.id, ids));
const sentCounted = async () =>
  Number(
    (
      await database.db.execute<{ n: string }>(
        sql`select coalesce(sum(sent), 0) as n from reputation_counts where project_id = ${p.id}::uuid`,
      )
    ).rows[0].n,
  );

describe('Batcher', () => {
  test('items arriving while a batch runs go together in the next one, each gets its own answer', async () => {
    const sizes: number[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const b = new Batcher<number, number>(
      async (items) => items.map((i) => i * 10),
      async (i) => {
        await gate;
        return i * 10;
      },
      { maxBatch: 3, maxInFlight: 1, observe: (n) => sizes.push(n) },
    );
    const first = b.run(1);
    const rest = [2, 3, 4, 5, 6].map((i) => b.run(i));
    release();
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40, 50, 60]);
    expect(sizes).toEqual([1, 3, 2]);
  });

  test('a batch that fails runs each item on its own: the bad item fails alone', async () => {
    const ran: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const b = new Batcher<string, string>(
      (items) => Promise.reject(new Error(`batch of ${items.length} refused`)),
      async (item) => {
        await gate;
        ran.push(item);
        if (item === 'bad') throw new Error('bad item');
        return item.toUpperCase();
      },
      { maxBatch: 10, maxInFlight: 1 },
    );
    const first = b.run('first');
    const batch = ['a', 'bad', 'c'].map((i) => b.run(i).catch((err: Error) => err.message));
    release();
    expect(await first).toBe('FIRST');
    expect(await Promise.all(batch)).toEqual(['A', 'bad item', 'C']);
    expect(ran.sort()).toEqual(['a', 'bad', 'c', 'first']);
  });
});

describe('batched claims and finishes', () => {
  test('concurrent claims share statements; a final, a missing and a doubled email each get their own answer', async () => {
    const sizes: number[] = [];
    const batching = createSendBatching(
      { config, db: database.db, webhookQueue },
      60_000,
      50,
      (kind, n) => kind === 'claim' && sizes.push(n),
    );
    const ids = await queuedEmails(20);
    const [done] = await queuedEmails(1);
    const first = await batching.claim(done);
    if (!first.ok) throw new Error('expected a claim');
    expect(
      await batching.finish(first.claim, { status: 'sent', messageId: `ses-${done}`, renderedSubject: 'S' }, log),
    ).toBe(true);
    const missing = newId();

    const answers = await Promise.all([...ids, done, missing, ids[0]].map((id) => batching.claim(id)));
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    const claims = answers.slice(0, 20);
    expect(claims.every((a) => a.ok)).toBe(true);
    const tokens = claims.map((a) => (a.ok ? a.claim.token : ''));
    expect(new Set(tokens).size).toBe(20);
    expect(answers[20]).toEqual({ ok: false, kind: 'final', status: 'sent' });
    expect(answers[21]).toEqual({ ok: false, kind: 'missing' });
    // The same email asked twice: one claim holds it, the other is told it is leased.
    expect(answers[22]).toMatchObject({ ok: false, kind: 'leased' });
    const rows = await rowsOf(ids);
    for (const [i, id] of ids.entries()) {
      expect(rows.find((r) => r.id === id)).toMatchObject({ status: 'sending', claimToken: tokens[i], attempts: 1 });
    }
  });

  test('a batch of finishes: a lost claim does not move its row, the others move, each sent counted once', async () => {
    const sizes: number[] = [];
    const batching = createSendBatching(
      { config, db: database.db, webhookQueue },
      60_000,
      50,
      (kind, n) => kind === 'finish' && sizes.push(n),
    );
    const ids = await queuedEmails(12);
    const claims = (await Promise.all(ids.map((id) => batching.claim(id)))).map((a) =>
      a.ok ? a.claim : undefined,
    ) as Claim[];
    const stale: Claim = { ...claims[5], token: newId() };
    const before = await sentCounted();

    const outcomes = await Promise.all(
      claims.map((c, i) =>
        i === 3
          ? batching.finish(c, { status: 'failed', reason: 'refused', failureKind: 'permanent' }, log)
          : batching.finish(
              i === 5 ? stale : c,
              { status: 'sent', messageId: `ses-${c.email.id}`, renderedSubject: 'Hi Ann' },
              log,
            ),
      ),
    );
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    expect(outcomes).toEqual(ids.map((_, i) => i !== 5));
    const rows = await rowsOf(ids);
    for (const [i, id] of ids.entries()) {
      const r = rows.find((x) => x.id === id)!;
      if (i === 5) expect(r).toMatchObject({ status: 'sending', claimToken: claims[5].token, messageId: null });
      else if (i === 3)
        expect(r).toMatchObject({ status: 'failed', failureKind: 'permanent', error: 'refused', claimToken: null });
      else
        expect(r).toMatchObject({
          status: 'sent',
          messageId: `ses-${id}`,
          renderedSubject: 'Hi Ann',
          claimToken: null,
        });
    }
    expect((await sentCounted()) - before).toBe(10);
    const timeline = await database.db.execute<{ email_id: string; type: string }>(
      sql`select email_id, type from email_events where email_id = any(${sql.param(ids)}::uuid[]) and type <> 'queued'`,
    );
    expect(timeline.rows).toHaveLength(11);
    expect(timeline.rows.filter((t) => t.type === 'sent')).toHaveLength(10);
  });

  test('one finish Postgres refuses (a NUL byte) fails alone; the rest of its batch is written', async () => {
    const sizes: number[] = [];
    const batching = createSendBatching(
      { config, db: database.db, webhookQueue },
      60_000,
      50,
      (kind, n) => kind === 'finish' && sizes.push(n),
    );
    const ids = await queuedEmails(8);
    const claims = (await Promise.all(ids.map((id) => batching.claim(id)))).map((a) =>
      a.ok ? a.claim : undefined,
    ) as Claim[];
    const results = await Promise.all(
      claims.map((c, i) =>
        batching
          .finish(
            c,
            i === 2
              ? { status: 'failed', reason: 'bad\u0000reason', failureKind: 'permanent' }
              : { status: 'sent', messageId: `ses-${c.email.id}`, renderedSubject: 'S' },
            log,
          )
          .catch(() => 'refused'),
      ),
    );
    expect(Math.max(...sizes)).toBeGreaterThan(1);
    expect(results).toEqual(ids.map((_, i) => (i === 2 ? 'refused' : true)));
    const rows = await rowsOf(ids);
    expect(rows.find((r) => r.id === ids[2])).toMatchObject({ status: 'sending', claimToken: claims[2].token });
    expect(rows.filter((r) => r.status === 'sent')).toHaveLength(7);
  });
});

describe('the send job with batching', () => {
  /** A transport that holds every send until `n` have arrived (so they are in flight together), then runs `then`. */
  function barrier(n: number, then: () => Promise<void> = async () => undefined) {
    const t = {
      sent: [] as OutboundMessage[],
      waiting: [] as (() => void)[],
      async send(m: OutboundMessage) {
        t.sent.push(m);
        await new Promise<void>((resolve) => {
          t.waiting.push(resolve);
          if (t.waiting.length === n) void then().then(() => t.waiting.forEach((w) => w()));
        });
        return { messageId: `ses-${m.tags!.email_id}` };
      },
      close() {},
    };
    return t satisfies MailTransport;
  }

  test('concurrent jobs: each email goes to SES once; the same jobs retried are skipped, nothing sent twice', async () => {
    const ids = await queuedEmails(16);
    const transport = barrier(16);
    const send = createEmailSender({ config, database, transport, webhookQueue, redis });
    const steps = await Promise.all(ids.map((emailId) => send({ emailId, attempt: { made: 0, max: 3 }, log })));
    expect(steps.map((s) => s.kind === 'done' && s.result.outcome)).toEqual(ids.map(() => 'sent'));
    expect(transport.sent.map((m) => m.tags!.email_id).sort()).toEqual([...ids].sort());
    // Retried (a worker died after the batch committed, before BullMQ heard): nothing goes to SES again.
    const again = await Promise.all(ids.map((emailId) => send({ emailId, attempt: { made: 1, max: 3 }, log })));
    expect(again.every((s) => s.kind === 'done' && s.result.outcome === 'skipped')).toBe(true);
    expect(transport.sent).toHaveLength(16);
  });

  test('the batched sent write lost after SES accepted: the retried jobs record the kept outcomes, no second send', async () => {
    const ids = await queuedEmails(6);
    // This "process" loses Postgres once SES has accepted all six: its batched finish fails.
    const lost = createDatabase({
      url: config.databaseUrl,
      poolSize: 2,
      applicationName: 'test-sending-batching-lost',
    });
    const transport = barrier(6, () => lost.close());
    const send = createEmailSender({ config, database: lost, transport, webhookQueue, redis });
    const failed = await Promise.all(
      ids.map((emailId) =>
        send({ emailId, attempt: { made: 0, max: 3 }, log }).then(
          () => 'finished',
          () => 'threw',
        ),
      ),
    );
    expect(failed).toEqual(ids.map(() => 'threw'));
    expect(transport.sent).toHaveLength(6);
    expect((await rowsOf(ids)).every((r) => r.status === 'sending')).toBe(true);

    // The lease runs out; the jobs are retried by another process.
    await database.db
      .update(emails)
      .set({ claimedAt: new Date(Date.now() - 60_000) })
      .where(inArray(emails.id, ids));
    const other = barrier(1);
    const retry = createEmailSender({ config, database, transport: other, webhookQueue, redis });
    const steps = await Promise.all(ids.map((emailId) => retry({ emailId, attempt: { made: 1, max: 3 }, log })));
    expect(steps).toEqual(ids.map((id) => ({ kind: 'done', result: { outcome: 'sent', messageId: `ses-${id}` } })));
    expect(other.sent).toHaveLength(0);
    const rows = await rowsOf(ids);
    for (const id of ids)
      expect(rows.find((r) => r.id === id)).toMatchObject({ status: 'sent', messageId: `ses-${id}`, attempts: 2 });
    expect(await redis.exists(...ids.map((id) => `${config.queuePrefix}:ses-accepted:${id}`))).toBe(0);
  });
  test('finishes waiting behind a running batch keep their SES outcome in Redis first, and drop it once written', async () => {
    const ids = await queuedEmails(16);
    const keys = ids.map((id) => `${config.queuePrefix}:ses-accepted:${id}`);
    // Once SES has accepted all sixteen, another transaction holds their rows: the first finishes block on it.
    const holder = createDatabase({
      url: config.databaseUrl,
      poolSize: 1,
      applicationName: 'test-sending-batching-holder',
    });
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let holding: Promise<unknown> = Promise.resolve();
    const transport = barrier(
      16,
      () =>
        new Promise<void>((locked) => {
          holding = holder.db.transaction(async (tx) => {
            await tx.execute(sql`select 1 from emails where id = any(${`{${ids.join(',')}}`}::uuid[]) for update`);
            locked();
            await held;
          });
        }),
    );
    const send = createEmailSender({ config, database, transport, webhookQueue, redis });
    const steps = Promise.all(ids.map((emailId) => send({ emailId, attempt: { made: 0, max: 3 }, log })));
    try {
      // At most two finishes run at once (blocked on the rows); every other one was kept before it waited.
      await waitFor(async () => (await redis.exists(...keys)) >= 14, 10_000, 'outcomes kept in Redis');
    } finally {
      release();
      await holding;
      await holder.close();
    }
    expect((await steps).map((s) => s.kind === 'done' && s.result.outcome)).toEqual(ids.map(() => 'sent'));
    // Removed with the other removals of their turn, after the jobs have answered.
    await waitFor(async () => (await redis.exists(...keys)) === 0, 10_000, 'kept outcomes removed');
    expect((await rowsOf(ids)).every((r) => r.status === 'sent')).toBe(true);
  });
});

test('a row claimed in a batch is only finished by its own token', async () => {
  const batching = createSendBatching({ config, db: database.db, webhookQueue }, 60_000, 50);
  const [id] = await queuedEmails(1);
  const a = await batching.claim(id);
  if (!a.ok) throw new Error('expected a claim');
  expect(await batching.finish({ ...a.claim, token: newId() }, { status: 'cancelled', reason: 'x' }, log)).toBe(false);
  expect((await database.db.select().from(emails).where(eq(emails.id, id)))[0]).toMatchObject({
    status: 'sending',
    claimToken: a.claim.token,
  });
});

test("claims and finishes, batched or alone, run on the claim pool's generic plans; each claims once and finishes only with its token", async () => {
  // One connection, so the prepared statements read back are every named statement the claims and finishes ran.
  const generic = createDatabase({
    url: config.databaseUrl,
    poolSize: 1,
    applicationName: 'test-send-generic',
    genericPlans: true,
  });
  try {
    expect(
      (await generic.db.execute<{ plan_cache_mode: string }>(sql`show plan_cache_mode`)).rows[0].plan_cache_mode,
    ).toBe('force_generic_plan');
    const sizes: number[] = [];
    const batching = createSendBatching(
      { config, db: database.db, claimDb: generic.db, webhookQueue },
      60_000,
      50,
      (_, n) => sizes.push(n),
    );
    for (let round = 0; round < 3; round++) {
      const ids = await queuedEmails(6);
      const claims = await Promise.all(ids.map((id) => batching.claim(id)));
      const held = claims.map((c) => (c.ok ? c.claim : undefined)).filter((c): c is Claim => c !== undefined);
      expect(held).toHaveLength(6);
      // Alone (nothing else in its turn): a second claim of a held row is refused, a finish with another token
      // moves nothing.
      expect(await batching.claim(ids[0])).toMatchObject({ ok: false, kind: 'leased' });
      expect(
        await batching.finish(
          { ...held[0], token: newId() },
          { status: 'sent', messageId: 'wrong', renderedSubject: 'S' },
          log,
        ),
      ).toBe(false);
      const finished = await Promise.all(
        held.map((c) =>
          batching.finish(c, { status: 'sent', messageId: `g-${c.email.id}`, renderedSubject: 'S' }, log),
        ),
      );
      expect(finished).toEqual(held.map(() => true));
      const rows = await rowsOf(ids);
      expect(rows.map((r) => [r.status, r.messageId]).sort()).toEqual(
        held.map((c) => ['sent', `g-${c.email.id}`]).sort(),
      );
    }
    // A lone claim and finish that succeed.
    const [alone] = await queuedEmails(1);
    const one = await batching.claim(alone);
    if (!one.ok) throw new Error('expected a claim');
    expect(await batching.finish(one.claim, { status: 'sent', messageId: 'alone', renderedSubject: 'S' }, log)).toBe(
      true,
    );
    expect(sizes.filter((n) => n > 1).length).toBeGreaterThanOrEqual(6);

    const plans = (
      await generic.db.execute<{ statement: string; generic_plans: string; custom_plans: string }>(
        sql`select statement, generic_plans::text, custom_plans::text from pg_prepared_statements`,
      )
    ).rows;
    // The claim and the finish are one statement each, batched or alone (a batch of one): three batches and four
    // lone ones of each ran there, each on its one generic plan, never planned for its values.
    expect(plans).toHaveLength(2);
    expect(plans.find((p) => p.statement.includes('with want as'))).toMatchObject({
      generic_plans: '7',
      custom_plans: '0',
    });
    expect(plans.find((p) => p.statement.includes('with input as'))).toMatchObject({
      generic_plans: '7',
      custom_plans: '0',
    });
  } finally {
    await generic.close();
  }
});
