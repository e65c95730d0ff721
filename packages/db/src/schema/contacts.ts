import {
  bigint,
  boolean,
  index,
  jsonb,
  pgTable,
  pgView,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';

/**
 * A contact: one per (project, address). `email` keeps the address as given with the domain lower-cased;
 * `emailKey` is the case-insensitive identity (lower-cased whole address) the unique index and upserts use.
 */
export const contacts = pgTable(
  'contacts',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    emailKey: text('email_key').notNull(),
    subscribed: boolean('subscribed').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull().default({}),
    /**
     * Marketing mail is held back until this instant (a "snooze" or pause); `null`: not snoozed. A past value is an
     * expired snooze the worker's `snoozes` pass has not cleared yet (it clears it and records `contact.unsnoozed`).
     */
    snoozedUntil: timestamp('snoozed_until', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('contacts_project_email_key_idx').on(t.projectId, t.emailKey),
    index('contacts_project_id_idx').on(t.projectId, t.id),
    // `GET /contacts?subscribed=false` pages the (usually few) unsubscribed contacts without scanning the rest.
    index('contacts_project_subscribed_idx').on(t.projectId, t.subscribed, t.id),
    // `GET /contacts?search=`: substring match on the address (pg_trgm), intersected with the project (btree_gin).
    index('contacts_email_trgm_idx').using('gin', t.projectId, t.emailKey.op('gin_trgm_ops')),
    // Segment filters on `data.<path> equals` compile to containment (`data @> …`), served by this index.
    // The worker's expiry pass finds snoozes that ended without scanning the contacts that have none.
    index('contacts_snoozed_until_idx')
      .on(t.snoozedUntil)
      .where(sql`${t.snoozedUntil} is not null`),
    index('contacts_data_idx').using('gin', t.projectId, t.data.op('jsonb_path_ops')),
  ],
);

/**
 * Contact counts per project, so `total` on `GET /contacts` never counts millions of rows. Statement-level
 * triggers on `contacts` append their changes to {@link contactStatDeltas} (migration `0017_counter_deltas`); the
 * worker folds those into this row about once a second. Readers add the pending deltas, so a count is exact at
 * every moment (see `contactTotals`).
 */
export const contactStats = pgTable('contact_stats', {
  projectId: uuid('project_id')
    .primaryKey()
    .references(() => projects.id, { onDelete: 'cascade' }),
  total: bigint('total', { mode: 'number' }).notNull().default(0),
  subscribed: bigint('subscribed', { mode: 'number' }).notNull().default(0),
});

/**
 * Pending changes to {@link contactStats}: one row per writing statement and project (no row is ever updated, so
 * concurrent writers of one project never wait on each other), folded into `contact_stats` by `foldCounterDeltas`.
 * No foreign key: a delta of a deleted project is dropped by the fold.
 */
export const contactStatDeltas = pgTable(
  'contact_stat_deltas',
  {
    projectId: uuid('project_id').notNull(),
    total: bigint('total', { mode: 'number' }).notNull(),
    subscribed: bigint('subscribed', { mode: 'number' }).notNull(),
  },
  (t) => [index('contact_stat_deltas_project_idx').on(t.projectId)],
);

/**
 * Contact counts as of now (view of migration `0017_counter_deltas`): {@link contactStats} plus the deltas not yet
 * folded. Read this, not `contact_stats`, wherever the count must be exact.
 */
export const contactStatsNow = pgView('contact_stats_now', {
  projectId: uuid('project_id').notNull(),
  total: bigint('total', { mode: 'number' }).notNull(),
  subscribed: bigint('subscribed', { mode: 'number' }).notNull(),
}).existing();
