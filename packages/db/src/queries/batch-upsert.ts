/**
 * The contact upsert shared by the batched request writes (`track-batch.ts`, `transactional-batch.ts`), as SQL
 * text to follow a CTE named `input` with one row per contact: `id, project_id, email, email_key, subscribed,
 * stated, patch, removed, test`, distinct by (project_id, email_key). The same merge rules as the single
 * upsert (`upsertCtes` in `contacts.ts`, docs/api/overview.md): shallow `data` merge with `removed` keys taken out,
 * `subscribed` changed only when `stated`, new contacts created with `subscribed`.
 *
 * @module
 */

/**
 * The `prior` and `upserted` CTEs. Rows are upserted in (project, address key) order, the lock order of every
 * contact upsert, so concurrent batches cannot deadlock on each other's contacts. `upserted` returns `id,
 * project_id, email, email_key, subscribed, data, created_at, updated_at, inserted`; `prior` (the contacts as they
 * were, from the statement's snapshot) serves {@link BATCH_SUBSCRIPTION_EVENTS}.
 */
export const BATCH_UPSERT = `prior as (
    select c.id, c.subscribed from contacts c join input i on c.project_id = i.project_id and c.email_key = i.email_key
  ),
  upserted as (
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select id, project_id, email, email_key, subscribed, patch from input order by project_id, email_key
    on conflict (project_id, email_key) do update set
      subscribed = case
        when (select i.stated from input i where i.project_id = excluded.project_id and i.email_key = excluded.email_key) then excluded.subscribed
        else contacts.subscribed end,
      data = (contacts.data || excluded.data) - (
        select coalesce(array_agg(k), '{}'::text[])
        from input i, jsonb_array_elements_text(i.removed) k
        where i.project_id = excluded.project_id and i.email_key = excluded.email_key),
      updated_at = now()
    returning id, project_id, email, email_key, subscribed, data, created_at, updated_at, (xmax = 0) as inserted
  )`;

/**
 * The `subscription_events` CTE, after {@link BATCH_UPSERT}: `contact.subscribed` for a contact created subscribed
 * or switched on, `contact.unsubscribed` (method `api`) for one switched off; test events for `input.test` rows.
 */
export const BATCH_SUBSCRIPTION_EVENTS = `subscription_events as (
    insert into events (id, project_id, contact_id, name, data, created_at, test)
    select mailroom_uuid_v7(clock_timestamp()), u.project_id, u.id,
      case when u.subscribed then 'contact.subscribed' else 'contact.unsubscribed' end, '{"method":"api"}'::jsonb, clock_timestamp(), i.test
    from upserted u
    join input i on i.project_id = u.project_id and i.email_key = u.email_key
    left join prior p on p.id = u.id
    where (u.inserted and u.subscribed) or (not u.inserted and p.subscribed is distinct from u.subscribed and p.id is not null)
  )`;
