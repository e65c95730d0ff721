import {
  bigint,
  boolean,
  date,
  index,
  jsonb,
  pgTable,
  pgView,
  primaryKey,
  text,
  timestamp,
  uuid,
} from 'drizzle-orm/pg-core';
import { createdAt, idColumn } from './columns';
import { projects } from './projects';
import { contacts } from './contacts';

/**
 * A contact event (`POST /v1/track`, and system events such as `email.sent` later). The id is a UUIDv7 made from
 * the same millisecond as `createdAt`, so `since`/`until` filters become id ranges on the keyset indexes.
 * Events belong to their contact: deleting the contact deletes them.
 */
export const events = pgTable(
  'events',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    contactId: uuid('contact_id')
      .notNull()
      .references(() => contacts.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    data: jsonb('data').$type<Record<string, unknown>>().notNull().default({}),
    /**
     * Recorded with a test key (or by a test execution, or through a test email's unsubscribe link): it starts
     * and wakes test workflow executions only, whose email goes to the test sink (`@mailroom/projects/keys`).
     */
    test: boolean('test').notNull().default(false),
    createdAt: createdAt(),
  },
  (t) => [
    index('events_project_id_idx').on(t.projectId, t.id),
    // Serves both `?contactId=` and the cascade from a deleted contact (`where contact_id = …`).
    index('events_contact_idx').on(t.contactId, t.id),
    index('events_project_name_idx').on(t.projectId, t.name, t.id),
    // Segment filters on events (`event.<name>` exists / count / within): the contacts that performed an event, in
    // contact order, read from the index alone (a merge or grouped scan; no hash of the project's events).
    index('events_project_name_contact_idx').on(t.projectId, t.name, t.contactId, t.id),
    // The retention pass (RETENTION_EVENT_DAYS): a project's oldest events by creation time (imports may backdate).
    index('events_retention_idx').on(t.projectId, t.createdAt),
  ],
);

/**
 * Distinct event names per project with their counts and first/last occurrence. Statement-level triggers on
 * `events` append to {@link eventNameDeltas} (migration `0017_counter_deltas`); the worker folds those in about
 * once a second and removes a name whose count reaches zero. Readers add the pending deltas (`listEventNames`).
 */
export const eventNames = pgTable(
  'event_names',
  {
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true, mode: 'date' }).notNull(),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true, mode: 'date' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name] })],
);

/**
 * Pending changes to {@link eventNames}: one row per writing statement, project and name, never updated (so
 * writers of one event name never wait on each other), folded by `foldCounterDeltas`. No foreign key: a delta of
 * a deleted project is dropped by the fold.
 */
export const eventNameDeltas = pgTable(
  'event_name_deltas',
  {
    projectId: uuid('project_id').notNull(),
    name: text('name').notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
    firstSeenAt: timestamp('first_seen_at', { withTimezone: true, mode: 'date' }),
    lastSeenAt: timestamp('last_seen_at', { withTimezone: true, mode: 'date' }),
    /**
     * The UTC month (its first day) of the events' ids, i.e. their month partition (migration
     * `0021_event_name_months`); null on deltas written before it, which count in {@link eventNames} only.
     */
    month: date('month', { mode: 'string' }),
  },
  // No index on `month`: every track statement writes a delta row, and the readers by month (a month drop, the
  // fold's check for pending deltas) find few rows, through (project_id, name) or a scan of a table the fold keeps small.
  (t) => [index('event_name_deltas_project_name_idx').on(t.projectId, t.name)],
);

/**
 * Event counts per (project, name, month of the event ids): the same counts as {@link eventNames}, split by the
 * month partition of `events` the rows sit in, folded from the same deltas. Dropping a month partition lowers the
 * counters by that month's rows here (a few rows per name) instead of counting the dropped partition's rows, so
 * that step costs the same however many events the month holds (migration `0021_event_name_months`).
 */
export const eventNameMonths = pgTable(
  'event_name_months',
  {
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    name: text('name').notNull(),
    /** First day of the UTC month. */
    month: date('month', { mode: 'string' }).notNull(),
    count: bigint('count', { mode: 'number' }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.name, t.month] }), index('event_name_months_month_idx').on(t.month)],
);

/**
 * Event names as of now (view of migration `0017_counter_deltas`): {@link eventNames} plus the deltas not yet
 * folded, names whose count is zero left out. Read this, not `event_names`, wherever counts must be exact.
 */
export const eventNamesNow = pgView('event_names_now', {
  projectId: uuid('project_id').notNull(),
  name: text('name').notNull(),
  count: bigint('count', { mode: 'number' }).notNull(),
  firstSeenAt: timestamp('first_seen_at', { withTimezone: true, mode: 'date' }).notNull(),
  lastSeenAt: timestamp('last_seen_at', { withTimezone: true, mode: 'date' }).notNull(),
}).existing();
