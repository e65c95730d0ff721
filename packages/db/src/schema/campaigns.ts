import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  smallint,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { segments } from './segments';
import { templates } from './templates';
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
 * Phases of a campaign's A/B test while it is SENDING (or PAUSED): TESTING (the test share gets the variants),
 * WAITING (every test email is final; the winner is chosen at `abDecideAt`), WINNER (the winner goes to the rest of
 * the audience). Null for a campaign without an A/B test, and before it starts.
 */
export const AB_PHASES = ['TESTING', 'WAITING', 'WINNER'] as const;
export type AbPhase = (typeof AB_PHASES)[number];
/** What an A/B test's winner is chosen by: opens, clicks, or a custom event (`/v1/track`) after the email was sent. */
export const AB_METRICS = ['opens', 'clicks', 'event'] as const;
export type AbMetric = (typeof AB_METRICS)[number];

/** One variant of an A/B test: its subject and body (a template's are copied in when the campaign is stored). */
export interface AbVariant {
  subject: string | null;
  body: string | null;
  /** The template the content was copied from, if any. */
  templateId: string | null;
}

/** A campaign's A/B test settings (`campaigns.ab_test`). */
export interface AbTestSettings {
  variants: AbVariant[];
  /** Percent (1–100) of the audience that gets the variants. */
  testShare: number;
  metric: AbMetric;
  /** The custom event's name when `metric` is `event`. */
  event: string | null;
  /** Seconds between the last test email's final state and the automatic choice. */
  waitSeconds: number;
}

/** The figures of one variant at the decision. */
export interface AbVariantFigures {
  variant: number;
  sent: number;
  conversions: number;
  rate: number;
}

/** How a winner was chosen, with the figures it was chosen on (`campaigns.ab_decision`). */
export interface AbDecision {
  winner: number;
  by: 'auto' | 'manual';
  /** `metric` for the highest rate; `choice` when a specific variant was picked by hand. */
  basis: 'metric' | 'choice';
  decidedAt: string;
  metric: AbMetric;
  event: string | null;
  variants: AbVariantFigures[];
  /** Two-sided p-value of the two-proportion z-test between the top two; null when it cannot be computed. */
  pValue: number | null;
  /** The z statistic of that test; null with the p-value. */
  z: number | null;
  /** True when p ≥ 0.05 (or unknown): the difference is within noise; the higher rate was still picked. */
  withinNoise: boolean;
  note: string | null;
}

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
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    fromEmail: text('from_email').notNull(),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    /** Open and click tracking of this campaign's mail; null: the project's `tracking_mode` decides. */
    tracking: boolean('tracking'),
    /**
     * The template the content comes from (null: written on the campaign itself). Its subject and body are copied
     * here when the campaign is created or edited, and again when it is sent or scheduled.
     */
    templateId: uuid('template_id').references(() => templates.id, { onDelete: 'set null' }),
    /** The pinned version of {@link templateId}; null follows the latest published version until the campaign is sent. */
    templateVersion: integer('template_version'),
    /** The template version whose content `subject` and `body` hold now (recorded on each of its emails). */
    contentVersion: integer('content_version'),
    audienceType: text('audience_type').notNull().$type<AudienceType>(),
    segmentId: uuid('segment_id').references(() => segments.id, { onDelete: 'set null' }),
    audienceFilter: jsonb('audience_filter').$type<unknown>(),
    /** The topic the campaign is about: it reaches only contacts subscribed to it. No foreign key: a deleted topic reaches nobody. */
    topicId: uuid('topic_id'),
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
    /** Contacts of the audience left out by the fan-out because they were snoozed (`contacts.snoozed_until` ahead). */
    skippedSnoozed: bigint('skipped_snoozed', { mode: 'number' }).notNull().default(0),
    /** Why and when it paused, and the figures that made it pause (rates, sample, quota); null unless PAUSED. */
    pausedReason: text('paused_reason').$type<CampaignPauseReason>(),
    pausedAt: timestamp('paused_at', { withTimezone: true, mode: 'date' }),
    pauseDetails: jsonb('pause_details').$type<Record<string, unknown>>(),
    /** Sent with a test key: its emails go to the sink, never to SES. */
    test: boolean('test').notNull().default(false),
    /** When `retry-failed` re-queued its transiently failed emails (it runs once per campaign). */
    retryFailedAt: timestamp('retry_failed_at', { withTimezone: true, mode: 'date' }),
    /** A/B test settings (docs/guides/campaigns.md, A/B tests); null for a campaign without one. */
    abTest: jsonb('ab_test').$type<AbTestSettings>(),
    /** Where the A/B test is ({@link AB_PHASES}); set when the campaign starts SENDING. */
    abPhase: text('ab_phase').$type<AbPhase>(),
    /** When the winner is chosen automatically (set on entering WAITING); the campaign job sleeps until then. */
    abDecideAt: timestamp('ab_decide_at', { withTimezone: true, mode: 'date' }),
    /** The winning variant's index, once chosen (automatically or by hand). */
    abWinner: smallint('ab_winner'),
    /** The figures the winner was chosen on. */
    abDecision: jsonb('ab_decision').$type<AbDecision>(),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('campaigns_project_id_idx').on(t.projectId, t.id),
    index('campaigns_project_status_idx').on(t.projectId, t.status, t.id),
    index('campaigns_segment_idx')
      .on(t.segmentId)
      .where(sql`${t.segmentId} is not null`),
    // The reconciler's scan: campaigns that should have a live campaign job.
    index('campaigns_active_idx')
      .on(t.id)
      .where(sql`${t.status} in ('SCHEDULED', 'SENDING')`),
    // Campaigns waiting for the SES quota to free (the quota watcher resumes them).
    index('campaigns_paused_idx')
      .on(t.pausedReason, t.id)
      .where(sql`${t.status} = 'PAUSED'`),
    check('campaigns_status_check', sql.raw(`status in (${CAMPAIGN_STATUSES.map((s) => `'${s}'`).join(', ')})`)),
    check(
      'campaigns_pause_reason_check',
      sql.raw(`paused_reason is null or paused_reason in (${CAMPAIGN_PAUSE_REASONS.map((s) => `'${s}'`).join(', ')})`),
    ),
    check(
      'campaigns_ab_phase_check',
      sql.raw(`ab_phase is null or ab_phase in (${AB_PHASES.map((s) => `'${s}'`).join(', ')})`),
    ),
    check('campaigns_audience_check', sql`${t.audienceType} in ('ALL', 'SEGMENT', 'FILTERED')`),
  ],
);
