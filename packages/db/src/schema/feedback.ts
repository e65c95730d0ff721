import { check, index, jsonb, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn } from './columns';
import { projects } from './projects';
import { emails } from './emails';

/**
 * Why an address is suppressed: a permanent (hard) bounce, repeated transient (soft) bounces, a complaint, or an
 * operator's decision (`manual`).
 */
export const SUPPRESSION_REASONS = ['hard_bounce', 'soft_bounce', 'complaint', 'manual'] as const;
export type SuppressionReason = (typeof SUPPRESSION_REASONS)[number];

/**
 * The project's suppression list: addresses that are never mailed (transactional, campaign or workflow). One row
 * per (project, address key); `emailKey` is the lower-cased address, as on contacts.
 */
export const suppressions = pgTable(
  'suppressions',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    emailKey: text('email_key').notNull(),
    reason: text('reason').notNull().$type<SuppressionReason>(),
    /** The email whose bounce or complaint caused it (null for manual entries, or once that email is deleted). */
    sourceEmailId: uuid('source_email_id').references(() => emails.id, { onDelete: 'set null' }),
    /** SES's bounce type and subtype, diagnostic code or complaint feedback type; the operator's note. */
    details: jsonb('details').$type<Record<string, unknown>>().notNull().default({}),
    createdAt: createdAt(),
  },
  (t) => [
    uniqueIndex('suppressions_project_email_key_idx').on(t.projectId, t.emailKey),
    index('suppressions_project_id_idx').on(t.projectId, t.id),
    // The `set null` of a deleted email (retention) finds its suppression without a scan.
    index('suppressions_source_email_idx')
      .on(t.sourceEmailId)
      .where(sql`${t.sourceEmailId} is not null`),
    index('suppressions_email_trgm_idx').using('gin', t.projectId, t.emailKey.op('gin_trgm_ops')),
    check('suppressions_reason_check', sql.raw(`reason in (${SUPPRESSION_REASONS.map((s) => `'${s}'`).join(', ')})`)),
  ],
);

/**
 * SNS messages already processed (`POST /webhooks/ses`), by SNS `MessageId`: a redelivered notification changes
 * nothing twice. Written in the same transaction as the message's effects; pruned after the retention window.
 */
export const snsMessages = pgTable(
  'sns_messages',
  {
    messageId: text('message_id').primaryKey(),
    topicArn: text('topic_arn').notNull(),
    type: text('type').notNull(),
    receivedAt: timestamp('received_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('sns_messages_received_idx').on(t.receivedAt)],
);
