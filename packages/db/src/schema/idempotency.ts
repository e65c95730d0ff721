import { integer, json, pgTable, primaryKey, text, uuid } from 'drizzle-orm/pg-core';
import { createdAt } from './columns';
import { projects } from './projects';

/**
 * Idempotency keys (`Idempotency-Key` header): the first response to a key, replayed for 24 h. The row is
 * inserted in the same transaction as the request's effect, so a concurrent duplicate waits on it and then
 * replays, and a failed request leaves no row.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    key: text('key').notNull(),
    /** SHA-256 of method, path and the canonical JSON body. */
    fingerprint: text('fingerprint').notNull(),
    statusCode: integer('status_code').notNull(),
    // `json`, not `jsonb`: a replay returns the first response byte for byte (jsonb would reorder keys).
    response: json('response').notNull(),
    createdAt: createdAt(),
  },
  (t) => [primaryKey({ columns: [t.projectId, t.key] })],
);
