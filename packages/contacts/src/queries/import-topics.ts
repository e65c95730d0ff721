/**
 * The topic choices of an import batch (CSV `topic:<name>` columns, docs/guides/topics.md), as CTEs of the batch's
 * one statement (`importContactBatch`): set-based, never a statement per row.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { endpointWants } from '@mailroom/db/queries/webhooks';
import type { ImportRecord } from '../imports';

/**
 * CTEs that follow `seen` (existing contacts: `id, email_key`), `ins` (inserted ones: `id, email_key`) and
 * `prepared` (the batch: `email, email_key`) in the batch statement. For each (contact, topic) the records choose,
 * the topic is looked up by lower-cased name among the project's topics (a topic deleted since the upload is left
 * out), and the choice is written to `contact_topics` only when it differs from the stored one, so a batch run
 * again changes nothing. A choice that changes the contact's standing (explicit choice, else the topic's default)
 * records the event `contact.topic_subscribed` / `contact.topic_unsubscribed` (`method: "import"`) and one webhook
 * delivery per subscribed endpoint.
 *
 * Defines `topic_written` (`email_key` of every contact whose choices were written) for the batch's counts, and
 * `topic_hooks` (`id, project_id, generation` of the deliveries, to enqueue once the batch commits).
 *
 * @param records - the batch, one record per address (folded).
 */
export function importTopicCtes(projectId: string, records: ImportRecord[]): SQL {
  const keys: string[] = [];
  const names: string[] = [];
  const choices: boolean[] = [];
  for (const r of records) {
    for (const [name, subscribed] of Object.entries(r.topics ?? {})) {
      keys.push(r.emailKey);
      names.push(name);
      choices.push(subscribed);
    }
  }
  const now = new Date().toISOString();
  return sql`
      topic_input as (
        select * from unnest(${sql.param(keys)}::text[], ${sql.param(names)}::text[], ${sql.param(choices)}::boolean[])
          as x(email_key, topic_name, subscribed)
      ),
      topic_targets as (
        select s.id, s.email_key, true as existed from seen s
        union all select ins.id, ins.email_key, false from ins
      ),
      topic_prior as (
        select tg.id as contact_id, tg.email_key, tg.existed, p.email, t.id as topic_id, t.name, ti.subscribed,
          ct.subscribed as chosen, coalesce(ct.subscribed, t.default_subscription = 'opt_out') as was
        from topic_input ti
        join topic_targets tg on tg.email_key = ti.email_key
        join prepared p on p.email_key = ti.email_key
        join topics t on t.project_id = ${projectId}::uuid and lower(t.name) = ti.topic_name
        left join contact_topics ct on ct.contact_id = tg.id and ct.topic_id = t.id and ct.project_id = ${projectId}::uuid
      ),
      topic_up as (
        insert into contact_topics (contact_id, topic_id, project_id, subscribed, updated_at)
        select contact_id, topic_id, ${projectId}::uuid, subscribed, now() from topic_prior where chosen is distinct from subscribed
        on conflict (contact_id, topic_id) do update set subscribed = excluded.subscribed, updated_at = now()
          where contact_topics.project_id = ${projectId}::uuid
        returning contact_id, topic_id, subscribed
      ),
      topic_written as (
        select distinct p.email_key from topic_up u join topic_prior p on p.contact_id = u.contact_id and p.topic_id = u.topic_id
        where p.existed
      ),
      topic_changed as (
        select p.contact_id, p.email, p.topic_id, p.name, u.subscribed,
          case when u.subscribed then 'contact.topic_subscribed' else 'contact.topic_unsubscribed' end as type
        from topic_up u join topic_prior p on p.contact_id = u.contact_id and p.topic_id = u.topic_id
        where p.was <> u.subscribed
      ),
      topic_events as (
        insert into events (id, project_id, contact_id, name, data, created_at, test)
        select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, c.contact_id, c.type,
          jsonb_build_object('topicId', c.topic_id, 'topicName', c.name, 'method', 'import', 'emailId', null),
          clock_timestamp(), false
        from topic_changed c
      ),
      topic_hooks as (
        insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
        select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, w.id, c.type,
          jsonb_build_object('type', c.type, 'timestamp', ${now}::text, 'data', jsonb_build_object(
            'contactId', c.contact_id, 'email', c.email, 'topicId', c.topic_id, 'topicName', c.name, 'method', 'import', 'emailId', null))
        from topic_changed c join webhook_endpoints w on w.project_id = ${projectId}::uuid and ${endpointWants(sql`c.type`)}
        returning id, project_id, generation
      )`;
}
