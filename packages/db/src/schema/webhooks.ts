import { boolean, check, index, integer, jsonb, pgTable, text, timestamp, uuid } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';
import { createdAt, idColumn, updatedAt } from './columns';
import { projects } from './projects';

/**
 * An outbound webhook endpoint of a project: where events of the listed types are POSTed, signed per the Standard
 * Webhooks scheme with `secret` (`whsec_` + base64 of 32 random bytes).
 */
export const webhookEndpoints = pgTable(
  'webhook_endpoints',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    url: text('url').notNull(),
    description: text('description'),
    /** Event types (`email.bounced`) or family wildcards (`email.*`, `*`). */
    eventTypes: text('event_types').array().notNull(),
    enabled: boolean('enabled').notNull().default(true),
    secret: text('secret').notNull(),
    /** Why the platform disabled it (persistent failure); null when enabled or disabled by the user. */
    disabledReason: text('disabled_reason'),
    disabledAt: timestamp('disabled_at', { withTimezone: true, mode: 'date' }),
    lastSuccessAt: timestamp('last_success_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [index('webhook_endpoints_project_idx').on(t.projectId, t.id)],
);

/** Delivery states: `pending` (attempts scheduled), `succeeded` (a 2xx answer), `failed` (schedule exhausted). */
export const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'failed'] as const;
export type WebhookDeliveryStatus = (typeof WEBHOOK_DELIVERY_STATUSES)[number];

/**
 * One event for one endpoint (the outbox): written in the transaction that produced the event, then delivered by
 * the worker's `webhook` queue. Its id is the `webhook-id` header, the same on every attempt and redelivery, so a
 * receiver can drop duplicates. `generation` counts manual redeliveries (each gets a job of its own).
 */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: idColumn(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    eventType: text('event_type').notNull(),
    payload: jsonb('payload').$type<Record<string, unknown>>().notNull(),
    status: text('status').notNull().$type<WebhookDeliveryStatus>().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    generation: integer('generation').notNull().default(0),
    lastStatusCode: integer('last_status_code'),
    lastError: text('last_error'),
    nextAttemptAt: timestamp('next_attempt_at', { withTimezone: true, mode: 'date' }),
    succeededAt: timestamp('succeeded_at', { withTimezone: true, mode: 'date' }),
    createdAt: createdAt(),
    updatedAt: updatedAt(),
  },
  (t) => [
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.id),
    // The reconciler's scan of deliveries whose job may be lost.
    index('webhook_deliveries_pending_idx')
      .on(t.id)
      .where(sql`${t.status} = 'pending'`),
    // The retention pass (RETENTION_WEBHOOK_DAYS): a project's oldest finished deliveries.
    index('webhook_deliveries_retention_idx')
      .on(t.projectId, t.createdAt)
      .where(sql`${t.status} <> 'pending'`),
    check('webhook_deliveries_status_check', sql`${t.status} in ('pending', 'succeeded', 'failed')`),
  ],
);

/**
 * Every HTTP attempt of a delivery: status code or network error, the start of the answer, duration (ms).
 * `delivery_id` references `webhook_deliveries.id` through statement-level triggers, as `email_events.email_id`
 * does `emails.id` (migration `0022_partition_references`).
 */
export const webhookAttempts = pgTable(
  'webhook_attempts',
  {
    id: idColumn(),
    deliveryId: uuid('delivery_id').notNull(),
    projectId: uuid('project_id')
      .notNull()
      .references(() => projects.id, { onDelete: 'cascade' }),
    attempt: integer('attempt').notNull(),
    statusCode: integer('status_code'),
    error: text('error'),
    /** First 1,024 characters of the answer. */
    responseBody: text('response_body'),
    durationMs: integer('duration_ms').notNull(),
    createdAt: createdAt(),
  },
  (t) => [index('webhook_attempts_delivery_idx').on(t.deliveryId, t.id)],
);
