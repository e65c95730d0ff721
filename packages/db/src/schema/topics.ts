import {
  boolean,
  check,
  index,
  jsonb,
  pgTable,
  primaryKey,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';
import { contacts } from './contacts';

/**
 * A topic's default for a contact that has made no choice: `opt_out` means subscribed unless the contact opted
 * out; `opt_in` means not subscribed until the contact opts in.
 */
export const TOPIC_DEFAULTS = ['opt_in', 'opt_out'] as const;
export type TopicDefault = (typeof TOPIC_DEFAULTS)[number];

/** Whether the preference center shows the topic (`public`) or not (`private`: set by the API only). */
export const TOPIC_VISIBILITIES = ['public', 'private'] as const;
export type TopicVisibility = (typeof TOPIC_VISIBILITIES)[number];

/**
 * A subscription topic of a project ("Product news", "Newsletter"): marketing mail may target one, and then
 * reaches only the contacts subscribed to it (explicitly in {@link contactTopics}, or by `defaultSubscription`).
 */
export const topics = pgTable(
  'topics',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    defaultSubscription: text('default_subscription').notNull().$type<TopicDefault>(),
    visibility: text('visibility').notNull().$type<TopicVisibility>().default('public'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('topics_project_id_idx').on(t.projectId, t.id),
    // Names are unique per project, case-insensitively (imports address a topic by name: `topic:<name>`).
    uniqueIndex('topics_project_name_idx').on(t.projectId, sql`lower(${t.name})`),
    check('topics_default_check', sql`${t.defaultSubscription} in ('opt_in', 'opt_out')`),
    check('topics_visibility_check', sql`${t.visibility} in ('public', 'private')`),
  ],
);

/** A contact's explicit choice for one topic; no row means the topic's default applies. */
export const contactTopics = pgTable(
  'contact_topics',
  {
    contactId: uuid('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    topicId: uuid('topic_id')
      .notNull()
      .references(() => topics.id, { onDelete: 'cascade' }),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    subscribed: boolean('subscribed').notNull(),
    updatedAt: updatedAt(),
  },
  (t) => [
    primaryKey({ columns: [t.contactId, t.topicId] }),
    index('contact_topics_topic_idx').on(t.topicId, t.subscribed),
  ],
);

/**
 * A double opt-in confirmation: made by `POST /contacts` with `doubleOptIn: true`, confirmed through the signed link
 * of the confirmation email (`confirmedAt`, `ip`, `userAgent`: the proof of consent). `topicIds` are the topics it
 * confirms (empty: the global marketing subscription). `createdContact`: the request created the contact, so the
 * expiry pass deletes it when it is never confirmed (otherwise the confirmation is only marked `expiredAt`).
 */
export const contactConfirmations = pgTable(
  'contact_confirmations',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    contactId: uuid('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    topicIds: jsonb('topic_ids').$type<string[]>().notNull().default([]),
    createdContact: boolean('created_contact').notNull().default(false),
    emailId: uuid('email_id'),
    createdAt: createdAt(),
    confirmedAt: timestamp('confirmed_at', { withTimezone: true, mode: 'date' }),
    ip: text('ip'),
    userAgent: text('user_agent'),
    expiredAt: timestamp('expired_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [
    index('contact_confirmations_contact_idx').on(t.contactId, t.id),
    // The expiry pass: pending confirmations, oldest first.
    index('contact_confirmations_pending_idx')
      .on(t.createdAt)
      .where(sql`${t.confirmedAt} is null and ${t.expiredAt} is null`),
  ],
);
