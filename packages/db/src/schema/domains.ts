import { boolean, index, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { createdAt, idColumn } from './columns';
import { projects } from './projects';

/** A sending domain. A domain belongs to at most one project; `from` addresses must be on a verified one. */
export const domains = pgTable(
  'domains',
  {
    id: idColumn(),
    projectId: uuid('project_id').notNull().references(() => projects.id, { onDelete: 'cascade' }),
    domain: text('domain').notNull(),
    verified: boolean('verified').notNull().default(false),
    verifiedAt: timestamp('verified_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
  },
  (t) => [uniqueIndex('domains_domain_idx').on(t.domain), index('domains_project_idx').on(t.projectId)],
);
