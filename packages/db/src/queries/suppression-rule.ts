/**
 * The one rule "this email is not sent to this recipient", as SQL that every place deciding it embeds: the write of
 * an accepted `POST /v1/send` (alone and batched), a workflow's SEND_EMAIL step (which skips the step), and the
 * worker's claim, which re-checks every email (transactional, campaign, workflow) just before sending. Campaign
 * fan-out selects subscribed contacts not on the list up front (`c.subscribed` and `contactSuppressedSql`, so its
 * keyset scan keeps its index); the claim re-checks those emails with this rule.
 *
 * A recipient is held back, in this order of causes:
 * 1. `suppression_list`: the address is on the project's suppression list (hard bounce, repeated soft bounces,
 *    complaint, operator), whatever the email;
 * 2. `unsubscribed`: the email is marketing (a MARKETING template, a campaign, a marketing workflow email) and the
 *    contact is not subscribed, as it stands after this very request's upsert (so `subscribed: true` in the request
 *    lets the email go; a contact created by the request without `subscribed` is created unsubscribed, the
 *    specification's default for `/v1/send`, and its marketing email is held back);
 * 3. `topic_unsubscribed`: the email is marketing of a topic (a campaign's or a workflow step's `topicId`) and the
 *    contact is not subscribed to that topic (`topicSubscribedSql`, docs/guides/topics.md). Transactional mail never
 *    reads topics;
 * 4. `snoozed`: the email is marketing and the contact is snoozed (`contacts.snoozed_until` is ahead of the
 *    statement's time). No request that accepts mail changes a snooze, so the rule reads it from `contacts` by the
 *    recipient's key (the unique `(project_id, email_key)` index), and only for marketing email: transactional
 *    mail never pays for the lookup. Campaign fan-out leaves snoozed contacts out up front and counts them
 *    (`campaigns.skipped_snoozed`); the claim catches a contact snoozed after the fan-out.
 *
 * A further cause joins here as one more `when` line, one more entry of {@link SUPPRESSION_CAUSES} and
 * {@link SUPPRESSION_REASONS}, and, when it reads a contact field that the request itself may change, one more
 * field of {@link SuppressionSubject} that the callers fill as they fill `subscribed` (at acceptance from the
 * `upserted` rows: one statement does not see its own upsert in `contacts`). Every caller then applies it, with
 * its reason, timeline entry, 202 answer and `email.suppressed` webhook, without another change.
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';

/** Why an email is held back (`emails.status = 'suppressed'`), as stored on its timeline entry (`data.cause`). */
export const SUPPRESSION_CAUSES = ['suppression_list', 'unsubscribed', 'topic_unsubscribed', 'snoozed'] as const;
export type SuppressionCause = (typeof SUPPRESSION_CAUSES)[number];

/** The words of each cause: the timeline entry's `reason`, the webhook's `reason`, and `emails.error` after `suppressed: `. */
export const SUPPRESSION_REASONS: Readonly<Record<SuppressionCause, string>> = {
  suppression_list: 'address is on the suppression list',
  unsubscribed: 'contact is unsubscribed from marketing email',
  topic_unsubscribed: "contact is not subscribed to the email's topic",
  snoozed: 'contact has paused marketing email (snoozed)',
};

/** Where the rule reads one recipient from, as SQL expressions of the caller's query. */
export interface SuppressionSubject {
  /** The project (uuid). */
  projectId: SQL;
  /** The recipient's identity key (the lower-cased normalised address, as `suppressions.email_key`). */
  emailKey: SQL;
  /** Whether the email is marketing (boolean). */
  marketing: SQL;
  /**
   * Whether the contact is subscribed (boolean), as it stands now; `null` (no contact any more) is not taken for
   * an opt-out.
   */
  subscribed: SQL;
  /**
   * Whether the contact is subscribed to the email's topic (boolean), or `null` when the email has no topic (or no
   * contact); absent: no topic.
   */
  topicSubscribed?: SQL;
}

/**
 * SQL condition "this address is on the project's suppression list" (one indexed row of `suppressions`,
 * `(project_id, email_key)`): the home of the rule "a suppressed address is never mailed", the only place the list
 * is looked up in SQL; {@link suppressionCauseSql} and the
 * audience conditions (`contactSuppressedSql`) are built on it.
 */
export function onSuppressionListSql(projectId: SQL, emailKey: SQL): SQL {
  return sql`exists (select 1 from suppressions s where s.project_id = ${projectId} and s.email_key = ${emailKey})`;
}

/**
 * SQL condition "this contact's address is on the suppression list" for audience queries (campaign fan-out, a
 * campaign's retry of failed emails): `contactAlias` is the contacts alias in the caller's query. Built on
 * {@link onSuppressionListSql}.
 */
export function contactSuppressedSql(contactAlias: string): SQL {
  const c = sql.raw(contactAlias);
  return onSuppressionListSql(sql`${c}.project_id`, sql`${c}.email_key`);
}

/**
 * SQL expression: the suppression-list key of an email's recipient (`emails.to_email`, lower-cased as
 * `suppressions.email_key`), `emailAlias` being the emails alias in the caller's query.
 */
export function recipientKeySql(emailAlias: string): SQL {
  return sql`lower(${sql.raw(emailAlias)}.to_email)`;
}

/**
 * The cause for which the email is not sent ({@link SuppressionCause}, as text), or `null` when it may be sent.
 * Reads one indexed row of `suppressions` (`(project_id, email_key)`).
 */
export function suppressionCauseSql(r: SuppressionSubject): SQL {
  return sql`(case
      when ${onSuppressionListSql(r.projectId, r.emailKey)} then 'suppression_list'
      when ${r.marketing} and not coalesce(${r.subscribed}, true) then 'unsubscribed'
      when ${r.marketing} and not coalesce(${r.topicSubscribed ?? sql`null::boolean`}, true) then 'topic_unsubscribed'
      when ${r.marketing} and ${contactSnoozedSql(r.projectId, r.emailKey)} then 'snoozed'
    end)`;
}

/**
 * SQL condition "the contact with this address is snoozed now" (one indexed row of `contacts`,
 * `(project_id, email_key)`): its `snoozed_until` lies after the statement's `now()`.
 */
export function contactSnoozedSql(projectId: SQL, emailKey: SQL): SQL {
  return sql`exists (select 1 from contacts sc where sc.project_id = ${projectId} and sc.email_key = ${emailKey} and sc.snoozed_until > now())`;
}

/** The {@link SUPPRESSION_REASONS} text of a cause expression (`null` for `null`). */
export function suppressionReasonSql(cause: SQL): SQL {
  const whens = SUPPRESSION_CAUSES.map((c) => sql`when ${c}::text then ${SUPPRESSION_REASONS[c]}::text`);
  return sql`(case ${cause} ${sql.join(whens, sql` `)} end)`;
}

/** The timeline entry's `data` of a suppressed email (`{ reason, cause }`), or `null` for an email not held back. */
export function suppressionDataSql(cause: SQL): SQL {
  return sql`(case when ${cause} is not null then jsonb_build_object('reason', ${suppressionReasonSql(cause)}, 'cause', ${cause}) end)`;
}
