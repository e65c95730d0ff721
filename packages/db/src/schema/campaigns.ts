import { bigint, boolean, check, index, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { segments } from './segments';

/** Campaign states (API.md): DRAFT → SCHEDULED → SENDING → SENT; CANCELLED from the first three; FAILED when it cannot start. */
export const CAMPAIGN_STATUSES = ['DRAFT', 'SCHEDULED', 'SENDING', 'SENT', 'CANCELLED', 'FAILED'] as const;
export type CampaignStatus = (typeof CAMPAIGN_STATUSES)[number];
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
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('campaigns_project_id_idx').on(t.projectId, t.id),
    index('campaigns_project_status_idx').on(t.projectId, t.status, t.id),
    index('campaigns_segment_idx').on(t.segmentId).where(sql`${t.segmentId} is not null`),
    // The reconciler's scan: campaigns that should have a live campaign job.
    index('campaigns_active_idx').on(t.id).where(sql`${t.status} in ('SCHEDULED', 'SENDING')`),
    check('campaigns_status_check', sql.raw(`status in (${CAMPAIGN_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
    check('campaigns_audience_check', sql`${t.audienceType} in ('ALL', 'SEGMENT', 'FILTERED')`),
  ],
);
