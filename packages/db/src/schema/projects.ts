import { boolean, index, pgTable, text, timestamp, uuid, check } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { bytea, createdAt, idColumn, updatedAt } from './columns';

/** A tenant. Every other row belongs to one project; a disabled project can neither call the API nor send. */
export const projects = pgTable('projects', {
  id: idColumn(),
  name: text('name').notNull(),
  disabled: boolean('disabled').notNull().default(false),
  /** HMAC-SHA256 key of the project's unsubscribe tokens (32 random bytes, never shown). */
  signingKey: bytea('signing_key')
    .notNull()
    .default(sql`decode(replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', ''), 'hex')`),
  /** Standard Webhooks secret (`whsec_…`) signing the project's workflow WEBHOOK calls; made on first use. */
  workflowWebhookSecret: text('workflow_webhook_secret'),
  createdAt: createdAt(),
  updatedAt: updatedAt(),
});

/**
 * API keys, stored as SHA-256 hashes. `expiresAt` is set when a key is rotated out (grace period); a key is
 * valid while it is null or in the future, and it has not been revoked. `revokedAt` records when an operator
 * revoked the key (a leaked key): it ends the key at once, whatever its expiry, and stays as the audit trail.
 */
export const apiKeys = pgTable(
  'api_keys',
  {
    id: idColumn(),
    projectId: uuid('project_id').notNull().references(() => projects.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull().$type<'secret' | 'public'>(),
    keyHash: text('key_hash').notNull().unique(),
    keyPrefix: text('key_prefix').notNull(),
    createdAt: createdAt(),
    expiresAt: timestamp('expires_at', { withTimezone: true, mode: 'date' }),
    revokedAt: timestamp('revoked_at', { withTimezone: true, mode: 'date' }),
  },
  (t) => [index('api_keys_project_idx').on(t.projectId), check('api_keys_kind_check', sql`${t.kind} in ('secret', 'public')`)],
);
