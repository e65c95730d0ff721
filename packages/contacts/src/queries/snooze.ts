/**
 * Snoozing a contact: marketing mail to it is held back until `contacts.snoozed_until` (the suppression rule's
 * `snoozed` cause, `suppression-rule.ts`; campaign fan-out counts it in `campaigns.skipped_snoozed`).
 *
 * Each change records one contact event in the same statement: `contact.snoozed` when a snooze is set or moved,
 * `contact.unsnoozed` when one is cleared (by the API, or by the worker's expiry pass once it has run out). A
 * snooze is cleared at most once: clearing writes `null`, so the expiry pass never finds it again, and the pass
 * never finds one the API cleared.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** Who changed a snooze: the API (`PATCH`/`POST /contacts`), the unsubscribe page (`link`), or its end (`expired`). */
export type SnoozeMethod = 'api' | 'link' | 'expired';

/** A snooze change that happened, with what its webhook and event carry. */
export interface SnoozeChange {
  type: 'contact.snoozed' | 'contact.unsnoozed';
  projectId: string;
  contactId: string;
  email: string;
  /** The new end of the snooze (`contact.snoozed`), or `null` (`contact.unsnoozed`). */
  snoozedUntil: Date | null;
  /** The end it had before (`null`: it was not snoozed). */
  previousSnoozedUntil: Date | null;
  method: SnoozeMethod;
  /** The event is a test event (a test key's request, or a test email's page). */
  test: boolean;
}

type ChangeRow = {
  project_id: string;
  contact_id: string;
  email: string;
  snoozed_until: string | Date | null;
  previous: string | Date | null;
  test: boolean;
};

const toDate = (v: string | Date | null): Date | null => (v === null ? null : new Date(v));

function toChange(r: ChangeRow, method: SnoozeMethod): SnoozeChange {
  return {
    type: r.snoozed_until === null ? 'contact.unsnoozed' : 'contact.snoozed',
    projectId: r.project_id,
    contactId: r.contact_id,
    email: r.email,
    snoozedUntil: toDate(r.snoozed_until),
    previousSnoozedUntil: toDate(r.previous),
    method,
    test: r.test,
  };
}

/** The event's `data` of a change (also the base of its webhook's `data`). */
function eventDataSql(method: SnoozeMethod, extra: Record<string, string | null>) {
  return sql`jsonb_build_object('method', ${method}::text, 'snoozedUntil', u.snoozed_until, 'previousSnoozedUntil', u.previous) || ${JSON.stringify(extra)}::jsonb`;
}

/**
 * Sets (`until`) or clears (`null`) a contact's snooze, in one statement with its event. Setting the value the
 * contact already has changes nothing and records nothing; clearing a contact that has none likewise.
 *
 * @param opts.emailId - the email whose unsubscribe page paused the contact (`link`): recorded on the event, and the
 *   event is a test event when the email is.
 * @param opts.test - a test key's request: the event is a test event.
 * @returns the change, or `null` when nothing changed or the project has no such contact.
 */
export async function setContactSnooze(
  db: DbOrTx,
  projectId: string,
  contactId: string,
  until: Date | null,
  opts: { method: 'api' | 'link'; test?: boolean; emailId?: string; campaignId?: string | null },
): Promise<SnoozeChange | null> {
  const extra: Record<string, string | null> = opts.emailId
    ? { emailId: opts.emailId, campaignId: opts.campaignId ?? null }
    : {};
  const test = opts.emailId
    ? sql`coalesce((select e.test from emails e where e.id = ${opts.emailId}::uuid), false)`
    : sql`${opts.test ?? false}::boolean`;
  const result = await db.execute<ChangeRow>(sql`
    with old as (
      select id, snoozed_until from contacts where project_id = ${projectId}::uuid and id = ${contactId}::uuid for update
    ),
    u as (
      update contacts c set snoozed_until = ${until?.toISOString() ?? null}::timestamptz, updated_at = now()
      from old where c.id = old.id and c.snoozed_until is distinct from ${until?.toISOString() ?? null}::timestamptz
      returning c.project_id, c.id as contact_id, c.email, c.snoozed_until, old.snoozed_until as previous, ${test} as test
    ),
    ev as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(clock_timestamp()), u.project_id, u.contact_id,
        case when u.snoozed_until is null then 'contact.unsnoozed' else 'contact.snoozed' end,
        ${eventDataSql(opts.method, extra)}, clock_timestamp(), u.test
      from u
    )
    select * from u
  `);
  const r = result.rows[0];
  return r ? toChange(r, opts.method) : null;
}

/**
 * Clears up to `limit` snoozes that have run out (`snoozed_until <= now()`, any project), oldest end first, each
 * with its `contact.unsnoozed` event (method `expired`), in one statement. Rows locked by another transaction are
 * skipped (`SKIP LOCKED`), so two passes at once never clear one snooze twice. Reads the partial index
 * `contacts_snoozed_until_idx`.
 *
 * @returns the cleared snoozes.
 */
export async function expireSnoozes(db: DbOrTx, limit: number): Promise<SnoozeChange[]> {
  const result = await db.execute<ChangeRow>(sql`
    with due as (
      select id, snoozed_until from contacts
      where snoozed_until is not null and snoozed_until <= now()
      order by snoozed_until
      limit ${limit}
      for update skip locked
    ),
    u as (
      update contacts c set snoozed_until = null, updated_at = now()
      from due where c.id = due.id
      returning c.project_id, c.id as contact_id, c.email, c.snoozed_until, due.snoozed_until as previous, false as test
    ),
    ev as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(clock_timestamp()), u.project_id, u.contact_id, 'contact.unsnoozed', ${eventDataSql('expired', {})}, clock_timestamp(), false
      from u
    )
    select * from u
  `);
  return result.rows.map((r) => toChange(r, 'expired'));
}
