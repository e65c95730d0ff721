import { boolean, check, index, integer, pgTable, text, timestamp, uniqueIndex, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';

export type TemplateType = 'TRANSACTIONAL' | 'MARKETING';

/**
 * A stored email template: subject and HTML body in the template language, with sender defaults. The content
 * columns (`subject`, `body`, `from_email`, `from_name`, `reply_to`) are always those of the live (published)
 * version, number `version`; every reader that follows "latest published" (`/v1/send`, unpinned workflow steps)
 * reads this row alone. History and the draft are {@link templateVersions}.
 */
export const templates = pgTable(
  'templates',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
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
    /** The live version's number (its row in {@link templateVersions}). */
    version: integer('version').notNull().default(1),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('templates_project_id_idx').on(t.projectId, t.id),
    check('templates_type_check', sql`${t.type} in ('TRANSACTIONAL', 'MARKETING')`),
  ],
);

/**
 * One version of a template's content, numbered from 1 per template. A version is published (`published_at` set:
 * it was live from then) or the template's one draft (`published_at` null; at most one per template, by the partial
 * unique index). A published version never changes, so a campaign or workflow step pinned to it sends the same
 * content however the template is edited later.
 */
export const templateVersions = pgTable(
  'template_versions',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    templateId: uuid('template_id')
      .notNull()
      .references(() => templates.id, { onDelete: 'cascade' }),
    version: integer('version').notNull(),
    subject: text('subject').notNull(),
    body: text('body').notNull(),
    from: text('from_email'),
    fromName: text('from_name'),
    replyTo: text('reply_to'),
    /** When it went live; null for the draft. */
    publishedAt: timestamp('published_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    uniqueIndex('template_versions_template_version_idx').on(t.templateId, t.version),
    uniqueIndex('template_versions_one_draft_idx')
      .on(t.templateId)
      .where(sql`${t.publishedAt} is null`),
  ],
);
