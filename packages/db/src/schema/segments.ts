import {
  bigint,
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

export type SegmentType = 'DYNAMIC' | 'STATIC';

/**
 * A segment: DYNAMIC (a filter in the segment language, evaluated live) or STATIC (explicit members).
 *
 * `memberCount` is cheap to read at any size: for STATIC and tracked DYNAMIC segments it is kept by a
 * statement-level trigger on `segment_members` (migration `0004_segment_counters`); for untracked DYNAMIC
 * segments the worker recounts it (`memberCountAt` says when). With `trackMembership`, the worker materialises
 * a DYNAMIC segment's members and records `segment.<name>.entry` / `.exit` events for the difference.
 */
export const segments = pgTable(
  'segments',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    description: text('description'),
    type: text('type').notNull().$type<SegmentType>(),
    filter: jsonb('filter').$type<unknown>(),
    trackMembership: boolean('track_membership').notNull().default(false),
    memberCount: bigint('member_count', { mode: 'number' }),
    memberCountAt: timestamp('member_count_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('segments_project_id_idx').on(t.projectId, t.id),
    uniqueIndex('segments_project_name_idx').on(t.projectId, t.name),
    check('segments_type_check', sql`${t.type} in ('DYNAMIC', 'STATIC')`),
    check('segments_filter_check', sql`(${t.type} = 'DYNAMIC') = (${t.filter} is not null)`),
  ],
);

/** Members of STATIC segments, and the materialised members of tracked DYNAMIC segments. */
export const segmentMembers = pgTable(
  'segment_members',
  {
    segmentId: uuid('segment_id')
      .notNull()
      .references(() => segments.id, { onDelete: 'cascade' }),
    contactId: uuid('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    addedAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.segmentId, t.contactId] }), index('segment_members_contact_idx').on(t.contactId)],
);
