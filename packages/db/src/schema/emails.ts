import { boolean, check, index, integer, jsonb, pgTable, smallint, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { contacts } from './contacts';
import { templates } from './templates';
import { campaigns } from './campaigns';
import { workflowExecutions, workflowStepRuns } from './workflows';
import type { EmailTag } from '@mailroom/platform/email-tags';

/**
 * Email statuses. `queued → sending → sent` is the send path (`scheduled → sending` for an email given a
 * `scheduledAt`, once that time has come); `delivered`, `opened`, `clicked`, `bounced`, `complained` come from SES
 * events; `failed`, `suppressed`, `cancelled` are final without delivery.
 */
export const EMAIL_STATUSES = [
  'scheduled',
  'queued',
  'sending',
  'sent',
  'delivered',
  'opened',
  'clicked',
  'bounced',
  'complained',
  'failed',
  'suppressed',
  'cancelled',
] as const;
export type EmailStatus = (typeof EMAIL_STATUSES)[number];

/** Where an email came from; decides its queue priority lane. */
export type EmailSource = 'transactional' | 'workflow' | 'campaign';

/** An attachment, stored once per request and referenced by each recipient's email row. */
export const attachments = pgTable(
  'attachments',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    filename: text('filename').notNull(),
    contentType: text('content_type').notNull(),
    /** Content-ID (RFC 2392, without angle brackets): the HTML shows it as `cid:<content id>` (an inline image). */
    contentId: text('content_id'),
    /** Content-Disposition: `inline` or `attachment` (null: `inline` with a `content_id`, else `attachment`). */
    disposition: text('disposition').$type<'inline' | 'attachment'>(),
    size: integer('size').notNull(),
    content: bytea('content').notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    index('attachments_project_idx').on(t.projectId),
    index('attachments_retention_idx').on(t.projectId, t.createdAt),
  ],
);

/**
 * One row per recipient. The row is written (status `queued`) before any job exists, so Postgres is the source
 * of truth: the reconciler re-enqueues queued rows whose job was lost. `subject`/`body` are template sources,
 * rendered in the worker at send time against the contact's data and `variables`.
 */
export const emails = pgTable(
  'emails',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    contactId: uuid('contact_id').references(() => contacts.id, { onDelete: 'set null' }),
    templateId: uuid('template_id').references(() => templates.id, { onDelete: 'set null' }),
    /** The version of the template its content came from (`template_versions.version`); null without a template. */
    templateVersion: integer('template_version'),
    /** Set for a campaign's recipients: subject, body and format are then read from the campaign. */
    campaignId: uuid('campaign_id').references(() => campaigns.id, { onDelete: 'cascade' }),
    /**
     * For an email of a campaign with an A/B test: the index (0-based) of the variant whose content it carries (a
     * test-group member's assigned variant, or the winner for the rest of the audience); null otherwise.
     */
    variant: smallint('variant'),
    /** Set for a workflow's email: the execution, and the step run that sent it (at most one email per run). */
    workflowExecutionId: uuid('workflow_execution_id').references(() => workflowExecutions.id, {
      onDelete: 'set null',
    }),
    workflowStepRunId: uuid('workflow_step_run_id').references(() => workflowStepRuns.id, { onDelete: 'set null' }),
    /** Marketing mail (campaigns, MARKETING templates): carries the unsubscribe link and List-Unsubscribe. */
    marketing: boolean('marketing').notNull().default(false),
    /**
     * The topic of a marketing email (its campaign's, its workflow step's): it is sent only while the contact is
     * subscribed to the topic, and its unsubscribe link and one-click unsubscribe leave that topic only.
     */
    topicId: uuid('topic_id'),
    source: text('source').notNull().$type<EmailSource>(),
    /**
     * Open and click tracking, decided when the email is accepted (the send's `tracking`, else its template's or
     * campaign's, else the project's `tracking_mode`): with `marketing` (the stream) it picks the SES configuration
     * set, so a retry goes through the same one.
     */
    tracking: boolean('tracking').notNull().default(true),
    toEmail: text('to_email').notNull(),
    toName: text('to_name'),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    subject: text('subject'),
    body: text('body'),
    /** `mime`: a message relayed over SMTP, sent as stored (its one attachment, `message/rfc822`); `body` is empty. */
    bodyFormat: text('body_format').$type<'html' | 'markdown' | 'mime'>(),
    variables: jsonb('variables').$type<Record<string, unknown>>().notNull().default({}),
    headers: jsonb('headers').$type<Record<string, string>>().notNull().default({}),
    /**
     * The sender's `{ name, value }` tags (`@mailroom/platform/email-tags`), null when none: echoed in webhook payloads,
     * passed to SES as message tags, counted per tag in `reputation_tag_counts`. A campaign's are copied from it.
     */
    tags: jsonb('tags').$type<EmailTag[]>(),
    attachmentIds: uuid('attachment_ids')
      .array()
      .notNull()
      .default(sql`'{}'::uuid[]`),
    status: text('status').notNull().$type<EmailStatus>(),
    renderedSubject: text('rendered_subject'),
    messageId: text('message_id'),
    /** The delivery connection (`SES_CONNECTIONS` name) whose SES accepted this email (set with `sent`). */
    sesConnection: text('ses_connection'),
    error: text('error'),
    attempts: integer('attempts').notNull().default(0),
    claimToken: uuid('claim_token'),
    claimedAt: timestamp('claimed_at', { withTimezone: true, mode: 'date' }),
    /**
     * When a scheduled email is due (`POST /v1/send` `scheduledAt`): it stays `scheduled` until then, and no claim
     * takes it earlier. Kept once it is sent, as the time it was scheduled for.
     */
    scheduledAt: timestamp('scheduled_at', { withTimezone: true, mode: 'date' }),
    sentAt: timestamp('sent_at', { withTimezone: true, mode: 'date' }),
    /** First SES Delivery, Open and Click events (SES event time); counts are atomic increments per event. */
    deliveredAt: timestamp('delivered_at', { withTimezone: true, mode: 'date' }),
    openedAt: timestamp('opened_at', { withTimezone: true, mode: 'date' }),
    clickedAt: timestamp('clicked_at', { withTimezone: true, mode: 'date' }),
    openCount: integer('open_count').notNull().default(0),
    clickCount: integer('click_count').notNull().default(0),
    /** Made with a test key: delivered to the sink (`test_messages`), never to SES; never counted in reputation or quota. */
    test: boolean('test').notNull().default(false),
    /** For a `bounced` email: SES `Permanent` → `hard`, `Transient`/`Undetermined` → `soft`. */
    bounceType: text('bounce_type').$type<'hard' | 'soft'>(),
    /** For a `failed` email: `transient` (attempts ran out on a retryable error) or `permanent` (SES refused it). */
    failureKind: text('failure_kind').$type<'transient' | 'permanent'>(),
    /** When `retry-failed` put this email back in the queue (at most once). */
    retriedAt: timestamp('retried_at', { withTimezone: true, mode: 'date' }),
    /**
     * When the retention pass removed the content (`body`, `variables`, `headers`, attachments) of this final email
     * (`RETENTION_EMAIL_CONTENT_DAYS`), or when the contact's erasure did; the metadata stays.
     */
    contentExpiredAt: timestamp('content_expired_at', { withTimezone: true, mode: 'date' }),
    /** When the recipient's personal data was erased (`DELETE /contacts/{id}`): address, name, subject and content. */
    erasedAt: timestamp('erased_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('emails_project_id_idx').on(t.projectId, t.id),
    index('emails_contact_idx').on(t.contactId),
    // The reconciler's scan: only rows not yet handed to SES, in creation order.
    index('emails_pending_idx')
      .on(t.id)
      .where(sql`${t.status} in ('queued', 'sending')`),
    // SES feedback finds its email by SES message id (unique by SES; a partitioned table cannot hold a unique
    // index without the partition key, so this one is plain).
    // The reconciler's look at scheduled emails due before its next pass (`dueScheduledEmails`).
    index('emails_scheduled_idx')
      .on(t.scheduledAt)
      .where(sql`${t.status} = 'scheduled'`),
    index('emails_message_id_idx')
      .on(t.messageId)
      .where(sql`${t.messageId} is not null`),
    // One email per contact per campaign: a unique index on (campaign_id, contact_id) of each month partition,
    // `emails_campaign_contact_key_<partition>` (migration 0024; a partitioned table cannot hold it, so it is made
    // with each partition by `mailroom_month_partition`). A campaign's emails all take the month of its start.
    // One email per SEND_EMAIL step run is the primary key too (the id is derived from the run's id); this index
    // serves the `set null` of a deleted step run.
    index('emails_workflow_step_run_idx')
      .on(t.workflowStepRunId)
      .where(sql`${t.workflowStepRunId} is not null`),
    // Campaign stats (counts by status, the send-rate window of the ETA, delivered/opened/clicked) from the index
    // alone (migration 0023): a read of the campaign's emails only, however many other emails share their month.
    index('emails_campaign_status_idx')
      .on(t.campaignId, t.status, t.sentAt, t.deliveredAt, t.openedAt, t.clickedAt)
      .where(sql`${t.campaignId} is not null`),
    // The campaign feeder's window: a campaign's emails not yet handed to SES, in audience (contact id) order.
    index('emails_campaign_pending_idx')
      .on(t.campaignId, t.contactId)
      .where(sql`${t.campaignId} is not null and ${t.status} in ('queued', 'sending')`),
    // The retention pass: final emails whose content is still kept, per project, oldest first.
    index('emails_content_retention_idx')
      .on(t.projectId, t.createdAt)
      .where(sql`${t.contentExpiredAt} is null`),
    // The retention pass: emails deleted with their timeline (campaign emails stay while their campaign exists).
    index('emails_retention_idx')
      .on(t.projectId, t.createdAt)
      .where(sql`${t.campaignId} is null`),
    // The `set null` of a deleted workflow execution finds its emails without a scan.
    index('emails_workflow_execution_idx')
      .on(t.workflowExecutionId)
      .where(sql`${t.workflowExecutionId} is not null`),
    check(
      'emails_content_check',
      sql`${t.campaignId} is not null or ${t.contentExpiredAt} is not null or (${t.subject} is not null and ${t.body} is not null and ${t.bodyFormat} is not null)`,
    ),
    check('emails_status_check', sql.raw(`status in (${EMAIL_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
    check('emails_bounce_type_check', sql`${t.bounceType} is null or ${t.bounceType} in ('hard', 'soft')`),
    check('emails_failure_kind_check', sql`${t.failureKind} is null or ${t.failureKind} in ('transient', 'permanent')`),
    check('emails_source_check', sql`${t.source} in ('transactional', 'workflow', 'campaign')`),
  ],
);

/**
 * The timeline of an email: queued, sent, deferred, failed, cancelled, and (from SES) delivery events.
 *
 * `email_id` references `emails.id` through statement-level triggers (migration `0022_partition_references`), not
 * a foreign key: a foreign key to a partitioned table costs a plan start over every month partition for each row
 * it checks or cascades to. The triggers check a statement's rows at once (`foreign_key_violation`, 23503) and
 * delete an email's timeline with it.
 */
export const emailEvents = pgTable(
  'email_events',
  {
    id: idColumn(),
    emailId: uuid('email_id').notNull(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>(),
    createdAt: createdAt(),
  },
  (t) => [index('email_events_email_idx').on(t.emailId, t.id)],
);
