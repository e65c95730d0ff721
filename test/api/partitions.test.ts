/**
 * Time partitions at work (migration 0018, `@mailroom/retention/partitions`): the maintenance pass makes months
 * ahead and handles rows landing in a default partition; retention drops whole months past every project's
 * retention with the derived counts right, and keeps the months something still needs; dedupe guarantees that
 * moved from unique indexes into the primary key still hold.
 */
import { sql } from 'drizzle-orm';
import { createLogger } from '@mailroom/platform/logger';
import { idLowerBound, idTimestampMs, keyedIdAt, newId } from '@mailroom/platform/ids';
import { ensureMonthPartitions, listMonthPartitions, PARTITIONED_TABLES } from '@mailroom/retention/queries/partitions';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { claimEmail, finishEmail } from '@mailroom/sending/queries/email-batches';
import { foldAllCounterDeltas } from '@mailroom/contacts/queries/counters';
import { fanoutBatch } from '@mailroom/campaigns/queries/campaign-fanout';
import { runPartitionPass, PARTITION_MONTHS_AHEAD } from '@mailroom/retention/partitions';
import { runRetentionPass } from '@mailroom/retention/retention';
import { beginStepRun, moveExecution, stepRunId } from '@mailroom/workflows/queries/workflow-engine';
import type { ExecutionRow, WorkflowStepRow } from '@mailroom/workflows/queries/workflows';
import { partitionsTask, PARTITIONS_INTERVAL_MS } from '../../apps/worker/src/processors/partitions';
import { client, createTestProject, recipient, useIsolatedApi } from '../support/harness';

const ctx = useIsolatedApi();

const deps = () => ({
  config: ctx.api.config,
  database: ctx.api.database,
  logger: createLogger(ctx.api.config, 'test'),
});
const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await ctx.api.database.db.execute<T>(query)).rows;
const partOf = async (table: string, id: string) =>
  (
    await q<{ part: string }>(
      sql`select tableoid::regclass::text as part from ${sql.identifier(table)} where id = ${id}::uuid`,
    )
  )[0]?.part;
const utc = (y: number, m: number, d = 1) => Date.UTC(y, m - 1, d);
const idAt = (ms: number) => sql`mailroom_uuid_v7(${new Date(ms).toISOString()}::timestamptz)`;
const exists = async (name: string) =>
  (await q<{ r: string | null }>(sql`select to_regclass(${name})::text as r`))[0].r !== null;

async function contactOf(projectId: string): Promise<string> {
  const [c] = await q<{ id: string }>(sql`
    insert into contacts (id, project_id, email, email_key, subscribed) values (mailroom_uuid_v7(now()), ${projectId}::uuid, ${recipient('pt')}, ${recipient('pt')}, true)
    returning id`);
  return c.id;
}

test('SQL and TypeScript agree on the month bounds and on derived ids', async () => {
  const ms = utc(2027, 3);
  const [r] = await q<{ floor: string; keyed: string }>(sql`
    select mailroom_uuid_v7_floor(${new Date(ms).toISOString()}::timestamptz)::text as floor,
      mailroom_uuid_v7_keyed(${new Date(ms + 5).toISOString()}::timestamptz, 'campaign-email:a:b')::text as keyed`);
  expect(r.floor).toBe(idLowerBound(ms));
  expect(r.keyed).toBe(keyedIdAt(ms + 5, 'campaign-email:a:b'));
  expect(keyedIdAt(ms + 5, 'campaign-email:a:b')).toMatch(
    /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/,
  );
});

test("SQL and TypeScript agree on a step run's id, derived from its execution's id and version", async () => {
  for (const ms of [utc(2027, 3), utc(2027, 3) + 999, utc(2030, 12, 31) + 86_399_999, Date.now()]) {
    const [r] = await q<{ x: string; run: string; time: string }>(sql`
      select x::text, mailroom_uuid_v7_keyed(mailroom_uuid_v7_time(x), 'step-run:' || x::text || ':' || 7::text)::text as run,
        floor(extract(epoch from mailroom_uuid_v7_time(x)) * 1000)::bigint::text as time
      from (select ${idAt(ms)} as x) s`);
    expect(Number(r.time)).toBe(ms);
    expect(r.run).toBe(stepRunId(r.x, 7));
    expect(idTimestampMs(r.run)).toBe(ms);
  }
});

test('the maintenance pass makes the months ahead, every table, and is a maintenance task of its own', async () => {
  const now = utc(2090, 11, 20);
  const first = await runPartitionPass(deps(), now);
  expect(first.failed).toEqual([]);
  for (const table of PARTITIONED_TABLES) {
    const names = (await listMonthPartitions(ctx.api.database.db, table)).map((p) => p.name);
    expect(names).toEqual(
      expect.arrayContaining([`${table}_p209011`, `${table}_p209012`, `${table}_p209101`, `${table}_p209102`]),
    );
    expect(names).not.toContain(`${table}_p209103`);
  }
  expect(PARTITION_MONTHS_AHEAD).toBe(3);
  // A second pass finds them made.
  const again = await runPartitionPass(deps(), now);
  expect(again).toEqual(first);
  // Indexes are named after the parent's on every partition (so plans read the same).
  const idx = await q<{ indexname: string }>(
    sql`select indexname from pg_indexes where tablename = 'events_p209011' order by 1`,
  );
  expect(idx.map((i) => i.indexname)).toEqual([
    'events_contact_idx_p209011',
    'events_pkey_p209011',
    'events_project_id_idx_p209011',
    'events_project_name_contact_idx_p209011',
    'events_project_name_idx_p209011',
    'events_retention_idx_p209011',
  ]);
  expect(partitionsTask(deps())).toMatchObject({
    name: 'partitions',
    intervalMs: PARTITIONS_INTERVAL_MS,
    release: false,
  });
});

test('a row beyond every month lands in the default partition, is reported, and moves into its month when that month is made', async () => {
  const p = await createTestProject(ctx.api.database);
  const contactId = await contactOf(p.id);
  const [ev] = await q<{ id: string }>(sql`
    insert into events (id, project_id, contact_id, name) values (${idAt(utc(2095, 5, 10))}, ${p.id}::uuid, ${contactId}::uuid, 'far.future') returning id`);
  expect(await partOf('events', ev.id)).toBe('events_default');
  const reported = await runPartitionPass(deps());
  expect(reported.defaultRows.events).toBeGreaterThanOrEqual(1);

  const moved = await runPartitionPass(deps(), utc(2095, 3, 1));
  expect(moved.blocked).toEqual([]);
  expect(await partOf('events', ev.id)).toBe('events_p209505');
  // The move wrote straight into the partitions: no trigger counted the event a second time.
  expect(
    (
      await q<{ count: number }>(
        sql`select count::int from event_names_now where project_id = ${p.id}::uuid and name = 'far.future'`,
      )
    )[0].count,
  ).toBe(1);

  // An email (a table others reference: moving it would cascade) stays in default and its month is reported blocked.
  const [em] = await q<{ id: string }>(sql`
    insert into emails (id, project_id, source, to_email, from_email, subject, body, body_format, status)
    values (${idAt(utc(2096, 5, 10))}, ${p.id}::uuid, 'transactional', 'x@y.test', ${`a@${p.domain}`}, 's', 'b', 'html', 'sent') returning id`);
  const blocked = await runPartitionPass(deps(), utc(2096, 3, 1));
  expect(blocked.blocked).toEqual(['emails:2096-05']);
  expect(await exists('emails_p209605')).toBe(false);
  expect(await exists('events_p209605')).toBe(true);
  expect(await partOf('emails', em.id)).toBe('emails_default');
  expect((await client(ctx.api.app, p).get(`/emails/${em.id}`)).body.data).toMatchObject({ id: em.id, status: 'sent' });
});

test("retention drops whole months past every project's retention, with event counts right, and keeps months something needs", async () => {
  const p = await createTestProject(ctx.api.database);
  const other = await createTestProject(ctx.api.database);
  const contactId = await contactOf(p.id);
  // Months of 2001 (long past every retention) with their partitions, and recent rows of the same event names.
  for (const table of PARTITIONED_TABLES)
    await ensureMonthPartitions(ctx.api.database.db, table, utc(2001, 1), utc(2001, 6));
  const ev = (ms: number, name: string) =>
    sql`(${idAt(ms)}, ${p.id}::uuid, ${contactId}::uuid, ${name}, ${new Date(ms).toISOString()}::timestamptz)`;
  await ctx.api.database.db.execute(sql`insert into events (id, project_id, contact_id, name, created_at) values
    ${ev(utc(2001, 1, 5), 'old.only')}, ${ev(utc(2001, 1, 6), 'old.only')}, ${ev(utc(2001, 1, 7), 'both')}, ${ev(Date.now(), 'both')}`);
  const email = (ms: number, status: string, campaignId: string | null = null) =>
    q<{ id: string }>(sql`
    insert into emails (id, project_id, contact_id, campaign_id, source, to_email, from_email, subject, body, body_format, status, created_at)
    values (${idAt(ms)}, ${p.id}::uuid, ${contactId}::uuid, ${campaignId}::uuid, ${campaignId ? 'campaign' : 'transactional'}, 'x@y.test', ${`a@${p.domain}`},
      's', 'b', 'html', ${status}, ${new Date(ms).toISOString()}::timestamptz) returning id`).then((r) => r[0].id);
  const febEmail = await email(utc(2001, 2, 27), 'delivered');
  // Its timeline: one row in its month, one in a later month that stays (April: a campaign email owns rows there).
  await ctx.api.database.db.execute(sql`insert into email_events (id, email_id, project_id, type) values
    (${idAt(utc(2001, 2, 27))}, ${febEmail}::uuid, ${p.id}::uuid, 'sent'), (${idAt(utc(2001, 4, 20))}, ${febEmail}::uuid, ${p.id}::uuid, 'opened')`);
  await ctx.api.database.db.execute(
    sql`insert into test_messages (email_id, project_id, raw) values (${febEmail}::uuid, ${p.id}::uuid, decode('00', 'hex'))`,
  );
  await ctx.api.database.db
    .execute(sql`insert into suppressions (id, project_id, email, email_key, reason, source_email_id)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'x@y.test', 'x@y.test', 'hard_bounce', ${febEmail}::uuid)`);
  const [campaign] = await q<{ id: string }>(sql`
    insert into campaigns (id, project_id, name, subject, body, from_email, audience_type) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'c', 's', 'b', 'a@b.test', 'ALL') returning id`);
  const aprCampaignEmail = await email(utc(2001, 4, 10), 'delivered', campaign.id);
  const mayQueued = await email(utc(2001, 5, 10), 'queued');
  const ep = (
    await q<{ id: string }>(sql`insert into webhook_endpoints (id, project_id, url, event_types, secret)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'https://h.test', '{*}', 's') returning id`)
  )[0].id;
  const delivery = (ms: number, status: string) =>
    q<{ id: string }>(sql`
    insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status, created_at)
    values (${idAt(ms)}, ${p.id}::uuid, ${ep}::uuid, 'x', '{}'::jsonb, ${status}, ${new Date(ms).toISOString()}::timestamptz) returning id`).then(
      (r) => r[0].id,
    );
  const janDelivery = await delivery(utc(2001, 1, 20), 'succeeded');
  await ctx.api.database.db
    .execute(sql`insert into webhook_attempts (id, delivery_id, project_id, attempt, duration_ms) values
    (${idAt(utc(2001, 1, 20))}, ${janDelivery}::uuid, ${p.id}::uuid, 1, 5), (${idAt(utc(2001, 4, 3))}, ${janDelivery}::uuid, ${p.id}::uuid, 2, 5)`);
  const marPending = await delivery(utc(2001, 3, 20), 'pending');
  // A project keeping everything for 100 years holds every month back; the others keep the defaults.
  // Step runs: January is empty, March holds the run of an execution started then.
  const [w] = await q<{ id: string }>(sql`
    insert into workflows (id, project_id, name, trigger_type, trigger_event) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'wf', 'EVENT', 'signup') returning id`);
  const [marX] = await q<{ id: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, entry_key, finished_at, created_at)
    values (${idAt(utc(2001, 3, 3))}, ${p.id}::uuid, ${w.id}::uuid, ${contactId}::uuid, 'COMPLETED', 'k', now(), ${new Date(utc(2001, 3, 3)).toISOString()}::timestamptz)
    returning id`);
  await ctx.api.database.db
    .execute(sql`insert into workflow_step_runs (id, execution_id, project_id, step_type, version, status)
    values (${stepRunId(marX.id, 0)}::uuid, ${marX.id}::uuid, ${p.id}::uuid, 'DELAY', 0, 'COMPLETED')`);
  await ctx.api.database.db
    .execute(sql`update projects set retention = '{"eventDays": 36500, "emailDays": 36500, "webhookDays": 36500, "workflowExecutionDays": 36500}'::jsonb
    where id = ${other.id}::uuid`);
  expect(await runRetentionPass(deps(), { maxBatches: 0 })).toMatchObject({
    partitionsDropped: [],
    partitionsFailed: [],
  });
  expect(await exists('events_p200101')).toBe(true);
  await ctx.api.database.db.execute(sql`update projects set retention = null where id = ${other.id}::uuid`);

  const result = await runRetentionPass(deps(), { maxBatches: 0 });
  expect(result.partitionsFailed).toEqual([]);
  expect(result.partitionMs).toBeGreaterThan(0); // timed apart from the batches (none ran: maxBatches 0)
  expect(result.partitionsDropped).toEqual(
    expect.arrayContaining([
      'events_p200101',
      'webhook_attempts_p200101',
      'webhook_deliveries_p200101',
      'emails_p200102',
      'workflow_step_runs_p200101',
    ]),
  );
  // step runs: an empty month goes, a month holding a run stays while its execution exists.
  expect(await exists('workflow_step_runs_p200101')).toBe(false);
  expect(await partOf('workflow_step_runs', stepRunId(marX.id, 0))).toBe('workflow_step_runs_p200103');
  // events: the month is gone and event_names counts lowered by its rows, in the same pass.
  expect(await exists('events_p200101')).toBe(false);
  const names = await q<{ name: string; count: number }>(
    sql`select name, count::int from event_names_now where project_id = ${p.id}::uuid order by name`,
  );
  expect(names).toEqual([{ name: 'both', count: 1 }]);
  // Folded into event_names, the name only the dropped month held is gone.
  await foldAllCounterDeltas(ctx.api.database.db);
  expect(await q(sql`select name, count::int from event_names where project_id = ${p.id}::uuid order by name`)).toEqual(
    [{ name: 'both', count: 1 }],
  );
  // emails: February went with its timeline in April's partition, its test message, its suppression's link; April
  // stays (its campaign exists); May stays (queued).
  expect(await exists('emails_p200102')).toBe(false);
  expect(await q(sql`select 1 from email_events where email_id = ${febEmail}::uuid`)).toEqual([]);
  expect(await q(sql`select 1 from test_messages where email_id = ${febEmail}::uuid`)).toEqual([]);
  expect(
    await q<{ source_email_id: string | null }>(
      sql`select source_email_id from suppressions where project_id = ${p.id}::uuid`,
    ),
  ).toEqual([{ source_email_id: null }]);
  expect(await partOf('emails', aprCampaignEmail)).toBe('emails_p200104');
  expect(await partOf('emails', mayQueued)).toBe('emails_p200105');
  // A timeline month stays while its rows may belong to a campaign email or an unsent one (April's row points to
  // February's email, and April's campaign email lies between).
  expect(await exists('email_events_p200103')).toBe(false);
  expect(await exists('email_events_p200104')).toBe(true);
  // webhooks: January's delivery went with its April attempt; March stays (pending), and so does April's attempts
  // month (its rows may belong to deliveries from January to April, March's pending one among them).
  expect(await q(sql`select 1 from webhook_attempts where delivery_id = ${janDelivery}::uuid`)).toEqual([]);
  expect(await partOf('webhook_deliveries', marPending)).toBe('webhook_deliveries_p200103');
  expect(await exists('webhook_attempts_p200103')).toBe(false);
  expect(await exists('webhook_attempts_p200104')).toBe(true);
  expect(await q(sql`select relname from pg_class where relname like '%\\_detached'`)).toEqual([]);

  // Once the campaign is deleted and the email sent, their months go too.
  await ctx.api.database.db.execute(sql`delete from campaigns where id = ${campaign.id}::uuid`);
  await ctx.api.database.db.execute(sql`delete from workflow_executions where id = ${marX.id}::uuid`);
  await ctx.api.database.db.execute(sql`update emails set status = 'sent' where id = ${mayQueued}::uuid`);
  await ctx.api.database.db.execute(
    sql`update webhook_deliveries set status = 'failed' where id = ${marPending}::uuid`,
  );
  expect((await runRetentionPass(deps(), { maxBatches: 0 })).partitionsFailed).toEqual([]);
  for (const table of PARTITIONED_TABLES) {
    expect((await listMonthPartitions(ctx.api.database.db, table)).filter((m) => m.name.includes('_p2001'))).toEqual(
      [],
    );
  }
  expect(
    (
      await q<{ count: number }>(
        sql`select count::int from event_names_now where project_id = ${p.id}::uuid and name = 'both'`,
      )
    )[0].count,
  ).toBe(1);
});

test("dedupe: a re-run fan-out batch inserts nobody twice (the partition's unique index), and a second write of a step's email is refused by the primary key", async () => {
  const p = await createTestProject(ctx.api.database);
  const as = client(ctx.api.app, p);
  for (let i = 0; i < 5; i++) expect((await as.post('/contacts', { email: recipient('fan') })).status).toBe(201);
  const [c] = await q<{ id: string }>(sql`
    insert into campaigns (id, project_id, name, subject, body, from_email, audience_type, status, started_at)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'c', 's', 'b', ${`a@${p.domain}`}, 'ALL', 'SENDING', now()) returning id`);
  const first = await fanoutBatch(ctx.api.database.db, c.id, sql`true`, 100);
  expect(first).toMatchObject({ applied: true, inserted: 5, done: true });
  // The same batch again, as if its cursor advance had been lost: every row conflicts on (campaign_id, contact_id).
  await ctx.api.database.db.execute(
    sql`update campaigns set fanout_cursor = null, fanout_done = false where id = ${c.id}::uuid`,
  );
  const again = await fanoutBatch(ctx.api.database.db, c.id, sql`true`, 100);
  expect(again).toMatchObject({ applied: true, inserted: 0, done: true });
  const rows = await q<{ id: string; contact_id: string; part: string }>(sql`
    select e.id, e.contact_id, e.tableoid::regclass::text as part from emails e where e.campaign_id = ${c.id}::uuid order by e.contact_id`);
  expect(rows).toHaveLength(5);
  // Every id has the campaign's start as its time (one month partition) and the ids follow the contacts' order.
  const [{ ms }] = await q<{ ms: string }>(
    sql`select floor(extract(epoch from started_at) * 1000)::bigint::text as ms from campaigns where id = ${c.id}::uuid`,
  );
  for (const r of rows) expect(idTimestampMs(r.id)).toBe(Number(ms));
  for (const r of rows) expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  expect(new Set(rows.map((r) => r.part)).size).toBe(1);
  expect([...rows.map((r) => r.id)].sort()).toEqual(rows.map((r) => r.id));
  // The guarantee is the partition's unique index, whatever the id.
  await expect(
    q(sql`insert into emails (id, project_id, contact_id, campaign_id, marketing, source, to_email, from_email, status)
      select mailroom_uuid_v7_ordered(k.started_at, 4611686018427387903), k.project_id, ${rows[0].contact_id}::uuid, k.id, true, 'campaign', 'x@example.com', 'a@example.com', 'queued'
      from campaigns k where k.id = ${c.id}::uuid`),
  ).rejects.toMatchObject({ cause: { code: '23505' } });

  // A SEND_EMAIL step's email id is derived from its step run: the second write is refused by the primary key.
  const runId = '018f0000-0000-7000-8000-000000000001';
  const emailId = keyedIdAt(0x018f00000000, `workflow-email:${runId}`);
  const row = {
    id: emailId,
    projectId: p.id,
    source: 'workflow' as const,
    toEmail: recipient('wf'),
    fromEmail: `a@${p.domain}`,
    subject: 's',
    body: 'b',
    bodyFormat: 'html' as const,
  };
  await ctx.api.database.db.transaction((tx) => insertQueuedEmails(tx, [row]));
  await expect(ctx.api.database.db.transaction((tx) => insertQueuedEmails(tx, [row]))).rejects.toMatchObject({
    cause: { code: '23505' },
  });
  expect(await q(sql`select 1 from emails where id = ${emailId}::uuid`)).toHaveLength(1);
});

test("a step run sits in its execution's month, and a retried begin finds it through the primary key", async () => {
  const p = await createTestProject(ctx.api.database);
  const contactId = await contactOf(p.id);
  await ensureMonthPartitions(ctx.api.database.db, 'workflow_step_runs', utc(2002, 4), utc(2002, 4));
  const [w] = await q<{ id: string }>(sql`
    insert into workflows (id, project_id, name, trigger_type, trigger_event) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'wf', 'EVENT', 'signup') returning id`);
  const [s] = await q<{ id: string }>(sql`
    insert into workflow_steps (id, workflow_id, project_id, type, name, config) values (mailroom_uuid_v7(now()), ${w.id}::uuid, ${p.id}::uuid, 'DELAY', 'd', '{}'::jsonb) returning id`);
  const [x] = await q<{ id: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, entry_key, lease_token, lease_until)
    values (${idAt(utc(2002, 4, 9))}, ${p.id}::uuid, ${w.id}::uuid, ${contactId}::uuid, 'RUNNING', 'k', '00000000-0000-4000-8000-000000000001', now() + interval '1 minute')
    returning id`);
  const execution = { id: x.id, projectId: p.id, version: 0 } as ExecutionRow;
  const step = { id: s.id, type: 'DELAY' } as WorkflowStepRow;
  const first = await beginStepRun(ctx.api.database.db, execution, step);
  expect(first.id).toBe(stepRunId(x.id, 0));
  expect(await partOf('workflow_step_runs', first.id)).toBe('workflow_step_runs_p200204');
  // The retried begin (a job run again) finds the same run.
  expect(await beginStepRun(ctx.api.database.db, execution, step)).toEqual(first);
  // A move that begins the next run derives its id in SQL: the same id TypeScript derives, in the same month.
  const moved = await moveExecution(
    ctx.api.database.db,
    { id: x.id, version: 0 },
    '00000000-0000-4000-8000-000000000001',
    { status: 'RUNNING' },
    { beginRun: { stepId: s.id, stepType: 'DELAY' } },
  );
  expect(moved.run?.id).toBe(stepRunId(x.id, 1));
  expect(await beginStepRun(ctx.api.database.db, { ...execution, version: 1 }, step)).toMatchObject({
    id: stepRunId(x.id, 1),
    version: 1,
    startedAt: moved.run?.startedAt,
  });
  expect(await partOf('workflow_step_runs', stepRunId(x.id, 1))).toBe('workflow_step_runs_p200204');
  expect(
    await q(sql`select version from workflow_step_runs where execution_id = ${x.id}::uuid order by version`),
  ).toEqual([{ version: 0 }, { version: 1 }]);
});

test('the move is a named statement: on a generic plan it ends the run named by id, then the open run, and begins each next run', async () => {
  const p = await createTestProject(ctx.api.database);
  const contactId = await contactOf(p.id);
  const [w] = await q<{ id: string }>(sql`
    insert into workflows (id, project_id, name, trigger_type, trigger_event) values (mailroom_uuid_v7(now()), ${p.id}::uuid, 'wf', 'EVENT', 'signup') returning id`);
  const [s] = await q<{ id: string }>(sql`
    insert into workflow_steps (id, workflow_id, project_id, type, name, config) values (mailroom_uuid_v7(now()), ${w.id}::uuid, ${p.id}::uuid, 'DELAY', 'd', '{}'::jsonb) returning id`);
  const token = '00000000-0000-4000-8000-000000000002';
  const [x] = await q<{ id: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, entry_key, lease_token, lease_until)
    values (mailroom_uuid_v7(now()), ${p.id}::uuid, ${w.id}::uuid, ${contactId}::uuid, 'RUNNING', 'k', ${token}::uuid, now() + interval '1 minute')
    returning id`);
  const step = { id: s.id, type: 'DELAY' } as WorkflowStepRow;
  await ctx.api.database.db.transaction(async (tx) => {
    // One connection, held past the switch to a generic plan, and made to take it: parameters no longer fold into
    // the plan, so partitions are pruned when the statement starts.
    await tx.execute(sql`set local plan_cache_mode = force_generic_plan`);
    let run = await beginStepRun(tx, { id: x.id, projectId: p.id, version: 0 } as ExecutionRow, step);
    for (let version = 0; version < 8; version++) {
      const moved = await moveExecution(
        tx,
        { id: x.id, version },
        token,
        { status: 'RUNNING' },
        {
          endRun: { target: { id: run.id }, status: 'COMPLETED', branch: 'next' },
          beginRun: { stepId: s.id, stepType: 'DELAY' },
        },
      );
      expect(moved.execution?.version).toBe(version + 1);
      expect(moved.run?.id).toBe(stepRunId(x.id, version + 1));
      run = moved.run!;
    }
    const ended = await moveExecution(
      tx,
      { id: x.id, version: 8 },
      token,
      { status: 'CANCELLED', error: 'test' },
      { endRun: { target: 'open', status: 'CANCELLED', error: 'test' } },
    );
    expect(ended.execution).toMatchObject({ status: 'CANCELLED', version: 9 });
    // A stale version moves nothing and ends nothing.
    expect(
      (
        await moveExecution(
          tx,
          { id: x.id, version: 3 },
          token,
          { status: 'RUNNING' },
          { endRun: { target: 'open', status: 'FAILED' } },
        )
      ).execution,
    ).toBeUndefined();
  });
  const runs = await q<{ version: number; status: string }>(
    sql`select version, status from workflow_step_runs where execution_id = ${x.id}::uuid order by version`,
  );
  expect(runs).toEqual([
    ...Array.from({ length: 8 }, (_, v) => ({ version: v, status: 'COMPLETED' })),
    { version: 8, status: 'CANCELLED' },
  ]);
});

test('a lone claim and finish are named statements: on a generic plan they claim, refuse a second claim, and finish only with the token', async () => {
  const p = await createTestProject(ctx.api.database);
  const rows = Array.from({ length: 3 }, () => ({
    id: newId(),
    projectId: p.id,
    source: 'transactional' as const,
    toEmail: recipient('gp'),
    fromEmail: `a@${p.domain}`,
    subject: 's',
    body: 'b',
    bodyFormat: 'html' as const,
  }));
  await ctx.api.database.db.transaction((tx) => insertQueuedEmails(tx, rows));
  await ctx.api.database.db.transaction(async (tx) => {
    // Made to take the generic plan at once: the updated partition is then pruned by a parameter, not at planning.
    await tx.execute(sql`set local plan_cache_mode = force_generic_plan`);
    for (const row of rows) {
      const token = newId();
      const claimed = await claimEmail(tx, row.id, token, 30_000);
      expect(claimed).toMatchObject({ ok: true, email: { id: row.id, previousStatus: 'queued' } });
      expect((await claimEmail(tx, row.id, newId(), 30_000)).ok).toBe(false);
      expect(
        (await finishEmail(tx, row.id, newId(), { status: 'sent', messageId: `wrong-${row.id}`, renderedSubject: 's' }))
          .finished,
      ).toBe(false);
      expect(
        (await finishEmail(tx, row.id, token, { status: 'sent', messageId: `m-${row.id}`, renderedSubject: 's' }))
          .finished,
      ).toBe(true);
    }
  });
  const after = await q<{ id: string; status: string; message_id: string }>(
    sql`select id, status, message_id from emails where project_id = ${p.id}::uuid order by id`,
  );
  expect(after).toEqual(
    rows.map((r) => ({ id: r.id, status: 'sent', message_id: `m-${r.id}` })).sort((a, b) => a.id.localeCompare(b.id)),
  );
});
