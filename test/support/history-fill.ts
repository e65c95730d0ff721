/**
 * Fills the history tables of one project in bulk (`generate_series`, a few statements), on the schema before or
 * after time partitioning (migration 0018): contacts, transactional emails with one timeline row each, contact
 * events (through the `events` triggers, so `event_names` counts them), webhook deliveries with one attempt each.
 * Rows are spread evenly over the last `days` days, each id a UUIDv7 of its `created_at` (as every writer makes
 * them). Used by the partitioning tests and the migration benchmark.
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** How many rows of each kind to write. */
export interface HistoryFill {
  projectId: string;
  contacts: number;
  emails: number;
  events: number;
  webhookDeliveries: number;
  /** Rows are spread over the last `days` days. */
  days: number;
  /** Event names used, round robin (default `['signup', 'purchase', 'login']`). */
  eventNames?: string[];
}

/** Writes the rows; statements of at most `chunk` rows each (default 200,000). */
export async function fillHistory(db: DbOrTx, f: HistoryFill, chunk = 200_000): Promise<void> {
  const p = sql`${f.projectId}::uuid`;
  const spread = (n: number) =>
    sql`now() - make_interval(secs => (${f.days}::float8 * 86400) * (1 - g::float8 / ${n}::float8))`;
  await db.execute(sql`
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select mailroom_uuid_v7(now()), ${p}, 'c' || g || '@fill.test', 'c' || g || '@fill.test', true, '{}'::jsonb
    from generate_series(1, ${f.contacts}::int) g`);
  const contactIds = sql`(select array_agg(id order by id) from contacts where project_id = ${p} and email like '%@fill.test')`;
  for (let from = 1; from <= f.emails; from += chunk) {
    const to = Math.min(f.emails, from + chunk - 1);
    await db.execute(sql`
      with c as (select ${contactIds} as ids),
      rows as (select g, ${spread(f.emails)} as at from generate_series(${from}::int, ${to}::int) g),
      em as (
        insert into emails (id, project_id, contact_id, source, to_email, from_email, subject, body, body_format, status, message_id, sent_at, created_at, updated_at)
        select mailroom_uuid_v7(r.at), ${p}, c.ids[1 + (r.g % array_length(c.ids, 1))], 'transactional', 'c' || (r.g % ${f.contacts}::int) || '@fill.test',
          'a@fill.test', 'Hello', '<p>Hello</p>', 'html', 'delivered', 'ses-' || r.g, r.at, r.at, r.at
        from rows r, c
        returning id, created_at
      )
      insert into email_events (id, email_id, project_id, type, data, created_at)
      select mailroom_uuid_v7(em.created_at + interval '1 second'), em.id, ${p}, 'delivered', '{}'::jsonb, em.created_at + interval '1 second' from em`);
  }
  const names = f.eventNames ?? ['signup', 'purchase', 'login'];
  for (let from = 1; from <= f.events; from += chunk) {
    const to = Math.min(f.events, from + chunk - 1);
    await db.execute(sql`
      with c as (select ${contactIds} as ids), n as (select ${sql.param(names)}::text[] as names)
      insert into events (id, project_id, contact_id, name, data, created_at)
      select mailroom_uuid_v7(${spread(f.events)}), ${p}, c.ids[1 + (g % array_length(c.ids, 1))], n.names[1 + (g % array_length(n.names, 1))],
        '{"plan":"pro"}'::jsonb, ${spread(f.events)}
      from generate_series(${from}::int, ${to}::int) g, c, n`);
  }
  if (f.webhookDeliveries > 0) {
    await db.execute(sql`
      with ep as (
        insert into webhook_endpoints (id, project_id, url, event_types, secret)
        values (mailroom_uuid_v7(now()), ${p}, 'https://hooks.fill.test/in', '{*}', 'whsec_fill') returning id
      ),
      d as (
        insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload, status, attempts, created_at)
        select mailroom_uuid_v7(${spread(f.webhookDeliveries)}), ${p}, ep.id, 'email.delivered', '{"type":"email.delivered"}'::jsonb, 'succeeded', 1, ${spread(f.webhookDeliveries)}
        from generate_series(1, ${f.webhookDeliveries}::int) g, ep
        returning id, created_at
      )
      insert into webhook_attempts (id, delivery_id, project_id, attempt, status_code, duration_ms, created_at)
      select mailroom_uuid_v7(d.created_at), d.id, ${p}, 1, 200, 12, d.created_at from d`);
  }
}
