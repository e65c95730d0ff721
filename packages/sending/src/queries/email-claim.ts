/**
 * What a claim of an email reads and what a finish writes, shared by the one claim and finish implementation
 * (`email-batches.ts`: `claimEmails`/`finishEmails`, and `claimEmail`/`finishEmail`, their batch of one): the
 * claimed row's shape ({@link ClaimedEmail}) and the statement's `returning` list ({@link CLAIM_RETURNING}), why a
 * claim missed ({@link ClaimMiss}), and a finish's outcomes and timeline entry ({@link finishEvent}).
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import { emails, type EmailStatus } from '@mailroom/db/schema';
import { recipientKeySql, suppressionCauseSql, type SuppressionCause } from '@mailroom/db/queries/suppression-rule';
import { topicSubscribedSql } from '@mailroom/contacts/queries/topics';

type EmailRecord = typeof emails.$inferSelect;

/** snake_case column name → camelCase property, computed once per name (a claim maps every column of every row). */
const camelNames = new Map<string, string>();

function camelCase(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in row) {
    let name = camelNames.get(k);
    if (name === undefined) camelNames.set(k, (name = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())));
    out[name] = row[k];
  }
  return out;
}

/** A claimed email with what sending it needs. */
export interface ClaimedEmail extends EmailRecord {
  /** Status before the claim: `sending` means a previous owner died after claiming (its lease ran out). */
  previousStatus: EmailStatus;
  projectDisabled: boolean;
  /** The project's key for unsubscribe tokens. */
  signingKey: Buffer;
  contactData: Record<string, unknown> | null;
  /**
   * For a campaign's email: the campaign's content (its A/B variant's, for an email with a `variant`) and status
   * (the row stores no copy of the body).
   */
  campaign: { subject: string; body: string; status: string } | null;
  /**
   * Why the email must not be sent now, by the suppression rule (`suppression-rule.ts`), or `null`: the recipient
   * went on the suppression list, or the contact of a marketing email (a MARKETING template's, a campaign's, a
   * marketing workflow email) unsubscribed, since the email was accepted (a paused campaign can hold its emails for
   * hours; a contact can unsubscribe between a `/v1/send` and its job).
   */
  suppression: SuppressionCause | null;
  /**
   * For tracked mail from a sending domain (exactly the From domain) whose custom tracking domain is ready: the
   * domain and the delivery connection its configuration sets were made on; else null.
   */
  trackingTarget: { domain: string; connection: string } | null;
}

/** Why a claim (`claimEmail`) did not claim. */
export type ClaimMiss =
  | { kind: 'missing' }
  | { kind: 'final'; status: EmailStatus }
  | { kind: 'leased'; until: Date }
  /** A scheduled email not yet due (`until`: its `scheduled_at`); a rescheduled one's earlier job lands here. */
  | { kind: 'scheduled'; until: Date }
  | { kind: 'paused'; campaignId: string };

/**
 * What a claim reads back with the claimed row (`e`, the `emails` row; `p.previous_status`): the project, the
 * contact's data, the campaign's content, the suppression list and the subscription, in the claiming statement.
 */
export const CLAIM_RETURNING = sql`returning e.*, p.previous_status,
      (select disabled from projects where id = e.project_id) as project_disabled,
      (select signing_key from projects where id = e.project_id) as signing_key,
      (select data from contacts where id = e.contact_id) as contact_data,
      -- An A/B test's email carries its variant's subject and body; what a variant leaves out is the campaign's.
      (select json_build_object(
          'subject', coalesce(k.ab_test -> 'variants' -> (e.variant::int) ->> 'subject', k.subject),
          'body', coalesce(k.ab_test -> 'variants' -> (e.variant::int) ->> 'body', k.body),
          'status', k.status)
        from campaigns k where k.id = e.campaign_id) as campaign,
      ${suppressionCauseSql({
        projectId: sql`e.project_id`,
        emailKey: recipientKeySql('e'),
        marketing: sql`e.marketing`,
        subscribed: sql`(select c.subscribed from contacts c where c.id = e.contact_id)`,
        topicSubscribed: sql`(case when e.topic_id is not null and e.contact_id is not null then ${topicSubscribedSql(sql`e.project_id`, sql`e.contact_id`, sql`e.topic_id`)} end)`,
      })} as suppression,
      (select json_build_object('domain', d.tracking_domain, 'connection', d.tracking_connection) from domains d
        where e.tracking and d.domain = lower(split_part(e.from_email, '@', 2)) and d.project_id = e.project_id
          and d.tracking_ready_at is not null and d.tracking_connection is not null) as tracking_target`;

/** A row returned through {@link CLAIM_RETURNING} as a {@link ClaimedEmail}. */
export function toClaimedEmail(hit: Record<string, unknown>): ClaimedEmail {
  const {
    previous_status,
    project_disabled,
    signing_key,
    contact_data,
    campaign,
    suppression,
    tracking_target,
    ...row
  } = hit;
  return {
    ...(camelCase(row) as EmailRecord),
    previousStatus: previous_status as EmailStatus,
    projectDisabled: project_disabled === true,
    signingKey: signing_key as Buffer,
    contactData: (contact_data as Record<string, unknown> | null) ?? null,
    campaign: (campaign as ClaimedEmail['campaign']) ?? null,
    suppression: (suppression as SuppressionCause | null) ?? null,
    trackingTarget: (tracking_target as ClaimedEmail['trackingTarget']) ?? null,
  };
}

/** How a claimed email leaves `sending` (`finishEmails`). */
export type FinishOutcome =
  | {
      status: 'sent';
      messageId: string;
      renderedSubject: string;
      /** The delivery connection whose SES accepted it (`emails.ses_connection`); unset: left as it was. */
      connection?: string;
    }
  | { status: 'queued'; reason: string; retryInMs?: number }
  | { status: 'failed'; reason: string; failureKind: 'transient' | 'permanent' }
  | { status: 'cancelled'; reason: string }
  | { status: 'suppressed'; reason: string; cause: SuppressionCause };

/** The timeline entry of a finish: `deferred` for a move back to `queued`, else the new status. */
export function finishEvent(outcome: FinishOutcome): { eventType: string; eventData: Record<string, unknown> } {
  return {
    eventType: outcome.status === 'queued' ? 'deferred' : outcome.status,
    eventData:
      outcome.status === 'sent'
        ? { messageId: outcome.messageId }
        : {
            reason: outcome.reason,
            ...('retryInMs' in outcome && outcome.retryInMs !== undefined ? { retryInMs: outcome.retryInMs } : {}),
            ...('cause' in outcome ? { cause: outcome.cause } : {}),
          },
  };
}
