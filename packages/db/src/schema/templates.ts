import { boolean, check, index, pgTable, text, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';

export type TemplateType = 'TRANSACTIONAL' | 'MARKETING';

/** A stored email template: subject and HTML body in the template language, with sender defaults. */
export const templates = pgTable(
  'templates',
  {
    id: idColumn(),
    projectId: uuid('project_id').notNull().references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    /** Free text for people (Plunk v2's template `description`); never rendered. */
    description: text('description'),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    type: text('type').notNull().$type<TemplateType>(),
    from: text('from_email'),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    /** Open and click tracking of this template's mail; null: the project's `tracking_mode` decides. */
    tracking: boolean('tracking'),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('templates_project_id_idx').on(t.projectId, t.id),
    check('templates_type_check', sql`${t.type} in ('TRANSACTIONAL', 'MARKETING')`),
  ],
);
