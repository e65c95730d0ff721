import { bigint, boolean, check, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { segments } from './segments';
import type { EmailTag } from '@mailroom/platform/email-tags';

/**
 * Campaign states (docs/api/overview.md): DRAFT → SCHEDULED → SENDING → SENT; CANCELLED from DRAFT, SCHEDULED, SENDING
 * and PAUSED; FAILED when it cannot start. PAUSED is entered only from SENDING (a guardrail or the SES quota) and left
 * by resume (back to SENDING) or cancel.
 */
export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'PAUSED', 'SENT', 'CANCELLED', 'FAILED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
/** Why a campaign paused: its hard-bounce rate, its complaint rate, or the SES account's 24-hour quota. */
export const CAMPAIGN_PAUSE_REASONS = ['bounce_rate', 'complaint_rate', 'quota'] as const;
export type CampaignPauseReason = (typeof CAMPAIGN_PAUSE_REASONS)[number];
export type AudienceType = 'ALL' | 'SEGMENT' | 'FILTERED';

/**
 * A marketing campaign. Its subject and body are stored once, here: recipients' email rows point at the campaign
 * and are rendered at send time.
 *
 * Fan-out state: `fanoutCursor` is the last contact id turned into an email row (keyset over the audience, in
 * contact id order), `fanoutDone` says the audience is exhausted, `enqueueCursor` is the contact id of the last
 * email handed to the send queue (the queue holds a bounded window of a campaign's jobs, never the whole audience).
 */
export const campaigns = pgTable(
  'campaigns',
  {
    id: idColumn(),
    projectId: uuid('project_id').notNull().references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    audienceType: text('audience_type').notNull().$type<AudienceType>(),
    segmentId: uuid('segment_id').references(() => segments.id, { onDelete: 'set null' }),
    audienceFilter: jsonb('audience_filter').$type<unknown>(),
    /** Tags applied to every email the campaign sends (copied onto each at fan-out); null when none. */
    tags: jsonb('tags').$type<EmailTag[]>(),
    status: text('status').notNull().$type<CampaignStatus>().default('DRAFT'),
    scheduledAt: timestamp('scheduled_at', { withTimezone: true, mode: 'date' }),
    startedAt: timestamp('started_at', { withTimezone: true, mode: 'date' }),
    completedAt: timestamp('completed_at', { withTimezone: true, mode: 'date' }),
    cancelledAt: timestamp('cancelled_at', { withTimezone: true, mode: 'date' }),
    error: text('error'),
    recipients: bigint('recipients', { mode: 'number' }).notNull().default(0),
    fanoutCursor: uuid('fanout_cursor'),
    fanoutDone: boolean('fanout_done').notNull().default(false),
    enqueueCursor: uuid('enqueue_cursor'),
    unsubscribed: bigint('unsubscribed', { mode: 'number' }).notNull().default(0),
    /** Why and when it paused, and the figures that made it pause (rates, sample, quota); null unless PAUSED. */
    pausedReason: text('paused_reason').$type<CampaignPauseReason>(),
    pausedAt: timestamp('paused_at', { withTimezone: true, mode: 'date' }),
    pauseDetails: jsonb('pause_details').$type<Record<string, unknown>>(),
    /** Sent with a test key: its emails go to the sink, never to SES. */
    test: boolean('test').notNull().default(false),
    /** When `retry-failed` re-queued its transiently failed emails (it runs once per campaign). */
    retryFailedAt: timestamp('retry_failed_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('campaigns_project_id_idx').on(t.projectId, t.id),
    index('campaigns_project_status_idx').on(t.projectId, t.status, t.id),
    index('campaigns_segment_idx').on(t.segmentId).where(sql`${t.segmentId} is not null`),
    // The reconciler's scan: campaigns that should have a live campaign job.
    index('campaigns_active_idx').on(t.id).where(sql`${t.status} in ('SCHEDULED', 'SENDING')`),
    // Campaigns waiting for the SES quota to free (the quota watcher resumes them).
    index('campaigns_paused_idx').on(t.pausedReason, t.id).where(sql`${t.status} = 'PAUSED'`),
    check('campaigns_status_check', sql.raw(`status in (${CAMPAIGN_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
    check('campaigns_pause_reason_check', sql.raw(`paused_reason is null or paused_reason in (${CAMPAIGN_PAUSE_REASONS.map((s) => `'${s}'`).join(', ')})`)),
    check('campaigns_audience_check', sql`${t.audienceType} in ('ALL', 'SEGMENT', 'FILTERED')`),
  ],
);
