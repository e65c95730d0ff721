import { check, index, integer, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn } from './columns';
import { projects } from './projects';
import { contacts } from './contacts';

/** Amazon SES receipt verdicts (`receipt.spamVerdict.status`, …): `PASS`, `FAIL`, `GRAY`, `PROCESSING_FAILED`, or null when SES gave none. */
export interface InboundVerdicts {
  spam: string | null;
  virus: string | null;
  spf: string | null;
  dkim: string | null;
  dmarc: string | null;
}

/** One attachment of a received message, as listed (its bytes stay in the raw message). */
export interface InboundAttachmentInfo {
  filename: string | null;
  contentType: string;
  /** Decoded size (bytes). */
  size: number;
  contentId: string | null;
}

/** `received`: parsed and stored; `failed`: kept as an error record (the message could not be fetched or parsed). */
export const INBOUND_STATUSES = ['received', 'failed'] as const;
export type InboundStatus = (typeof INBOUND_STATUSES)[number];

/**
 * A message received through Amazon SES receiving (a receipt rule's SNS action with the content inline, or its S3
 * action), for the project whose inbound-enabled domain it was addressed to. One row per (project, SES message):
 * an SNS redelivery changes nothing.
 */
export const inboundEmails = pgTable(
  'inbound_emails',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    /** SES's id of the received message (`mail.messageId`; also the S3 object key of the S3 action). */
    sesMessageId: text('ses_message_id').notNull(),
    status: text('status').notNull().$type<InboundStatus>(),
    /** Why a `failed` message could not be read (fetch or parse), for the operator. */
    error: text('error'),
    /** The `Message-ID` header (with brackets). */
    messageId: text('message_id'),
    fromEmail: text('from_email'),
    fromName: text('from_name'),
    /** Addresses of the `To` and `Cc` headers. */
    to: jsonb('to').$type<string[]>().notNull().default([]),
    cc: jsonb('cc').$type<string[]>().notNull().default([]),
    /** The envelope recipients of this project (SES `receipt.recipients` on its inbound domains). */
    recipients: jsonb('recipients').$type<string[]>().notNull().default([]),
    subject: text('subject'),
    text: text('text'),
    html: text('html'),
    /** Header fields in order, `{ name, value }` (values as received, unfolded). */
    headers: jsonb('headers').$type<{ name: string; value: string }[]>().notNull().default([]),
    attachments: jsonb('attachments').$type<InboundAttachmentInfo[]>().notNull().default([]),
    /** The message as received (RFC 5322 bytes); null for an error record without content, or once retention expired it. */
    raw: bytea('raw'),
    size: integer('size'),
    verdicts: jsonb('verdicts').$type<InboundVerdicts>().notNull(),
    /** The sender's contact in this project, when there is one. */
    contactId: uuid('contact_id').references(() => contacts.id, { onDelete: 'set null' }),
    /** The email of ours it answers (`In-Reply-To`/`References` naming one of our Message-IDs). No foreign key: `emails` is partitioned. */
    inReplyToEmailId: uuid('in_reply_to_email_id'),
    /** When SES received it (`mail.timestamp`). */
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull(),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('inbound_emails_ses_message_idx').on(t.projectId, t.sesMessageId),
    // The list (keyset, newest first) and the retention pass (per project, oldest first).
    index('inbound_emails_project_idx').on(t.projectId, t.id),
    index('inbound_emails_retention_idx').on(t.projectId, t.receivedAt),
    index('inbound_emails_contact_idx')
      .on(t.contactId)
      .where(sql`${t.contactId} is not null`),
    check('inbound_emails_status_check', sql.raw(`status in (${INBOUND_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
  ],
);
