import { bigint, index, jsonb, pgTable, primaryKey, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn } from './columns';
import { projects } from './projects';
import { campaigns } from './campaigns';
import { emails } from './emails';

/** The campaign key of reputation counts of transactional mail (outside campaigns: `/v1/send`, workflows, relay). */
export const NO_CAMPAIGN = '00000000-0000-0000-0000-000000000000';

/**
 * The campaign key of reputation counts of marketing mail outside campaigns (MARKETING templates, marketing
 * workflow mail): the marketing stream is every key but {@link NO_CAMPAIGN}. Counts from before the streams were
 * kept all went under {@link NO_CAMPAIGN}.
 */
export const MARKETING_NO_CAMPAIGN = '00000000-0000-0000-0000-000000000001';

/**
 * Live sending outcomes per project, hour, sending domain and campaign: the source of `GET /reputation`, the
 * campaign guardrails and the local 24-hour quota count. `sent` is counted when SES accepts an email; the others
 * when SES reports them. Test emails are never counted. `campaignId` is {@link NO_CAMPAIGN} (transactional) or
 * {@link MARKETING_NO_CAMPAIGN} (marketing) outside campaigns.
 */
export const reputationCounts = pgTable(
  'reputation_counts',
  {
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    /** Start of the UTC hour the outcomes happened in. */
    hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull(),
    /** The sending domain: the part of the From address after `@`, lower case. */
    domain: text('domain').notNull(),
    campaignId: uuid('campaign_id').notNull(),
    sent: bigint('sent', { mode: 'number' }).notNull().default(0),
    delivered: bigint('delivered', { mode: 'number' }).notNull().default(0),
    hardBounces: bigint('hard_bounces', { mode: 'number' }).notNull().default(0),
    softBounces: bigint('soft_bounces', { mode: 'number' }).notNull().default(0),
    complaints: bigint('complaints', { mode: 'number' }).notNull().default(0),
  },
  (t) => [
    primaryKey({ columns: [t.projectId, t.hour, t.domain, t.campaignId] }),
    index('reputation_counts_campaign_idx')
      .on(t.campaignId)
      .where(sql`${t.campaignId} <> '00000000-0000-0000-0000-000000000000'::uuid`),
    index('reputation_counts_hour_idx').on(t.hour),
  ],
);

/**
 * {@link reputationCounts} again, per email tag: each outcome of an email carrying tags is counted once under
 * each of its tags (at most 10), with the same hour, domain and campaign keys, so `GET /reputation?tag=name:value`
 * reads the same figures for the emails carrying that tag by the primary key's prefix. Untagged mail writes
 * nothing here. Test emails are never counted.
 */
export const reputationTagCounts = pgTable(
  'reputation_tag_counts',
  {
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    tagName: text('tag_name').notNull(),
    tagValue: text('tag_value').notNull(),
    /** Start of the UTC hour the outcomes happened in. */
    hour: timestamp('hour', { withTimezone: true, mode: 'date' }).notNull(),
    domain: text('domain').notNull(),
    campaignId: uuid('campaign_id').notNull(),
    sent: bigint('sent', { mode: 'number' }).notNull().default(0),
    delivered: bigint('delivered', { mode: 'number' }).notNull().default(0),
    hardBounces: bigint('hard_bounces', { mode: 'number' }).notNull().default(0),
    softBounces: bigint('soft_bounces', { mode: 'number' }).notNull().default(0),
    complaints: bigint('complaints', { mode: 'number' }).notNull().default(0),
  },
  (t) => [
    primaryKey({
      name: 'reputation_tag_counts_pkey',
      columns: [t.projectId, t.tagName, t.tagValue, t.hour, t.domain, t.campaignId],
    }),
  ],
);

/** A campaign's timeline: paused (with the reason and figures), resumed, quota waits, retry-failed. */
export const campaignEvents = pgTable(
  'campaign_events',
  {
    id: idColumn(),
    campaignId: uuid('campaign_id')
      .notNull()
      .references(() => campaigns.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull().default({}),
    createdAt: createdAt(),
  },
  (t) => [index('campaign_events_campaign_idx').on(t.campaignId, t.id)],
);

/**
 * The sink of test mode: the exact MIME message a test email would have sent to SES (`GET /emails/{id}/raw`).
 * Live emails keep no copy. Kept `TEST_MESSAGE_RETENTION_HOURS` after they were stored (the worker's
 * `test-messages` maintenance task deletes older ones).
 */
export const testMessages = pgTable(
  'test_messages',
  {
    emailId: uuid('email_id')
      .primaryKey()
      .references(() => emails.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    raw: bytea('raw').notNull(),
    createdAt: createdAt(),
  },
  // created_at: the retention pass (TEST_MESSAGE_RETENTION_HOURS) deletes the oldest in batches without a table scan.
  (t) => [index('test_messages_project_idx').on(t.projectId), index('test_messages_created_idx').on(t.createdAt)],
);
