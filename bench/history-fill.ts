/**
 * History for `npm run bench -- history`, written with set-based SQL (`INSERT … SELECT` over `generate_series`),
 * never through the API: one project with a fixed set of contacts, a SENT campaign to all of them, a webhook
 * endpoint, and history spread over 12 months of 30 days before the run's anchor time `t0` (ms):
 *
 * - transactional emails, each with three timeline rows (`queued`, `sent` with the SES message id, `delivered`
 *   with the SMTP answer), one status of `delivered` / `opened` / `clicked` / `bounced`; emails younger than 29 days
 *   keep their content (a ~1.4 KB HTML body and variables), older ones are content-expired as the retention pass
 *   leaves them (`RETENTION_EMAIL_CONTENT_DAYS` = 30);
 * - contact events (`email.delivered` 40%, `page_view` 30%, `login` 15%, `email.opened` 10%, `purchase` 5%) with a
 *   small `data` object;
 * - finished webhook deliveries (one attempt each) over the last 29 days only (`RETENTION_WEBHOOK_DAYS` = 30);
 * - and, in the fixture only, one `plan_upgraded` event for every tenth contact (44 days before `t0`): a preview of it
 *   has the same answer at every size.
 *
 * Every id is a UUIDv7 of its row's `created_at` (`mailroom_uuid_v7`, the layout of `@mailroom/platform/ids`), and
 * each month's rows are inserted in time order, so ids are time-ordered like real ones. {@link fillTo} brings each
 * month up to its share of a total, so growing from 1M to 10M adds rows in every month (ids interleave with the
 * older ones, as ten times the traffic over the same year would) and refills a month the retention pass emptied.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { Database } from '@mailroom/db/client';

/** One month of the bench's history: `[from, to)` in ms; month 0 is the newest, month 11 the oldest. */
export interface Month {
  index: number;
  from: number;
  to: number;
}

const DAY = 86_400_000;
const HOUR = 3_600_000;

/** The bench's fixed things: project, contacts, campaign, webhook endpoint. */
export interface HistoryFixture {
  projectId: string;
  domain: string;
  contacts: number;
  campaignId: string;
  endpointId: string;
  t0: number;
}

/**
 * The 12 months of 30 days before `t0`, each shrunk by an hour at both ends, so a retention cutoff of
 * `30 × (m + 1)` days taken minutes later still falls between two months.
 */
export function months(t0: number): Month[] {
  return Array.from({ length: 12 }, (_, m) => ({
    index: m,
    from: t0 - (m + 1) * 30 * DAY + HOUR,
    to: t0 - m * 30 * DAY - HOUR,
  }));
}

const ts = (ms: number) => sql`${new Date(ms).toISOString()}::timestamptz`;

/**
 * Creates the fixed part: `contacts` contacts (`h<n>@bench.test`, numbered in the unlogged helper table
 * `bench_history_contacts` that the fills join on), a SENT campaign 45 days old with one email (and its timeline)
 * per contact, and a webhook endpoint.
 */
export async function createFixture(
  database: Database,
  project: { id: string; domain: string },
  contacts: number,
  t0: number,
): Promise<HistoryFixture> {
  const { db } = database;
  const p = sql`${project.id}::uuid`;
  await db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data, created_at, updated_at)
    select mailroom_uuid_v7(${ts(t0 - 400 * DAY)} + make_interval(secs => i)), ${p}, 'h' || i || '@bench.test', 'h' || i || '@bench.test', i % 20 <> 0,
      jsonb_build_object('plan', case when i % 7 = 0 then 'pro' else 'free' end, 'first_name', 'Name' || i), ${ts(t0 - 400 * DAY)}, ${ts(t0 - 400 * DAY)}
    from generate_series(0, ${contacts - 1}) as i`);
  await db.execute(sql`drop table if exists bench_history_contacts`);
  await db.execute(sql`
    create unlogged table bench_history_contacts as
    select (row_number() over (order by id) - 1)::int as n, id, email from contacts where project_id = ${p}`);
  await db.execute(sql`alter table bench_history_contacts add primary key (n)`);
  const sentAt = t0 - 45 * DAY;
  const campaign = await db.execute<{ id: string }>(sql`
    insert into campaigns (id, project_id, name, subject, body, from_email, audience_type, status, started_at, completed_at,
      recipients, fanout_done, created_at, updated_at)
    values (mailroom_uuid_v7(${ts(sentAt - HOUR)}), ${p}, 'History bench', 'Our news', '<p>Hello {{first_name}}</p>', ${`news@${project.domain}`},
      'ALL', 'SENT', ${ts(sentAt)}, ${ts(sentAt + HOUR)}, ${contacts}, true, ${ts(sentAt - HOUR)}, ${ts(sentAt + HOUR)})
    returning id`);
  const campaignId = campaign.rows[0].id;
  await db.execute(sql`
    with e as (
      insert into emails (id, project_id, contact_id, campaign_id, marketing, source, to_email, from_email, status, rendered_subject,
        message_id, attempts, sent_at, delivered_at, opened_at, clicked_at, open_count, click_count, bounce_type,
        content_expired_at, created_at, updated_at)
      select mailroom_uuid_v7(t), ${p}, c.id, ${campaignId}::uuid, true, 'campaign', c.email, ${`news@${project.domain}`},
        case when c.n % 50 = 0 then 'bounced' when c.n % 10 = 0 then 'clicked' when c.n % 4 = 0 then 'opened' else 'delivered' end,
        'Our news', '010001' || md5('campaign' || c.n) || '-000000', 1, t + interval '1 second',
        case when c.n % 50 <> 0 then t + interval '4 seconds' end, case when c.n % 4 = 0 or c.n % 10 = 0 then t + interval '1 hour' end,
        case when c.n % 10 = 0 then t + interval '2 hours' end, (c.n % 4 = 0 or c.n % 10 = 0)::int, (c.n % 10 = 0)::int,
        case when c.n % 50 = 0 then 'hard' end, t + interval '30 days', t, t + interval '4 seconds'
      from (select b.*, ${ts(sentAt)} + make_interval(secs => b.n * 0.01) as t from bench_history_contacts b) c
      returning id, created_at, message_id
    )
    ${timeline(sql`e`, p)}`);
  // A fixed cohort: every tenth contact upgraded its plan once, 44 days ago. The fills never add this event, so a
  // preview of it asks the same question with the same answer at every size: only the history around it grows.
  await db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    select mailroom_uuid_v7(t), ${p}, c.id, 'plan_upgraded', jsonb_build_object('plan', 'pro'), t
    from (select b.*, ${ts(sentAt + DAY)} + make_interval(secs => b.n * 0.01) as t from bench_history_contacts b where b.n % 10 = 0) c`);
  const endpoint = await db.execute<{ id: string }>(sql`
    insert into webhook_endpoints (id, project_id, url, event_types, secret, created_at, updated_at)
    values (mailroom_uuid_v7(${ts(t0 - 400 * DAY)}), ${p}, 'https://hooks.example.com/mailroom', '{email.*}',
      'whsec_' || encode(uuid_send(gen_random_uuid()) || uuid_send(gen_random_uuid()), 'base64'), ${ts(t0 - 400 * DAY)}, ${ts(t0 - 400 * DAY)})
    returning id`);
  return { projectId: project.id, domain: project.domain, contacts, campaignId, endpointId: endpoint.rows[0].id, t0 };
}

/** Three timeline rows per email of the CTE `e` (`id`, `created_at`, `message_id`): queued, sent, delivered. */
function timeline(e: ReturnType<typeof sql>, p: ReturnType<typeof sql>) {
  return sql`
    insert into email_events (id, email_id, project_id, type, data, created_at)
    select mailroom_uuid_v7(e.created_at + k.after), e.id, ${p}, k.type,
      case k.type
        when 'queued' then null
        when 'sent' then jsonb_build_object('messageId', e.message_id)
        else jsonb_build_object('messageId', e.message_id, 'smtpResponse', '250 2.0.0 OK  1732000000 a1si1234567qkb.12 - gsmtp',
          'processingTimeMillis', 812, 'reportingMTA', 'a8-50.smtp-out.amazonses.com')
      end,
      e.created_at + k.after
    from ${e} cross join (values ('queued', interval '0'), ('sent', interval '1 second'), ('delivered', interval '4 seconds')) as k(type, after)`;
}

/** Rows of one kind in one month (the count the fill tops up). */
async function countIn(
  database: Database,
  kind: 'emails' | 'events' | 'webhooks',
  f: HistoryFixture,
  m: Month,
): Promise<number> {
  const range = sql`project_id = ${f.projectId}::uuid and created_at >= ${ts(m.from)} and created_at < ${ts(m.to)}`;
  const q =
    kind === 'emails'
      ? sql`select count(*)::int as n from emails where ${range} and campaign_id is null`
      : kind === 'events'
        ? sql`select count(*)::int as n from events where ${range}`
        : sql`select count(*)::int as n from webhook_deliveries where ${range}`;
  return (await database.db.execute<{ n: number }>(q)).rows[0].n;
}

/** Inserts `k` transactional emails (with their timelines) spread evenly over `[from, to)`, in time order. */
async function addEmails(
  database: Database,
  f: HistoryFixture,
  from: number,
  to: number,
  k: number,
  seed: number,
): Promise<void> {
  const p = sql`${f.projectId}::uuid`;
  const fresh = ts(f.t0 - 29 * DAY);
  await database.db.execute(sql`
    with e as (
      insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, body_format, variables,
        status, rendered_subject, message_id, attempts, sent_at, delivered_at, opened_at, clicked_at, open_count, click_count,
        bounce_type, content_expired_at, created_at, updated_at)
      select mailroom_uuid_v7(g.t), ${p}, c.id, 'transactional', c.email, ${`app@${f.domain}`},
        'Your receipt #{{order}}',
        case when g.t >= ${fresh} then repeat('<p>Hello {{name}}, thank you for your order #{{order}}. Your items ship soon.</p>', 18) end,
        case when g.t >= ${fresh} then 'html' end,
        case when g.t >= ${fresh} then jsonb_build_object('name', 'Ann', 'order', g.i) else '{}'::jsonb end,
        case when g.i % 50 = 0 then 'bounced' when g.i % 20 = 0 then 'clicked' when g.i % 5 = 0 then 'opened' else 'delivered' end,
        'Your receipt #' || g.i, '010001' || md5(${seed}::text || ':' || g.i) || '-000000', 1, g.t + interval '1 second',
        case when g.i % 50 <> 0 then g.t + interval '4 seconds' end,
        case when g.i % 5 = 0 or g.i % 20 = 0 then g.t + interval '1 hour' end, case when g.i % 20 = 0 then g.t + interval '2 hours' end,
        (g.i % 5 = 0 or g.i % 20 = 0)::int, (g.i % 20 = 0)::int, case when g.i % 50 = 0 then 'hard' end,
        case when g.t < ${fresh} then g.t + interval '30 days' end, g.t, g.t + interval '4 seconds'
      from (select i, ${ts(from)} + make_interval(secs => i * ${(to - from) / 1000 / k}::float8) as t
            from generate_series(0, ${k - 1}) as i) g
      join bench_history_contacts c on c.n = (hashint4(g.i + ${seed}) & 2147483647) % ${f.contacts}
      returning id, created_at, message_id
    )
    ${timeline(sql`e`, p)}`);
}

/** Inserts `k` contact events spread evenly over `[from, to)`, in time order. */
async function addEvents(
  database: Database,
  f: HistoryFixture,
  from: number,
  to: number,
  k: number,
  seed: number,
): Promise<void> {
  await database.db.execute(sql`
    insert into events (id, project_id, contact_id, name, data, created_at)
    select mailroom_uuid_v7(g.t), ${f.projectId}::uuid, c.id,
      case when g.r < 40 then 'email.delivered' when g.r < 70 then 'page_view' when g.r < 85 then 'login'
        when g.r < 95 then 'email.opened' else 'purchase' end,
      case when g.r < 40 or (g.r >= 85 and g.r < 95) then jsonb_build_object('emailId', gen_random_uuid())
        when g.r < 70 then jsonb_build_object('path', '/pricing/' || (g.i % 40), 'referrer', 'google')
        when g.r < 85 then jsonb_build_object('device', case when g.i % 3 = 0 then 'ios' else 'web' end)
        else jsonb_build_object('amount', (g.i % 200) + 9.99, 'currency', 'EUR', 'sku', 'SKU-' || (g.i % 500)) end,
      g.t
    from (select i, (hashint4(i + ${seed} + 7) & 2147483647) % 100 as r,
            ${ts(from)} + make_interval(secs => i * ${(to - from) / 1000 / k}::float8) as t
          from generate_series(0, ${k - 1}) as i) g
    join bench_history_contacts c on c.n = (hashint4(g.i + ${seed}) & 2147483647) % ${f.contacts}`);
}

/** Inserts `k` finished webhook deliveries (one attempt each) spread evenly over `[from, to)`. */
async function addWebhooks(
  database: Database,
  f: HistoryFixture,
  from: number,
  to: number,
  k: number,
  seed: number,
): Promise<void> {
  const p = sql`${f.projectId}::uuid`;
  await database.db.execute(sql`
    with d as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status, attempts, last_status_code, succeeded_at, created_at, updated_at)
      select mailroom_uuid_v7(g.t), ${p}, ${f.endpointId}::uuid, 'email.delivered',
        jsonb_build_object('type', 'email.delivered', 'timestamp', g.t, 'data', jsonb_build_object('id', gen_random_uuid(),
          'to', c.email, 'from', ${`app@${f.domain}`}::text, 'subject', 'Your receipt #' || g.i, 'messageId', '010001' || md5(${seed}::text || ':' || g.i) || '-000000')),
        'succeeded', 1, 200, g.t + interval '150 milliseconds', g.t, g.t + interval '150 milliseconds'
      from (select i, ${ts(from)} + make_interval(secs => i * ${(to - from) / 1000 / k}::float8) as t
            from generate_series(0, ${k - 1}) as i) g
      join bench_history_contacts c on c.n = (hashint4(g.i + ${seed}) & 2147483647) % ${f.contacts}
      returning id, created_at
    )
    insert into webhook_attempts (id, delivery_id, project_id, attempt, status_code, response_body, duration_ms, created_at)
    select mailroom_uuid_v7(d.created_at + interval '100 milliseconds'), d.id, ${p}, 1, 200, '{"ok":true}', 143, d.created_at + interval '100 milliseconds'
    from d`);
}

/**
 * Writes exactly `emails` transactional emails (three timeline rows each) and `events` contact events, spread evenly
 * over `[from, to)` (ms), in time order: the bench's "same month again" refill, which puts back the rows a size's
 * first month drop removed at the smallest size, so a second drop frees the same bytes at every size.
 *
 * @returns the wall time (ms).
 */
export async function addHistory(
  database: Database,
  f: HistoryFixture,
  from: number,
  to: number,
  emails: number,
  events: number,
): Promise<number> {
  const t = performance.now();
  const seed = Math.floor(Math.random() * 1e9);
  await Promise.all([
    emails > 0 && addEmails(database, f, from, to, emails, seed),
    events > 0 && addEvents(database, f, from, to, events, seed),
  ]);
  return performance.now() - t;
}

/**
 * Tops every month up to its share of `total` transactional emails and `total` events (and `total / 10` webhook
 * deliveries, all in the newest 29 days), month by month, oldest first.
 *
 * @returns rows added by kind and the wall time (ms).
 */
export async function fillTo(
  database: Database,
  f: HistoryFixture,
  total: number,
  log: (line: string) => void,
): Promise<{ emails: number; events: number; webhooks: number; ms: number }> {
  const started = performance.now();
  const added = { emails: 0, events: 0, webhooks: 0 };
  const perMonth = Math.round(total / 12);
  for (const m of [...months(f.t0)].reverse()) {
    const t = performance.now();
    const seed = Math.floor(Math.random() * 1e9);
    const emails = perMonth - (await countIn(database, 'emails', f, m));
    const events = perMonth - (await countIn(database, 'events', f, m));
    // Emails and events on two connections at once (two statements, two cores).
    await Promise.all([
      emails > 0 && addEmails(database, f, m.from, m.to, emails, seed),
      events > 0 && addEvents(database, f, m.from, m.to, events, seed),
    ]);
    let hooks = 0;
    if (m.index === 0) {
      const recent = { ...m, from: f.t0 - 29 * DAY };
      hooks = Math.round(total / 10) - (await countIn(database, 'webhooks', f, recent));
      if (hooks > 0) await addWebhooks(database, f, recent.from, recent.to, hooks, seed);
    }
    added.emails += Math.max(0, emails);
    added.events += Math.max(0, events);
    added.webhooks += Math.max(0, hooks);
    log(
      `  month ${m.index}: +${Math.max(0, emails)} emails (×3 timeline), +${Math.max(0, events)} events${hooks > 0 ? `, +${hooks} webhook deliveries` : ''} in ${((performance.now() - t) / 1000).toFixed(1)} s`,
    );
  }
  return { ...added, ms: performance.now() - started };
}
