/**
 * The public unsubscribe action (docs/api/overview.md, marketing mail; RFC 8058): the token names an email; the email's
 * contact is unsubscribed.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';

/** What a token's email points at, with the key that verifies the token. */
export interface UnsubscribeTarget {
  emailId: string;
  projectId: string;
  contactId: string | null;
  campaignId: string | null;
  toEmail: string;
  signingKey: Buffer;
  /** The email's topic (a topic's marketing email): its one-click unsubscribe leaves that topic only. */
  topicId: string | null;
}

/** Loads the email a token names, or `undefined`. */
export async function unsubscribeTarget(db: DbOrTx, emailId: string): Promise<UnsubscribeTarget | undefined> {
  const rows = await db.execute<{
    id: string;
    project_id: string;
    contact_id: string | null;
    campaign_id: string | null;
    to_email: string;
    signing_key: Buffer;
    topic_id: string | null;
  }>(sql`
    select e.id, e.project_id, e.contact_id, e.campaign_id, e.to_email, p.signing_key, e.topic_id
    from emails e join projects p on p.id = e.project_id where e.id = ${emailId}::uuid
  `);
  const r = rows.rows[0];
  return (
    r && {
      emailId: r.id,
      projectId: r.project_id,
      contactId: r.contact_id,
      campaignId: r.campaign_id,
      toEmail: r.to_email,
      signingKey: r.signing_key,
      topicId: r.topic_id,
    }
  );
}

/**
 * Whether an opt-out by `method` counts in its campaign's `unsubscribed` figure. Only the recipient's own
 * unsubscribe (the link or the one-click POST) does: a complaint that also opts the contact out is counted once,
 * as a complaint (the email's `complained` status), and a bounce is counted as a bounce, never as an unsubscribe.
 */
export function countsAsUnsubscribe(method: UnsubscribeMethod): boolean {
  return method === 'one-click' || method === 'link';
}

/**
 * True while no opt-out through email `emailId` is on its timeline (an `unsubscribed` entry other than a
 * complaint's): what keeps an email's unsubscribe counted on its campaign once.
 */
function notYetUnsubscribedThrough(emailId: string): SQL {
  return sql`not exists (
    select 1 from email_events x
    where x.email_id = ${emailId}::uuid and x.type = 'unsubscribed' and coalesce(x.data->>'method', '') <> 'complaint'
  )`;
}

/** How a contact opted out through an email. */
export type UnsubscribeMethod = 'one-click' | 'link' | 'complaint';

/**
 * Unsubscribes the email's contact, idempotently, in one statement: only a contact still subscribed changes,
 * and only then are `contact.unsubscribed` (event) and `unsubscribed` (the email's timeline) written, and the
 * campaign's unsubscribe count raised when the method counts ({@link countsAsUnsubscribe}) and this email has not
 * been counted before (once per email). Through a test email's link, the event is a test event (it starts and wakes test
 * workflow executions only).
 *
 * @param method - `one-click` (RFC 8058 POST from a mailbox provider), `link` (the page in the message) or
 *   `complaint` (the recipient reported the message as spam).
 * @returns whether this call changed the contact (false: already unsubscribed, or deleted).
 */
export async function unsubscribeContact(
  db: DbOrTx,
  target: Pick<UnsubscribeTarget, 'emailId' | 'projectId' | 'contactId' | 'campaignId'>,
  method: UnsubscribeMethod,
): Promise<boolean> {
  if (!target.contactId) return false;
  const data = JSON.stringify({ emailId: target.emailId, campaignId: target.campaignId, method });
  const result = await db.execute<{ n: number }>(sql`
    with changed as (
      update contacts set subscribed = false, updated_at = now()
      where id = ${target.contactId}::uuid and project_id = ${target.projectId}::uuid and subscribed
      returning id
    ),
    t as (select date_trunc('milliseconds', now()) as at),
    ev as (
      insert into events (id, project_id, contact_id, name, data, created_at, test)
      select mailroom_uuid_v7(t.at), ${target.projectId}::uuid, c.id, 'contact.unsubscribed', ${data}::jsonb, t.at,
        coalesce((select e.test from emails e where e.id = ${target.emailId}::uuid), false)
      from changed c, t
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), ${target.emailId}::uuid, ${target.projectId}::uuid, 'unsubscribed', ${data}::jsonb from changed
    ),
    counted as (
      update campaigns set unsubscribed = unsubscribed + 1
      where id = ${target.campaignId}::uuid and project_id = ${target.projectId}::uuid
        and ${countsAsUnsubscribe(method)}::boolean and exists (select 1 from changed)
        -- Once per email: a contact who re-subscribed and opts out again through the same email is not counted twice.
        and ${notYetUnsubscribedThrough(target.emailId)}
    )
    select count(*)::int as n from changed
  `);
  return result.rows[0].n > 0;
}

/**
 * Counts, once per email, a contact leaving the email's own topic through that email's link (its topic one-click,
 * or the preference center reached from it) on the email's campaign: the campaign's `unsubscribed` count and an
 * `unsubscribed` entry on the email's timeline (`data`: email, campaign, method and topic). An email already
 * counted, for its topic or for all marketing mail, is not counted again; an email of no campaign gets the
 * timeline entry only. Call it in the transaction that recorded the change.
 *
 * @returns whether this call counted it.
 */
export async function countTopicUnsubscribe(
  db: DbOrTx,
  target: Pick<UnsubscribeTarget, 'emailId' | 'projectId' | 'campaignId' | 'topicId'>,
  method: Exclude<UnsubscribeMethod, 'complaint'>,
): Promise<boolean> {
  if (!target.topicId) return false;
  const data = JSON.stringify({
    emailId: target.emailId,
    campaignId: target.campaignId,
    method,
    topicId: target.topicId,
  });
  const result = await db.execute<{ n: number }>(sql`
    with timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), ${target.emailId}::uuid, ${target.projectId}::uuid, 'unsubscribed', ${data}::jsonb
      where ${notYetUnsubscribedThrough(target.emailId)}
      returning 1
    ),
    counted as (
      update campaigns set unsubscribed = unsubscribed + 1
      where id = ${target.campaignId}::uuid and project_id = ${target.projectId}::uuid and exists (select 1 from timeline)
    )
    select count(*)::int as n from timeline
  `);
  return result.rows[0].n > 0;
}
