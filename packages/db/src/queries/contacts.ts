/**
 * Contact upserts, shared by `/v1/send`, `/v1/track` and `POST /contacts`.
 *
 * Merge rules (API.md): `data` is shallow-merged in SQL (never read-modify-write, so concurrent writers lose no
 * key); a key set to `null` is removed; `subscribed` changes only when the caller states it, and otherwise a new
 * contact gets the caller's default.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import { emailKey, newId, normalizeEmail } from '@mailroom/core';
import type { DbOrTx } from '../client';

/** One contact to create or update. */
export interface ContactUpsert {
  email: string;
  /** Stated subscription; `undefined` keeps an existing contact's value. */
  subscribed?: boolean;
  /** Applied to new contacts when `subscribed` is not stated. */
  defaultSubscribed: boolean;
  /** Shallow patch of `data`; `null` values remove keys. */
  data?: Record<string, unknown>;
}

/** A contact after the upsert; `inserted` tells a new contact from an updated one. */
export interface UpsertedContact {
  id: string;
  email: string;
  emailKey: string;
  subscribed: boolean;
  data: Record<string, unknown>;
  createdAt: Date;
  updatedAt: Date;
  inserted: boolean;
}

/**
 * Creates or updates contacts in one statement, race-free (`INSERT … ON CONFLICT (project_id, email_key)`).
 * Input rows with the same address are merged first (later rows win). Rows are locked in address order so
 * concurrent multi-recipient upserts cannot deadlock.
 *
 * @returns one row per distinct address, in address order.
 */
export async function upsertContacts(db: DbOrTx, projectId: string, inputs: ContactUpsert[]): Promise<UpsertedContact[]> {
  const merged = new Map<string, ContactUpsert & { key: string }>();
  for (const input of inputs) {
    const key = emailKey(input.email);
    const prev = merged.get(key);
    merged.set(key, {
      ...input,
      key,
      email: prev?.email ?? normalizeEmail(input.email),
      subscribed: input.subscribed ?? prev?.subscribed,
      data: { ...(prev?.data ?? {}), ...(input.data ?? {}) },
    });
  }
  const rows = [...merged.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  if (rows.length === 0) return [];

  const values = sql.join(
    rows.map((r) => {
      const patch = r.data ?? {};
      const clean = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== null));
      const removed = Object.keys(patch).filter((k) => patch[k] === null);
      return sql`(${newId()}::uuid, ${r.email}, ${r.key}, ${r.subscribed ?? r.defaultSubscribed}::boolean,
        ${r.subscribed !== undefined}::boolean, ${JSON.stringify(clean)}::jsonb, ${JSON.stringify(removed)}::jsonb)`;
    }),
    sql`, `,
  );

  const result = await db.execute<{
    id: string;
    email: string;
    email_key: string;
    subscribed: boolean;
    data: Record<string, unknown>;
    created_at: Date;
    updated_at: Date;
    inserted: boolean;
  }>(sql`
    with input (id, email, email_key, subscribed, stated, patch, removed) as (values ${values})
    insert into contacts (id, project_id, email, email_key, subscribed, data)
    select id, ${projectId}::uuid, email, email_key, subscribed, patch from input
    on conflict (project_id, email_key) do update set
      subscribed = case
        when (select i.stated from input i where i.email_key = excluded.email_key) then excluded.subscribed
        else contacts.subscribed end,
      data = (contacts.data || excluded.data) - (
        select coalesce(array_agg(k), '{}'::text[])
        from input i, jsonb_array_elements_text(i.removed) k
        where i.email_key = excluded.email_key),
      updated_at = now()
    returning id, email, email_key, subscribed, data, created_at, updated_at, (xmax = 0) as inserted
  `);
  return result.rows
    .map((r) => ({
      id: r.id,
      email: r.email,
      emailKey: r.email_key,
      subscribed: r.subscribed,
      data: r.data,
      createdAt: new Date(r.created_at),
      updatedAt: new Date(r.updated_at),
      inserted: r.inserted,
    }))
    .sort((a, b) => (a.emailKey < b.emailKey ? -1 : a.emailKey > b.emailKey ? 1 : 0));
}
