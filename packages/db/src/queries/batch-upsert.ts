/**
 * The contact upsert by address (the merge rule), the one implementation every contact write embeds: `/v1/send`
 * (`@mailroom/sending`'s `queries/transactional-batch`, and through `upsertCtes` in `@mailroom/contacts`'s
 * `queries/contacts` the single request forms), `/v1/track` (`@mailroom/contacts`'s `queries/track-batch`),
 * `POST /contacts`, and the import's statement (`@mailroom/contacts`'s
 * `queries/imports`, which looks contacts up first and applies {@link mergedSubscribedSqlText} and
 * {@link mergedDataSqlText}).
 *
 * The rule (docs/api/overview.md): `data` is shallow-merged in SQL (never read-modify-write, so concurrent writers
 * lose no key), with the `removed` keys taken out (a key set to `null`; one set to `""` is ignored before this,
 * `data-patch.ts`); `subscribed` changes only when `stated`; a new contact is created with `subscribed` (the
 * caller's default when not stated).
 *
 * As SQL text to follow a CTE named `input` with one row per contact: `id, project_id, email, email_key,
 * subscribed, stated, patch, removed, test`, distinct by (project_id, email_key).
 *
 * @module
 */

/**
 * SQL text: a contact's `subscribed` after the merge, from its `current` value, whether the input `stated` one,
 * and the input's `subscribed` (all SQL expressions of the caller's query).
 */
export function mergedSubscribedSqlText(current: string, stated: string, subscribed: string): string {
  return `case when ${stated} then ${subscribed} else ${current} end`;
}

/**
 * SQL text: a contact's `data` after the merge: `current` (jsonb) shallow-merged with `patch` (jsonb), then the
 * keys of `removedKeys` (text[]) taken out.
 */
export function mergedDataSqlText(current: string, patch: string, removedKeys: string): string {
  return `(${current} || ${patch}) - ${removedKeys}`;
}

function upsertText(returningExtra: string): string {
  const sameInput = 'i.project_id = excluded.project_id and i.email_key = excluded.email_key';
  return `prior as (
    select c.id, c.subscribed from contacts c join input i on c.project_id = i.project_id and c.email_key = i.email_key
  ),
  upserted as (
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select id, project_id, email, email_key, subscribed, patch from input order by project_id, email_key
    on conflict (project_id, email_key) do update set
      subscribed = ${mergedSubscribedSqlText('contacts.subscribed', `(select i.stated from input i where ${sameInput})`, 'excluded.subscribed')},
      data = ${mergedDataSqlText(
        'contacts.data',
        'excluded.data',
        `(
        select coalesce(array_agg(k), '{}'::text[])
        from input i, jsonb_array_elements_text(i.removed) k
        where ${sameInput})`,
      )},
      updated_at = now()
    returning id, project_id, email, email_key, subscribed, data, created_at, updated_at, (xmax = 0) as inserted${returningExtra}
  )`;
}

/**
 * The `prior` and `upserted` CTEs. Rows are upserted in (project, address key) order, the lock order of every
 * contact upsert, so concurrent batches cannot deadlock on each other's contacts. `upserted` returns `id,
 * project_id, email, email_key, subscribed, data, created_at, updated_at, inserted`; `prior` (the contacts as they
 * were, from the statement's snapshot; not evaluated unless referenced) serves {@link BATCH_SUBSCRIPTION_EVENTS}.
 */
export const BATCH_UPSERT = upsertText('');

/** {@link BATCH_UPSERT} whose `upserted` also returns `snoozed_until` (the request forms read it). */
export const BATCH_UPSERT_WITH_SNOOZE = upsertText(', snoozed_until');

/**
 * The `subscription_events` CTE, after {@link BATCH_UPSERT}: `contact.subscribed` for a contact created subscribed
 * or switched on, `contact.unsubscribed` (method `api`) for one switched off, so workflows and segments see
 * subscription changes made through the API; test events for `input.test` rows (a test key's request: they start
 * and wake test workflow executions only). `prior` reads the statement's snapshot: two concurrent requests
 * switching the same contact may both record the change.
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
