/**
 * Data retention: the per-project settings (`/admin/projects/{id}/retention`, 422 naming the field), the
 * worker's `retention` pass (rows aged by back-dating `created_at`/`finished_at`; bounded batches that leave the
 * rest for the next pass; derived counts right afterwards; content expiry visible at `GET /emails/{id}`), and the
 * erasure of a contact by `DELETE /contacts/{id}` (no row anywhere still names the address or the contact id, and SES
 * feedback arriving after it for the contact's earlier emails does not bring the address back).
 *
 * Runs on a database of its own: a pass works every project of its database.
 */
import request from 'supertest';
import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { loadConfig } from '@mailroom/config/config';
import { createLogger } from '@mailroom/platform/logger';
import { retentionBatch, RETENTION_KINDS } from '@mailroom/retention/queries/retention';
import { ERASED_ADDRESS } from '@mailroom/contacts/queries/erase';
import { runRetentionPass } from '@mailroom/retention/retention';
import { RETENTION_DEFAULTS } from '@mailroom/retention/retention-settings';
import { retentionTask } from '../../apps/worker/src/processors/retention';
import { runCli } from '../../apps/api/src/cli';
import {
  ADMIN_TOKEN,
  client,
  createTestProject,
  recipient,
  testEnv,
  type TestProject,
  useIsolatedApi,
} from '../support/harness';
import { sesEvent, startSnsHarness, type SnsHarness } from '../support/sns';

let sns: SnsHarness;
const snsEnv: Record<string, string> = {};
// The API must know the SNS harness's topic and certificate host before it starts (late SES feedback in the erasure test).
beforeAll(async () => {
  sns = await startSnsHarness();
  Object.assign(snsEnv, { SNS_TOPIC_ARNS: sns.topicArn, SNS_CERT_HOSTS: `sns.*.amazonaws.com,${sns.certHost}` });
});
afterAll(() => sns?.close());
const ctx = useIsolatedApi(snsEnv);

const admin = {
  get: (path: string) => request(ctx.api.app).get(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`),
  put: (path: string, body: object) =>
    request(ctx.api.app).put(path).set('Authorization', `Bearer ${ADMIN_TOKEN}`).send(body),
};
const deps = () => ({
  config: ctx.api.config,
  database: ctx.api.database,
  logger: createLogger(ctx.api.config, 'test'),
});
const q = async <T extends Record<string, unknown>>(query: ReturnType<typeof sql>) =>
  (await ctx.api.database.db.execute<T>(query)).rows;
const ago = (days: number) => sql`now() - make_interval(days => ${days}::int)`;

async function contact(p: TestProject, email = recipient('ret')): Promise<{ id: string; email: string }> {
  const res = await client(ctx.api.app, p).post('/contacts', { email, data: { firstName: 'Ada' } });
  expect(res.status).toBe(201);
  return { id: res.body.data.id as string, email };
}

async function events(projectId: string, contactId: string, name: string, n: number, daysAgo: number): Promise<void> {
  await ctx.api.database.db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    select gen_random_uuid(), ${projectId}::uuid, ${contactId}::uuid, ${name}, '{}'::jsonb, ${ago(daysAgo)} from generate_series(1, ${n}::int)`);
}

/** A transactional email row of `status`, created `daysAgo` days ago, with content and a timeline entry. */
async function email(
  p: TestProject,
  c: { id: string; email: string },
  status: string,
  daysAgo: number,
  campaignId: string | null = null,
): Promise<string> {
  const [row] = await q<{ id: string }>(sql`
    insert into emails (id, project_id, contact_id, campaign_id, source, to_email, to_name, from_email, subject, body, body_format,
      variables, headers, status, rendered_subject, sent_at, created_at)
    values (gen_random_uuid(), ${p.id}::uuid, ${c.id}::uuid, ${campaignId}::uuid, ${campaignId ? 'campaign' : 'transactional'}, ${c.email}, 'Ada Lovelace',
      ${`a@${p.domain}`}, ${campaignId ? null : 'Hi {{firstName}}'}, ${campaignId ? null : '<p>Hi Ada</p>'}, ${campaignId ? null : 'html'},
      ${JSON.stringify({ firstName: 'Ada', email: c.email })}::jsonb, '{"X-Ref":"r1"}'::jsonb, ${status}, 'Hi Ada',
      ${ago(daysAgo)}, ${ago(daysAgo)})
    returning id`);
  await ctx.api.database.db.execute(sql`
    insert into email_events (id, email_id, project_id, type, data, created_at)
    values (gen_random_uuid(), ${row.id}::uuid, ${p.id}::uuid, 'bounced', ${JSON.stringify({ bouncedRecipients: [c.email] })}::jsonb, ${ago(daysAgo)})`);
  return row.id;
}

async function endpoint(projectId: string): Promise<string> {
  const [row] = await q<{ id: string }>(sql`
    insert into webhook_endpoints (id, project_id, url, event_types, secret)
    values (gen_random_uuid(), ${projectId}::uuid, 'https://hooks.example.com/x', '{*}', 'whsec_dGVzdA==') returning id`);
  return row.id;
}

async function delivery(
  projectId: string,
  endpointId: string,
  status: string,
  daysAgo: number,
  data: Record<string, unknown> = {},
): Promise<string> {
  const [row] = await q<{ id: string }>(sql`
    insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status, attempts, created_at)
    values (gen_random_uuid(), ${projectId}::uuid, ${endpointId}::uuid, 'contact.updated',
      ${JSON.stringify({ type: 'contact.updated', timestamp: new Date().toISOString(), data })}::jsonb, ${status}, 1, ${ago(daysAgo)})
    returning id`);
  await ctx.api.database.db.execute(sql`
    insert into webhook_attempts (id, delivery_id, project_id, attempt, status_code, duration_ms, created_at)
    values (gen_random_uuid(), ${row.id}::uuid, ${projectId}::uuid, 1, 500, 12, ${ago(daysAgo)})`);
  return row.id;
}

async function execution(
  projectId: string,
  contactId: string,
  status: string,
  finishedDaysAgo: number | null,
): Promise<string> {
  const [w] = await q<{ id: string }>(sql`
    insert into workflows (id, project_id, name, trigger_type, trigger_event) values (gen_random_uuid(), ${projectId}::uuid, 'wf', 'EVENT', 'signup') returning id`);
  const [x] = await q<{ id: string }>(sql`
    insert into workflow_executions (id, project_id, workflow_id, contact_id, status, entry_key, finished_at, created_at)
    values (gen_random_uuid(), ${projectId}::uuid, ${w.id}::uuid, ${contactId}::uuid, ${status}, gen_random_uuid()::text,
      ${finishedDaysAgo === null ? null : ago(finishedDaysAgo)}, ${ago(finishedDaysAgo ?? 0)})
    returning id`);
  await ctx.api.database.db.execute(sql`
    insert into workflow_step_runs (id, execution_id, project_id, step_type, version, status, output)
    values (gen_random_uuid(), ${x.id}::uuid, ${projectId}::uuid, 'DELAY', 1, 'COMPLETED', '{}'::jsonb)`);
  return x.id;
}

const count = async (table: string, where: ReturnType<typeof sql>) =>
  Number((await q<{ n: string }>(sql`select count(*)::text as n from ${sql.identifier(table)} where ${where}`))[0].n);
const eventCount = async (projectId: string, name: string) =>
  Number(
    (
      await q<{ count: string }>(
        sql`select count::text from event_names_now where project_id = ${projectId}::uuid and name = ${name}`,
      )
    )[0]?.count ?? 0,
  );

describe('settings', () => {
  test('GET shows the defaults; PUT sets, null clears, a field left out keeps its value', async () => {
    const p = await createTestProject(ctx.api.database);
    const path = `/admin/projects/${p.id}/retention`;
    const none = {
      emailContentDays: null,
      emailDays: null,
      eventDays: null,
      webhookDays: null,
      workflowExecutionDays: null,
      inboundDays: null,
    };
    expect((await admin.get(path)).body.data).toEqual({
      projectId: p.id,
      overrides: none,
      effective: RETENTION_DEFAULTS,
      defaults: RETENTION_DEFAULTS,
    });
    expect(RETENTION_DEFAULTS).toEqual({
      emailContentDays: 30,
      emailDays: 365,
      eventDays: 365,
      webhookDays: 30,
      workflowExecutionDays: 90,
      inboundDays: 30,
    });
    const set = await admin.put(path, { eventDays: 10, emailContentDays: 7 });
    expect(set.status).toBe(200);
    expect(set.body.data.effective).toEqual({ ...RETENTION_DEFAULTS, eventDays: 10, emailContentDays: 7 });
    const partial = await admin.put(path, { eventDays: null, webhookDays: 14 });
    expect(partial.body.data.overrides).toEqual({ ...none, emailContentDays: 7, webhookDays: 14 });
    await admin.put(path, { emailContentDays: null, webhookDays: null });
    expect(
      (await q<{ retention: unknown }>(sql`select retention from projects where id = ${p.id}::uuid`))[0].retention,
    ).toBeNull();
  });

  test('invalid values are 422 naming the field; nothing changes; admin token required; unknown project 404', async () => {
    const p = await createTestProject(ctx.api.database);
    const path = `/admin/projects/${p.id}/retention`;
    for (const [body, field] of [
      [{ eventDays: 0 }, 'eventDays'],
      [{ emailDays: 2.5 }, 'emailDays'],
      [{ webhookDays: '30' }, 'webhookDays'],
      [{ emailContentDays: 40_000 }, 'emailContentDays'],
      [{ workflowExecutionDays: -1 }, 'workflowExecutionDays'],
      [{ contentDays: 3 }, 'contentDays'],
    ] as const) {
      const res = await admin.put(path, body);
      expect({ body, status: res.status }).toEqual({ body, status: 422 });
      expect(res.body.error.errors.map((e: { field: string }) => e.field)).toContain(field);
    }
    expect((await admin.get(path)).body.data.effective).toEqual(RETENTION_DEFAULTS);
    expect((await request(ctx.api.app).get(path)).status).toBe(401);
    expect((await admin.get('/admin/projects/00000000-0000-7000-8000-000000000000/retention')).status).toBe(404);
  });

  test('CLI: project retention shows, sets and clears; a bad value names the setting', async () => {
    const p = await createTestProject(ctx.api.database);
    const env = testEnv({ DATABASE_URL: ctx.api.config.databaseUrl });
    const cli = (...args: string[]) =>
      runCli(['project', 'retention', '--project', p.id, ...args], env) as Promise<{
        effective: object;
        overrides: object;
      }>;
    expect((await cli()).effective).toEqual(RETENTION_DEFAULTS);
    expect((await cli('--email-days', '400', '--webhook-days', '7')).effective).toEqual({
      ...RETENTION_DEFAULTS,
      emailDays: 400,
      webhookDays: 7,
    });
    expect((await cli('--email-days', 'default')).overrides).toMatchObject({ emailDays: null, webhookDays: 7 });
    const err = await cli('--event-days', 'forever').catch((e: unknown) => e);
    expect(err).toMatchObject({ statusCode: 422, message: expect.stringMatching(/^eventDays: /) });
    await expect(runCli(['project', 'retention'], env)).rejects.toThrow('--project ID is required');
  });

  test('RETENTION_* variables set the defaults; out-of-range values fail naming the variable', () => {
    expect(loadConfig(testEnv({ RETENTION_EVENT_DAYS: '90' })).retention.eventDays).toBe(90);
    expect(() => loadConfig(testEnv({ RETENTION_EMAIL_CONTENT_DAYS: '0' }))).toThrow(/RETENTION_EMAIL_CONTENT_DAYS/);
  });
});

describe('the retention pass', () => {
  test('applies each setting with the project override; derived counts and campaign stats stay right; content expiry shows at GET /emails/{id}', async () => {
    const a = await createTestProject(ctx.api.database);
    const b = await createTestProject(ctx.api.database);
    await admin.put(`/admin/projects/${a.id}/retention`, { eventDays: 10 }).expect(200);
    const ca = await contact(a);
    const cb = await contact(b);
    await events(a.id, ca.id, 'seen', 3, 20);
    await events(a.id, ca.id, 'seen', 2, 1);
    await events(b.id, cb.id, 'seen', 3, 20);
    await events(b.id, cb.id, 'seen', 2, 400);
    const contentOld = await email(a, ca, 'delivered', 40);
    const queuedOld = await email(a, ca, 'queued', 40);
    const recent = await email(a, ca, 'sent', 2);
    const ancient = await email(a, ca, 'sent', 400);
    const created = await client(ctx.api.app, a).post('/campaigns', {
      name: 'C',
      subject: 'News',
      body: '<p>News</p>',
      from: `news@${a.domain}`,
      audienceType: 'ALL',
    });
    const campaignId = created.body.data.id as string;
    await email(a, ca, 'delivered', 400, campaignId);
    const statsBefore = (await client(ctx.api.app, a).get(`/campaigns/${campaignId}/stats`)).body.data;
    expect(statsBefore.delivered).toBe(1);
    const ep = await endpoint(a.id);
    const oldDone = await delivery(a.id, ep, 'succeeded', 40);
    const oldPending = await delivery(a.id, ep, 'pending', 40);
    const newDone = await delivery(a.id, ep, 'failed', 2);
    const oldRun = await execution(a.id, ca.id, 'COMPLETED', 100);
    const newRun = await execution(a.id, ca.id, 'COMPLETED', 10);
    const running = await execution(a.id, ca.id, 'WAITING', null);
    const contactsBefore = (await client(ctx.api.app, a).get('/contacts')).body.data.total;

    const r = await retentionTask(deps()).run();
    expect(r).toMatchObject({ more: false });

    expect(await count('events', sql`project_id = ${a.id}::uuid and name = 'seen'`)).toBe(2);
    expect(await eventCount(a.id, 'seen')).toBe(2);
    expect(await count('events', sql`project_id = ${b.id}::uuid and name = 'seen'`)).toBe(3);
    expect(await eventCount(b.id, 'seen')).toBe(3);
    expect((await client(ctx.api.app, a).get('/contacts')).body.data.total).toBe(contactsBefore);

    const got = await client(ctx.api.app, a).get(`/emails/${contentOld}`);
    expect(got.status).toBe(200);
    expect(got.body.data).toMatchObject({
      status: 'delivered',
      contentExpired: true,
      contentExpiredAt: expect.any(String),
      erased: false,
      to: { email: ca.email },
    });
    expect(got.body.data.timeline.map((t: { type: string }) => t.type)).toEqual(['bounced']);
    const [expired] = await q<{ body: string | null; variables: unknown; headers: unknown }>(
      sql`select body, variables, headers from emails where id = ${contentOld}::uuid`,
    );
    expect(expired).toEqual({ body: null, variables: {}, headers: {} });
    for (const id of [queuedOld, recent]) {
      const kept = await client(ctx.api.app, a).get(`/emails/${id}`);
      expect(kept.body.data).toMatchObject({ contentExpired: false, contentExpiredAt: null });
    }
    expect((await q<{ body: string }>(sql`select body from emails where id = ${queuedOld}::uuid`))[0].body).toBe(
      '<p>Hi Ada</p>',
    );
    expect((await client(ctx.api.app, a).get(`/emails/${ancient}`)).status).toBe(404);
    expect(await count('email_events', sql`email_id = ${ancient}::uuid`)).toBe(0);
    expect((await client(ctx.api.app, a).get(`/campaigns/${campaignId}/stats`)).body.data).toEqual(statsBefore);

    expect(await count('webhook_deliveries', sql`id = any(${sql.param([oldDone, oldPending, newDone])}::uuid[])`)).toBe(
      2,
    );
    expect(await count('webhook_deliveries', sql`id = ${oldDone}::uuid`)).toBe(0);
    expect(await count('webhook_attempts', sql`delivery_id = ${oldDone}::uuid`)).toBe(0);
    expect(await count('workflow_executions', sql`id = any(${sql.param([oldRun, newRun, running])}::uuid[])`)).toBe(2);
    expect(await count('workflow_step_runs', sql`execution_id = ${oldRun}::uuid`)).toBe(0);
  });

  test('bounded batches: a statement changes at most its batch; a pass out of budget leaves the rest for the next', async () => {
    const p = await createTestProject(ctx.api.database);
    const c = await contact(p);
    await events(p.id, c.id, 'bulk', 25, 500);
    expect(await retentionBatch(ctx.api.database.db, 'events', p.id, 365, 10)).toBe(10);
    expect(await eventCount(p.id, 'bulk')).toBe(15);
    const starved = await runRetentionPass(deps(), { batchSize: 10, budgetMs: 0 });
    expect(starved).toMatchObject({ batches: 0, more: true });
    expect(await eventCount(p.id, 'bulk')).toBe(15);
    const stopped = await runRetentionPass(deps(), { batchSize: 10, maxBatches: 3 });
    expect(stopped).toMatchObject({ batches: 3, more: true });
    const done = await runRetentionPass(deps(), { batchSize: 10 });
    expect(done.more).toBe(false);
    expect(await count('events', sql`project_id = ${p.id}::uuid and name = 'bulk'`)).toBe(0);
    expect(await eventCount(p.id, 'bulk')).toBe(0);
  });

  test('a pass begins where it is told (by default a random project), so a short budget does not starve the last projects', async () => {
    const [a, b] = [await createTestProject(ctx.api.database), await createTestProject(ctx.api.database)];
    for (const p of [a, b]) await events(p.id, (await contact(p)).id, 'rotated', 5, 500);
    const ids = (await q<{ id: string }>(sql`select id from projects order by id`)).map((r) => r.id);
    const later = ids.indexOf(a.id) > ids.indexOf(b.id) ? a : b;
    const earlier = later === a ? b : a;
    // One batch per kind of the first project: with the later project first, only its events go.
    await runRetentionPass(deps(), {
      batchSize: 100,
      maxBatches: RETENTION_KINDS.length,
      startAt: ids.indexOf(later.id),
    });
    expect(await eventCount(later.id, 'rotated')).toBe(0);
    expect(await eventCount(earlier.id, 'rotated')).toBe(5);
    await runRetentionPass(deps(), { batchSize: 100 });
    expect(await eventCount(earlier.id, 'rotated')).toBe(0);
  });

  test('every batch reads through an index (no sequential scan of the table)', async () => {
    const p = await createTestProject(ctx.api.database);
    await ctx.api.database.db.execute(sql`set enable_seqscan = off`);
    try {
      const plan = await q<{ 'QUERY PLAN': string }>(
        sql`explain select id from events where project_id = ${p.id}::uuid and created_at < now() order by created_at limit 1000`,
      );
      expect(plan.map((r) => r['QUERY PLAN']).join('\n')).toMatch(/events_retention_idx/);
    } finally {
      await ctx.api.database.db.execute(sql`set enable_seqscan = on`);
    }
  });
});

describe('erasure (DELETE /contacts/{id})', () => {
  test('no row anywhere still names the address or the contact id; counts and campaign stats stay right', async () => {
    const p = await createTestProject(ctx.api.database);
    const as = client(ctx.api.app, p);
    const address = recipient('Erase.Me');
    // The client's own key names nothing personal (a key that quoted the address would stay: it is the client's).
    const idempotencyKey = `k-${Date.now()}-${Math.random()}`;
    const created = await request(ctx.api.app)
      .post('/contacts')
      .set('Authorization', p.auth)
      .set('Idempotency-Key', idempotencyKey)
      .send({ email: address, data: { firstName: 'Ada' } });
    expect(created.status).toBe(201);
    const c = { id: created.body.data.id as string, email: address };
    const other = await contact(p);
    await as.post('/v1/track', { email: address, event: 'signed-up' });
    await as.post('/v1/track', { email: other.email, event: 'signed-up' });
    const sent = await email(p, c, 'delivered', 1);
    const queued = (await as.post('/v1/send', { to: address, from: `a@${p.domain}`, subject: 'Hi', body: 'b' })).body
      .data.emails[0].email as string;
    const campaign = await as.post('/campaigns', {
      name: 'C',
      subject: 'News',
      body: '<p>News</p>',
      from: `news@${p.domain}`,
      audienceType: 'ALL',
    });
    const campaignId = campaign.body.data.id as string;
    await email(p, c, 'opened', 1, campaignId);
    await email(p, other, 'delivered', 1, campaignId);
    const statsBefore = (await as.get(`/campaigns/${campaignId}/stats`)).body.data;
    const ep = await endpoint(p.id);
    await delivery(p.id, ep, 'succeeded', 1, { contactId: c.id, email: address.toUpperCase() });
    await delivery(p.id, ep, 'pending', 0, { contactId: c.id });
    const kept = await delivery(p.id, ep, 'succeeded', 1, { contactId: other.id, email: other.email });
    // Addresses that contain this one are other people's: their rows stay.
    const longer = await delivery(p.id, ep, 'succeeded', 1, { email: `jo${address}` });
    const longerDomain = await delivery(p.id, ep, 'pending', 0, {
      email: `${address}.au`,
      note: `bounce for ${address}x`,
    });
    const keepIds = [longer, longerDomain];
    const [imp] = await q<{ id: string }>(sql`
      insert into contact_imports (id, project_id, status, format, default_subscribed) values (gen_random_uuid(), ${p.id}::uuid, 'completed', 'csv', true) returning id`);
    await ctx.api.database.db.execute(sql`
      insert into contact_import_errors (import_id, row, email, errors) values
        (${imp.id}::uuid, 1, ${address}, '[{"field":"data","message":"bad","code":"custom"}]'::jsonb),
        (${imp.id}::uuid, 2, null, ${JSON.stringify([{ field: 'email', message: `duplicate of ${address}`, code: 'custom' }])}::jsonb),
        (${imp.id}::uuid, 3, ${other.email}, '[]'::jsonb)`);
    await execution(p.id, c.id, 'WAITING', null);
    const totalBefore = (await as.get('/contacts')).body.data.total;

    // Every text, json, jsonb, uuid and array column of every table, searched for the address (any case) and the id.
    const columns = await q<{ table_name: string; column_name: string }>(sql`
      select table_name, column_name from information_schema.columns c
      where table_schema = 'public' and data_type in ('text', 'json', 'jsonb', 'uuid', 'character varying', 'ARRAY')
        and exists (select 1 from information_schema.tables t
          where t.table_schema = 'public' and t.table_name = c.table_name and t.table_type = 'BASE TABLE')
        -- A partition's rows are its parent's (searched there).
        and not exists (select 1 from pg_class k where k.relname = c.table_name and k.relispartition)`);
    const mentions = async (): Promise<string[]> => {
      const found: string[] = [];
      for (const col of columns) {
        const value = sql`${sql.identifier(col.table_name)}.${sql.identifier(col.column_name)}::text`;
        // The two deliveries naming longer addresses (jo…, ….au) are someone else's and stay.
        const others =
          col.table_name === 'webhook_deliveries' ? sql` and id <> all(${sql.param(keepIds)}::uuid[])` : sql``;
        const n = await count(
          col.table_name,
          sql`(strpos(lower(${value}), ${address.toLowerCase()}) > 0 or strpos(${value}, ${c.id}) > 0)${others}`,
        );
        if (n > 0) found.push(col.table_name);
      }
      return [...new Set(found)].sort();
    };
    expect(await mentions()).toEqual(
      expect.arrayContaining([
        'contact_import_errors',
        'contacts',
        'email_events',
        'emails',
        'events',
        'idempotency_keys',
        'webhook_deliveries',
        'workflow_executions',
      ]),
    );

    // The delivered email went through SES: feedback about it can still arrive after the erasure.
    const messageId = `0100018f${randomUUID().replace(/-/g, '')}-000000`;
    await ctx.api.database.db.execute(sql`update emails set message_id = ${messageId} where id = ${sent}::uuid`);

    const d = await as.del(`/contacts/${c.id}`);
    expect(d.status).toBe(200);
    expect(await mentions()).toEqual([]);

    // Late SES feedback: a Transient bounce whose diagnostic quotes the address (another case, and its local part
    // in quotes), a Click whose URL carries it percent-encoded (once and twice), and a Permanent bounce.
    const local = address.slice(0, address.lastIndexOf('@'));
    const bounce = sesEvent('Bounce', { messageId, to: address }, { bounceType: 'Transient' }) as {
      bounce: { bouncedRecipients: { diagnosticCode: string }[] };
    };
    bounce.bounce.bouncedRecipients[0].diagnosticCode = `smtp; 452 4.2.2 <${address.toUpperCase()}>: mailbox "${local.toLowerCase()}" is over quota (${address})`;
    const link = `https://shop.example/welcome?email=${encodeURIComponent(address)}&next=${encodeURIComponent(`https://x.example/?u=${encodeURIComponent(address.toLowerCase())}`)}`;
    const click = sesEvent('Click', { messageId, to: address }, { link });
    const hard = sesEvent('Bounce', { messageId, to: address }, { bounceType: 'Permanent' });
    for (const record of [bounce, click, hard]) {
      const res = await request(ctx.api.app)
        .post('/webhooks/ses')
        .set('Content-Type', 'text/plain; charset=UTF-8')
        .set('x-amz-sns-message-type', 'Notification')
        .send(JSON.stringify(sns.notification(record)));
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ emailId: sent, suppressed: [] });
    }
    // Nothing names the address again: not the timeline, not the new webhook payloads, not a new suppression.
    expect(await mentions()).toEqual([]);
    const forms = [
      address,
      encodeURIComponent(address),
      encodeURIComponent(encodeURIComponent(address)),
      `"${local}"`,
    ].map((f) => f.toLowerCase());
    const stored = [
      ...(await q<{ t: string }>(
        sql`select coalesce(data::text, '') as t from email_events where email_id = ${sent}::uuid`,
      )),
      ...(await q<{ t: string }>(
        sql`select payload::text as t from webhook_deliveries where project_id = ${p.id}::uuid and event_type like 'email.%'`,
      )),
      ...(await q<{ t: string }>(sql`select email as t from suppressions where project_id = ${p.id}::uuid`)),
    ].map((r) => r.t.toLowerCase());
    expect(stored.filter((t) => forms.some((f) => t.includes(f)))).toEqual([]);
    // The feedback itself is kept, scrubbed: its timeline entries and webhooks are there, with the rest of their details.
    const timeline = (await as.get(`/emails/${sent}`)).body.data.timeline as {
      type: string;
      data: Record<string, unknown> | null;
    }[];
    const clicked = timeline.find((t) => t.type === 'clicked')!;
    expect(clicked.data?.link).toBe(
      'https://shop.example/welcome?email=[erased]&next=https%3A%2F%2Fx.example%2F%3Fu%3D[erased]',
    );
    const bounced = timeline.filter((t) => t.type === 'bounced').map((t) => t.data?.diagnosticCode);
    expect(bounced).toContain('smtp; 452 4.2.2 <[erased]>: mailbox "[erased]" is over quota ([erased])');
    const hooks = await q<{ event_type: string; payload: { data: Record<string, unknown> } }>(
      sql`select event_type, payload from webhook_deliveries where project_id = ${p.id}::uuid and event_type in ('email.bounced', 'email.clicked')`,
    );
    expect(hooks.map((h) => h.event_type).sort()).toEqual(['email.bounced', 'email.bounced', 'email.clicked']);
    expect(hooks.every((h) => h.payload.data.to === ERASED_ADDRESS && h.payload.data.contactId === null)).toBe(true);

    expect(await eventCount(p.id, 'signed-up')).toBe(1);
    expect((await as.get('/contacts')).body.data.total).toBe(totalBefore - 1);
    expect((await as.get(`/campaigns/${campaignId}/stats`)).body.data).toEqual(statsBefore);
    const log = await as.get(`/emails/${sent}`);
    // The late bounce still moved the status (forward only): the outcome is kept, the address is not.
    expect(log.body.data).toMatchObject({
      status: 'bounced',
      erased: true,
      contentExpired: true,
      contactId: null,
      to: { email: ERASED_ADDRESS, name: null },
    });
    expect((await as.get(`/emails/${queued}`)).body.data).toMatchObject({
      status: 'cancelled',
      error: 'contact deleted',
      erased: true,
    });
    expect(await count('webhook_deliveries', sql`id = ${kept}::uuid`)).toBe(1);
    expect(await count('webhook_deliveries', sql`id = any(${sql.param([longer, longerDomain])}::uuid[])`)).toBe(2);
    // The stored idempotent response is scrubbed, not deleted: a retry with its key replays it, creating nothing.
    const replay = await request(ctx.api.app)
      .post('/contacts')
      .set('Authorization', p.auth)
      .set('Idempotency-Key', idempotencyKey)
      .send({ email: address, data: { firstName: 'Ada' } });
    expect(replay.status).toBe(201);
    expect(replay.body.data).toMatchObject({ email: ERASED_ADDRESS, id: '00000000-0000-0000-0000-000000000000' });
    expect(await count('contacts', sql`project_id = ${p.id}::uuid and email_key = ${address.toLowerCase()}`)).toBe(0);
    expect(await count('contact_import_errors', sql`import_id = ${imp.id}::uuid`)).toBe(1);
    expect((await as.get(`/contacts/${other.id}`)).status).toBe(200);
  });
});
