import { boolean, index, jsonb, pgTable, text, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
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
    projectId: uuid('project_id').notNull().references(() => projects.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    emailKey: text('email_key').notNull(),
    subscribed: boolean('subscribed').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull().default({}),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('contacts_project_email_key_idx').on(t.projectId, t.emailKey),
    index('contacts_project_id_idx').on(t.projectId, t.id),
  ],
);
