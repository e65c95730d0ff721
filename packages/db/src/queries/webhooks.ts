/**
 * The webhook outbox, shared by every package whose change announces an event: events are written as delivery rows
 * in the transaction that produced them ({@link recordWebhookEvents}), so an event is delivered if and only if its
 * cause committed; the worker's `webhook` queue then delivers each row (`@mailroom/webhooks/queries/webhooks`
 * keeps the endpoints, the deliveries' state and the attempt log).
 *
 * @module
 */
import { sql, type SQL } from 'drizzle-orm';
import { type WebhookDeliveryRef } from './webhook-delivery-ref';
import type { DbOrTx } from '../client';

/** An event to send to the project's subscribed endpoints. `data` carries our ids and the event's details. */
export interface WebhookEvent {
  type: string;
  data: Record<string, unknown>;
  /** When it happened (default: now). */
  occurredAt?: Date;
}

/**
 * SQL condition: the endpoint aliased `w` is enabled and subscribed to the event type `type` (exactly, by its
 * family wildcard `<family>.*`, or by `*`); the same rule as `webhookPatternsMatch` in `@mailroom/core`.
 */
export function endpointWants(type: SQL): SQL {
  return sql`w.enabled and (${type} = any(w.event_types) or split_part(${type}, '.', 1) || '.*' = any(w.event_types) or '*' = any(w.event_types))`;
}

/**
 * Writes one delivery per (event, enabled endpoint subscribed to its type), in one statement. The payload is the
 * Standard Webhooks body `{ type, timestamp, data }`.
 *
 * @returns the deliveries to enqueue once the caller's transaction commits.
 */
export async function recordWebhookEvents(
  db: DbOrTx,
  projectId: string,
  events: readonly WebhookEvent[],
): Promise<WebhookDeliveryRef[]> {
  if (events.length === 0) return [];
  const input = JSON.stringify(
    events.map((e) => ({ type: e.type, ts: (e.occurredAt ?? new Date()).toISOString(), data: e.data })),
  );
  const rows = await db.execute<{ id: string; generation: number }>(sql`
    insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
    select mailroom_uuid_v7(clock_timestamp()), ${projectId}::uuid, w.id, ev.type,
      jsonb_build_object('type', ev.type, 'timestamp', ev.ts, 'data', ev.data)
    from jsonb_to_recordset(${input}::jsonb) as ev(type text, ts text, data jsonb)
    join webhook_endpoints w on w.project_id = ${projectId}::uuid and ${endpointWants(sql`ev.type`)}
    returning id, generation
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId, generation: r.generation }));
}

/**
 * Runs `change` in a transaction and records the webhook events it announces (`events(result)`, empty when
 * nothing changed) in the same transaction: an event is announced if and only if its change committed.
 *
 * @returns the change's result and the deliveries to enqueue after the commit.
 */
export async function withWebhookEvents<T>(
  db: DbOrTx,
  projectId: string,
  change: (tx: DbOrTx) => Promise<T>,
  events: (result: T) => WebhookEvent[],
): Promise<{ result: T; deliveries: WebhookDeliveryRef[] }> {
  return db.transaction(async (tx) => {
    const result = await change(tx);
    return { result, deliveries: await recordWebhookEvents(tx, projectId, events(result)) };
  });
}
