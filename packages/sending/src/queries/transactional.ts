/**
 * The write of an accepted `POST /v1/send`, in one statement: the recipients' contact upsert, the suppression rule
 * for each (`suppression-rule.ts`: the suppression list, and for marketing email the contact's subscription after
 * this upsert), the email rows (`queued`, `scheduled` when given a time, or `suppressed` with its reason), each email's first timeline entry, and
 * the `email.suppressed` webhook deliveries of the suppressed ones.
 *
 * One statement instead of a transaction of five (upsert, suppression lookup, emails, timeline, webhooks) plus
 * `BEGIN`/`COMMIT`: the same rows, atomically, in one round trip (measured with `npm run bench -- api`: the
 * round trips, each a socket write and a wake-up of Postgres, were most of the request's cost on a 2-core
 * machine). The suppression lookup reads the statement's snapshot, as the separate lookup read its own.
 *
 * The write of a request alone; `transactional-batch.ts` writes several in one statement with the same effect
 * each. This single form stays because a batch of one cost more API CPU per request
 * (docs/decisions/0145-send-write-single-form-kept.md); both embed the one merge rule (`batch-upsert.ts`, through
 * `upsertCtes`) and the one suppression rule (`suppression-rule.ts`).
 *
 * @module
 */
import { trackingSql } from '@mailroom/db/queries/tracking-rule';
import { sql, type SQL } from 'drizzle-orm';
import type { NormalizedEmail } from '@mailroom/platform/address';
import type { EmailTag } from '@mailroom/platform/email-tags';
import type { DbOrTx } from '@mailroom/db/client';
import {
  fromSql,
  mergeInputs,
  upsertCtes,
  type ContactSqlRow,
  type ContactUpsert,
  type UpsertedContact,
} from '@mailroom/contacts/queries/contacts';
import { endpointWants } from '@mailroom/db/queries/webhooks';
import { executeNamed } from '@mailroom/db/queries/named';
import {
  suppressionCauseSql,
  suppressionDataSql,
  suppressionReasonSql,
  type SuppressionCause,
} from '@mailroom/db/queries/suppression-rule';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';

/** One recipient's email. */
export interface TransactionalRecipient {
  /** The email's id (uuid v7, made by the caller: it is also the send job's id). */
  id: string;
  /** The recipient, normalised where it came in; its key finds its contact. */
  email: NormalizedEmail;
  emailKey: string;
  name: string | null;
}

/** What every email of the request shares. */
export interface TransactionalContent {
  templateId: string | null;
  /** The template version the content came from (`templates.version` as read with it); null without a template. */
  templateVersion?: number | null;
  marketing: boolean;
  /** Open and click tracking the send (else its template) asked for; null: the project's `tracking_mode` decides. */
  tracking: boolean | null;
  fromEmail: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  body: string;
  bodyFormat: string;
  variables: Record<string, unknown>;
  headers: Record<string, string>;
  attachmentIds: string[];
  test: boolean;
  /**
   * When to send (a future time, `POST /v1/send` `scheduledAt`): the emails are stored `scheduled` with it instead of
   * `queued`, and their first timeline entry is `scheduled` with `{ scheduledAt }`. Absent or null: send now.
   */
  scheduledAt?: Date | null;
  /** The sender's tags (`@mailroom/platform/email-tags`); null when none. */
  tags: EmailTag[] | null;
}

/** Result of {@link writeTransactional}. */
export interface TransactionalWrite {
  /** Each recipient's contact after the upsert, by email key. */
  contacts: Map<string, UpsertedContact>;
  /** Email keys of the recipients held back (their emails are stored `suppressed`), with why (`suppression-rule.ts`). */
  suppressed: Map<string, SuppressionCause>;
  /** `email.suppressed` deliveries to enqueue once the caller's transaction (if any) commits. */
  deliveries: WebhookDeliveryRef[];
  /** The sender check failed (`senderDomains` given and none verified): nothing was written. */
  senderRefused: boolean;
}

function senderGuard(projectId: string, candidates: string[]): SQL {
  return sql`exists (select 1 from domains d where d.project_id = ${projectId}::uuid and d.verified and lower(d.domain) = any(${sql.param(candidates)}::text[]))`;
}

/** An accepted email's status: `suppressed` (a `cause`), `scheduled` (a time to send at), else `queued`. */
export function emailStatusSql(cause: SQL, scheduledAt: SQL): SQL {
  return sql`(case when ${cause} is not null then 'suppressed' when ${scheduledAt} is not null then 'scheduled' else 'queued' end)`;
}

/** The first timeline entry's data of an email row `em` (with `status`, `scheduled_at`) held back for `cause` or not. */
export function firstEventDataSql(cause: SQL, em: SQL): SQL {
  return sql`coalesce(${suppressionDataSql(cause)}, case when ${em}.status = 'scheduled' then jsonb_build_object('scheduledAt', to_char(${em}.scheduled_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')) end)`;
}

type Row = ContactSqlRow & { suppression: SuppressionCause | null; deliveries: { id: string; generation: number }[] };

/**
 * Upserts the recipients' contacts and stores one email per recipient with its timeline entry, in one statement.
 *
 * @param contacts - the upserts (one per recipient; see `upsertContacts` for the merge rules).
 * @param recipients - distinct by email key, each with a contact in `contacts`.
 * @param webhookTimestamp - the `timestamp` of the `email.suppressed` payloads (ISO 8601).
 * @param senderDomains - when given, the statement also checks the sender, in the same round trip: it writes
 *   only if one of these (lower-case) domains is a verified domain of the project (`senderDomainCandidates`), and
 *   otherwise writes nothing and answers `senderRefused`.
 */
export async function writeTransactional(
  db: DbOrTx,
  projectId: string,
  contacts: ContactUpsert[],
  recipients: TransactionalRecipient[],
  content: TransactionalContent,
  webhookTimestamp: string,
  senderDomains?: string[],
): Promise<TransactionalWrite> {
  const c = content;
  const input = JSON.stringify(
    recipients.map((r) => ({ id: r.id, email_key: r.emailKey, to_email: r.email, to_name: r.name })),
  );
  const testFlag = c.test ? sql`|| '{"test":true}'::jsonb` : sql``;
  const scheduledAt = c.scheduledAt ? c.scheduledAt.toISOString() : null;
  const result = await executeNamed<Row>(
    db,
    sql`
    with ${upsertCtes(projectId, mergeInputs(contacts), c.test, senderDomains ? senderGuard(projectId, senderDomains) : undefined)},
    rcpt as (select * from jsonb_to_recordset(${input}::jsonb) as r(id uuid, email_key text, to_email text, to_name text)),
    held as (
      select r.email_key, ${suppressionCauseSql({ projectId: sql`${projectId}::uuid`, emailKey: sql`r.email_key`, marketing: sql`${c.marketing}::boolean`, subscribed: sql`u.subscribed` })} as cause
      from rcpt r join upserted u on u.email_key = r.email_key
    ),
    em as (
      insert into emails (id, project_id, contact_id, template_id, template_version, source, marketing, tracking, to_email, to_name, from_email, from_name,
        reply_to, subject, body, body_format, variables, headers, attachment_ids, test, tags, status, error, scheduled_at)
      select r.id, ${projectId}::uuid, u.id, ${c.templateId}::uuid, ${c.templateVersion ?? null}::int, 'transactional', ${c.marketing}::boolean,
        ${trackingSql(sql`${projectId}::uuid`, sql`${c.tracking}::boolean`, sql`${c.marketing}::boolean`)}, r.to_email, r.to_name,
        ${c.fromEmail}, ${c.fromName}, ${c.replyTo}, ${c.subject}, ${c.body}, ${c.bodyFormat}, ${JSON.stringify(c.variables)}::jsonb,
        ${JSON.stringify(c.headers)}::jsonb, ${`{${c.attachmentIds.join(',')}}`}::uuid[], ${c.test}::boolean, ${c.tags ? JSON.stringify(c.tags) : null}::jsonb,
        ${emailStatusSql(sql`h.cause`, sql`${scheduledAt}::timestamptz`)},
        'suppressed: ' || ${suppressionReasonSql(sql`h.cause`)}, ${scheduledAt}::timestamptz
      from rcpt r join upserted u on u.email_key = r.email_key join held h on h.email_key = r.email_key
      returning id, contact_id, to_email, from_email, status, scheduled_at, tags
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), em.id, ${projectId}::uuid, em.status, ${firstEventDataSql(sql`h.cause`, sql`em`)}
      from em join rcpt r on r.id = em.id join held h on h.email_key = r.email_key
    ),
    wh as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
      select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, w.id, 'email.suppressed',
        jsonb_build_object('type', 'email.suppressed', 'timestamp', ${webhookTimestamp}::text, 'data',
          jsonb_build_object('emailId', em.id, 'contactId', em.contact_id, 'campaignId', null, 'messageId', null,
            'to', em.to_email, 'from', em.from_email, 'status', 'suppressed', 'tags', coalesce(em.tags, '[]'::jsonb))
          || ${suppressionDataSql(sql`h.cause`)} ${testFlag})
      from em join rcpt r on r.id = em.id join held h on h.email_key = r.email_key
        join webhook_endpoints w on w.project_id = ${projectId}::uuid and ${endpointWants(sql`'email.suppressed'`)}
      where em.status = 'suppressed'
      returning id, generation
    )
    select u.*, h.cause as suppression,
      (select coalesce(jsonb_agg(jsonb_build_object('id', wh.id, 'generation', wh.generation)), '[]'::jsonb) from wh) as deliveries
    from upserted u left join held h on h.email_key = u.email_key
  `,
  );
  // `upserted` answers a row for every recipient, so no row means the guard held nothing back but the sender.
  const out: TransactionalWrite = {
    contacts: new Map(),
    suppressed: new Map(),
    deliveries: [],
    senderRefused: recipients.length > 0 && result.rows.length === 0,
  };
  for (const row of result.rows) {
    out.contacts.set(row.email_key, fromSql(row));
    if (row.suppression) out.suppressed.set(row.email_key, row.suppression);
  }
  out.deliveries = (result.rows[0]?.deliveries ?? []).map((d) => ({ id: d.id, projectId, generation: d.generation }));
  return out;
}
