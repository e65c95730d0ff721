/**
 * References to partitioned tables kept by statement-level triggers (migration `0022_partition_references`):
 * `email_events.email_id` → `emails.id` and `webhook_attempts.delivery_id` → `webhook_deliveries.id` behave as
 * `ON DELETE CASCADE` foreign keys: a statement naming a missing row fails whole with 23503, deleting the referenced
 * rows deletes theirs (retention batches, project deletion, plain deletes), a reference cannot be changed, and a
 * delete racing an insert of a referencing row waits for it and leaves no orphan. Referenced ids cannot change, a
 * referenced table is truncated only with its referencing one, and a referenced table's rows stay in its default
 * partition when their month is made (as with a foreign key).
 */
import { sql } from 'drizzle-orm';
import type { PoolClient } from 'pg';
import { createLogger } from '@mailroom/platform/logger';
import { retentionBatch } from '@mailroom/retention/queries/retention';
import { runPartitionPass } from '@mailroom/retention/partitions';
import { createTestProject, useIsolatedApi, waitFor } from '../support/harness';

const ctx = useIsolatedApi();

const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await ctx.api.database.db.execute<T>(query)).rows;
type PgError = { code?: string; message: string; cause?: PgError };
/** The driver's error a statement failed with (drizzle wraps it as `cause`), or undefined when it succeeded. */
const pgError = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (e: PgError) => e.cause ?? e,
  );

async function emails(projectId: string, n: number, daysAgo = 0): Promise<string[]> {
  const rows = await q<{ id: string }>(sql`
    insert into emails (id, project_id, source, to_email, from_email, status, content_expired_at, created_at)
    select mailroom_uuid_v7(now() - make_interval(days => ${daysAgo}::int) + i * interval '1 ms'), ${projectId}::uuid, 'transactional',
      'to@ref.test', 'from@ref.test', 'delivered', now(), now() - make_interval(days => ${daysAgo}::int)
    from generate_series(1, ${n}::int) i returning id`);
  return rows.map((r) => r.id);
}

async function timeline(projectId: string, emailIds: string[], perEmail = 2): Promise<void> {
  await q(sql`insert into email_events (id, email_id, project_id, type)
    select mailroom_uuid_v7(clock_timestamp()), e, ${projectId}::uuid, 'sent' from unnest(${`{${emailIds.join(',')}}`}::uuid[]) e, generate_series(1, ${perEmail}::int)`);
}

const timelineOf = async (emailIds: string[]) =>
  (
    await q<{ n: number }>(
      sql`select count(*)::int as n from email_events where email_id = any(${`{${emailIds.join(',')}}`}::uuid[])`,
    )
  )[0].n;

test('a statement naming a missing email or delivery fails whole with 23503', async () => {
  const p = await createTestProject(ctx.api.database);
  const [a, b] = await emails(p.id, 2);
  const ghost = '01890000-0000-7000-8000-000000000001';
  const err = await pgError(timeline(p.id, [a, ghost, b]));
  expect(err).toMatchObject({ code: '23503' });
  expect(err?.message).toContain('1 row(s) not present in table "emails"');
  expect(await timelineOf([a, b])).toBe(0); // the rows for a and b went with the statement
  await timeline(p.id, [a, b, a]);
  expect(await timelineOf([a, b])).toBe(6);
  // Past 16 referenced rows the check is one set-based statement: the same answer.
  const many = await emails(p.id, 40);
  const bigErr = await pgError(timeline(p.id, [...many, ghost, '01890000-0000-7000-8000-000000000002']));
  expect(bigErr).toMatchObject({ code: '23503' });
  expect(bigErr?.message).toContain('2 row(s) not present');
  expect(await timelineOf(many)).toBe(0);
  await timeline(p.id, many);
  expect(await timelineOf(many)).toBe(80);

  const [ep] = await q<{ id: string }>(sql`insert into webhook_endpoints (id, project_id, url, event_types, secret)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'https://ref.test', '{*}', 's') returning id`);
  const [d] = await q<{
    id: string;
  }>(sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, ${ep.id}::uuid, 'x', '{}'::jsonb, 'succeeded') returning id`);
  const attempt = (deliveryId: string) =>
    q(sql`insert into webhook_attempts (id, delivery_id, project_id, attempt, duration_ms)
    values (mailroom_uuid_v7(now()), ${deliveryId}::uuid, ${p.id}::uuid, 1, 3)`);
  expect(await pgError(attempt(ghost))).toMatchObject({ code: '23503' });
  await attempt(d.id);
  expect(
    await pgError(q(sql`update webhook_attempts set delivery_id = ${ghost}::uuid where delivery_id = ${d.id}::uuid`)),
  ).toMatchObject({ code: '0A000' });
  expect(
    await pgError(q(sql`update email_events set email_id = ${b}::uuid where email_id = ${a}::uuid`)),
  ).toMatchObject({ code: '0A000' });
  await q(sql`update email_events set data = '{"kept": true}'::jsonb where email_id = ${a}::uuid`); // other columns change freely

  // Deleting a delivery deletes its attempts.
  await q(sql`delete from webhook_deliveries where id = ${d.id}::uuid`);
  expect(
    (await q<{ n: number }>(sql`select count(*)::int as n from webhook_attempts where delivery_id = ${d.id}::uuid`))[0]
      .n,
  ).toBe(0);
});

test('deleting emails deletes their timelines: retention batches, plain deletes, project deletion', async () => {
  const p = await createTestProject(ctx.api.database);
  const old = await emails(p.id, 30, 400);
  const recent = await emails(p.id, 5);
  await timeline(p.id, [...old, ...recent], 3);
  expect(await retentionBatch(ctx.api.database.db, 'emails', p.id, 365, 1000)).toBe(30);
  expect(await timelineOf(old)).toBe(0);
  expect(await timelineOf(recent)).toBe(15);

  await q(sql`delete from emails where id = ${recent[0]}::uuid`);
  expect(await timelineOf(recent)).toBe(12);

  // A foreign key's cascade deleting emails (a campaign's) fires the trigger too.
  const [c] = await q<{
    id: string;
  }>(sql`insert into campaigns (id, project_id, name, subject, body, from_email, audience_type)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'c', 's', 'b', 'a@ref.test', 'ALL') returning id`);
  const campaignEmails = (
    await q<{ id: string }>(sql`
    insert into emails (id, project_id, campaign_id, source, marketing, to_email, from_email, status)
    select mailroom_uuid_v7_keyed(now(), 'ref-test:' || i), ${p.id}::uuid, ${c.id}::uuid, 'campaign', true, 'to@ref.test', 'from@ref.test', 'queued'
    from generate_series(1, 20) i returning id`)
  ).map((r) => r.id);
  await timeline(p.id, campaignEmails, 1);
  expect(await timelineOf(campaignEmails)).toBe(20);
  await q(sql`delete from campaigns where id = ${c.id}::uuid`);
  expect(await timelineOf(campaignEmails)).toBe(0);

  await q(sql`delete from projects where id = ${p.id}::uuid`);
  expect(await timelineOf(recent)).toBe(0);
});

test.each([1, 20])(
  'a delete racing an uncommitted insert of %i timeline rows waits for it and removes its rows too',
  async (n) => {
    // 1: the check row by row; 20: the set-based check (past 16 referenced rows). Both lock the emails FOR KEY SHARE.
    const p = await createTestProject(ctx.api.database);
    const ids = await emails(p.id, n);
    const inserter: PoolClient = await ctx.api.database.pool.connect();
    try {
      await inserter.query('begin');
      await inserter.query(
        `insert into email_events (id, email_id, project_id, type) select mailroom_uuid_v7(clock_timestamp()), e, $2, 'opened' from unnest($1::uuid[]) e`,
        [ids, p.id],
      );
      const deleted = q(sql`delete from emails where id = ${ids[n - 1]}::uuid`);
      await waitFor(
        async () => {
          const waiting = await q<{ n: number }>(sql`select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query like 'delete from emails where id = %'`);
          return waiting[0].n > 0;
        },
        10_000,
        'the delete to wait for the row lock',
      );
      await inserter.query('commit');
      await deleted;
    } finally {
      inserter.release();
    }
    expect(await timelineOf([ids[n - 1]])).toBe(0);
    expect(await timelineOf(ids)).toBe(n - 1);
  },
);

test('an insert racing an uncommitted delete of its email waits for it and fails with 23503', async () => {
  const p = await createTestProject(ctx.api.database);
  const [e] = await emails(p.id, 1);
  const deleter: PoolClient = await ctx.api.database.pool.connect();
  try {
    await deleter.query('begin');
    await deleter.query('delete from emails where id = $1', [e]);
    const inserted = pgError(timeline(p.id, [e], 1));
    await waitFor(
      async () => {
        const waiting = await q<{ n: number }>(sql`select count(*)::int as n from pg_stat_activity
        where wait_event_type = 'Lock' and query like 'insert into email_events%'`);
        return waiting[0].n > 0;
      },
      10_000,
      'the insert to wait for the row lock',
    );
    await deleter.query('commit');
    expect(await inserted).toMatchObject({ code: '23503' });
  } finally {
    deleter.release();
  }
  expect(await timelineOf([e])).toBe(0);
});

test('a month made over rows waiting in the default partition leaves deliveries there (referenced), and moves attempts', async () => {
  const p = await createTestProject(ctx.api.database);
  const at = sql`mailroom_uuid_v7('2097-05-10T00:00:00Z'::timestamptz)`;
  const [ep] = await q<{ id: string }>(sql`insert into webhook_endpoints (id, project_id, url, event_types, secret)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'https://ref.test', '{*}', 's') returning id`);
  const [d] = await q<{
    id: string;
  }>(sql`insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status)
    values (${at}, ${p.id}::uuid, ${ep.id}::uuid, 'x', '{}'::jsonb, 'succeeded') returning id`);
  await q(
    sql`insert into webhook_attempts (id, delivery_id, project_id, attempt, duration_ms) values (${at}, ${d.id}::uuid, ${p.id}::uuid, 1, 3)`,
  );
  const where = async (table: string, column: string, id: string) =>
    (
      await q<{ part: string }>(
        sql`select tableoid::regclass::text as part from ${sql.identifier(table)} where ${sql.identifier(column)} = ${id}::uuid`,
      )
    ).map((r) => r.part);

  const logger = createLogger(ctx.api.config, 'test');
  const pass = await runPartitionPass(
    { config: ctx.api.config, database: ctx.api.database, logger },
    Date.UTC(2097, 2, 1),
  );
  // A delivery is updated in place: moving it (copy, then delete) could lose an update made meanwhile.
  expect(pass.blocked).toContain('webhook_deliveries:2097-05');
  expect(await where('webhook_deliveries', 'id', d.id)).toEqual(['webhook_deliveries_default']);
  expect(await where('webhook_attempts', 'delivery_id', d.id)).toEqual(['webhook_attempts_p209705']);

  // Deleting the endpoint cascades to the delivery, and the delivery's trigger to its attempt.
  await q(sql`delete from webhook_endpoints where id = ${ep.id}::uuid`);
  expect(await where('webhook_attempts', 'delivery_id', d.id)).toEqual([]);
});

test('the referenced ids cannot change, and a referenced table is truncated only with its referencing one', async () => {
  const p = await createTestProject(ctx.api.database);
  const [a] = await emails(p.id, 1);
  await timeline(p.id, [a], 1);
  expect(await pgError(q(sql`update emails set id = mailroom_uuid_v7(now()) where id = ${a}::uuid`))).toMatchObject({
    code: '0A000',
  });
  expect(await timelineOf([a])).toBe(1);
  // TRUNCATE fires no delete trigger: refused while the timeline holds rows (a rolled-back transaction keeps the data).
  const c = await ctx.api.database.pool.connect();
  try {
    await c.query('begin');
    // CASCADE reaches the tables still referencing emails by foreign key (test messages, suppressions), not the timeline.
    await expect(c.query('truncate emails cascade')).rejects.toMatchObject({
      code: '0A000',
      message: expect.stringContaining('"email_events" references it'),
    });
    await c.query('rollback');
    await c.query('begin');
    await c.query('truncate emails, email_events cascade');
    await c.query('rollback');
  } finally {
    c.release();
  }
  expect(await timelineOf([a])).toBe(1);
});
