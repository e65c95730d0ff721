/**
 * Outbound webhooks: endpoints, the delivery outbox's state and its attempt log. The outbox rows themselves are
 * written by the change that announces them, through `recordWebhookEvents` in `@mailroom/db/queries/webhooks`.
 *
 * @module
 */
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { newId } from '@mailroom/platform/ids';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { keysetList } from '@mailroom/db/queries/keyset';
import { webhookAttempts, webhookDeliveries, webhookEndpoints, type WebhookDeliveryStatus } from '@mailroom/db/schema';

export type WebhookEndpointRow = typeof webhookEndpoints.$inferSelect;
export type WebhookDeliveryRow = typeof webhookDeliveries.$inferSelect;

/** Creates an endpoint (enabled). */
export async function createWebhookEndpoint(
  db: DbOrTx,
  projectId: string,
  e: { url: string; eventTypes: string[]; description?: string | null; enabled?: boolean; secret: string },
): Promise<WebhookEndpointRow> {
  const [row] = await db
    .insert(webhookEndpoints)
    .values({
      id: newId(),
      projectId,
      url: e.url,
      eventTypes: [...new Set(e.eventTypes)],
      description: e.description ?? null,
      enabled: e.enabled ?? true,
      secret: e.secret,
    })
    .returning();
  return row;
}

/** An endpoint of the project, or `undefined`. */
export async function getWebhookEndpoint(
  db: DbOrTx,
  projectId: string,
  id: string,
): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db
    .select()
    .from(webhookEndpoints)
    .where(and(eq(webhookEndpoints.projectId, projectId), eq(webhookEndpoints.id, id)));
  return row;
}

/** A keyset page of the project's endpoints, newest first. */
export async function listWebhookEndpoints(db: DbOrTx, projectId: string, q: { limit: number; beforeId?: string }) {
  return keysetList(db, webhookEndpoints, eq(webhookEndpoints.projectId, projectId), q);
}

/** Updates an endpoint. Enabling it clears the platform's disable reason. */
export async function updateWebhookEndpoint(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: { url?: string; eventTypes?: string[]; description?: string | null; enabled?: boolean },
): Promise<WebhookEndpointRow | undefined> {
  const [row] = await db
    .update(webhookEndpoints)
    .set({
      ...(patch.url !== undefined ? { url: patch.url } : {}),
      ...(patch.eventTypes !== undefined ? { eventTypes: [...new Set(patch.eventTypes)] } : {}),
      ...(patch.description !== undefined ? { description: patch.description } : {}),
      ...(patch.enabled !== undefined ? { enabled: patch.enabled } : {}),
      ...(patch.enabled === true ? { disabledReason: null, disabledAt: null } : {}),
      ...(patch.enabled === false ? { disabledAt: new Date(), disabledReason: null } : {}),
      updatedAt: new Date(),
    })
    .where(and(eq(webhookEndpoints.projectId, projectId), eq(webhookEndpoints.id, id)))
    .returning();
  return row;
}

/** Deletes an endpoint with its deliveries and attempts. @returns whether it existed. */
export async function deleteWebhookEndpoint(db: DbOrTx, projectId: string, id: string): Promise<boolean> {
  const rows = await db
    .delete(webhookEndpoints)
    .where(and(eq(webhookEndpoints.projectId, projectId), eq(webhookEndpoints.id, id)))
    .returning({ id: webhookEndpoints.id });
  return rows.length > 0;
}

/** A keyset page of an endpoint's deliveries, newest first, optionally by status. */
export async function listWebhookDeliveries(
  db: DbOrTx,
  projectId: string,
  endpointId: string,
  q: { limit: number; beforeId?: string; status?: WebhookDeliveryStatus },
) {
  const filters = and(
    eq(webhookDeliveries.projectId, projectId),
    eq(webhookDeliveries.endpointId, endpointId),
    q.status ? eq(webhookDeliveries.status, q.status) : undefined,
  );
  const page = await keysetList(db, webhookDeliveries, filters, q);
  const items = page.items;
  const attempts = items.length
    ? await db
        .select()
        .from(webhookAttempts)
        .where(
          and(
            eq(webhookAttempts.projectId, projectId),
            inArray(
              webhookAttempts.deliveryId,
              items.map((d) => d.id),
            ),
          ),
        )
        .orderBy(asc(webhookAttempts.id))
    : [];
  return { ...page, items: items.map((d) => ({ ...d, attemptLog: attempts.filter((a) => a.deliveryId === d.id) })) };
}

/**
 * Starts a new delivery round for a finished (or pending) delivery of the endpoint: `pending`, next generation
 * (a job of its own). The `webhook-id` stays the same, so receivers can still drop a duplicate.
 *
 * @returns the delivery to enqueue, or `undefined` when it is not the endpoint's.
 */
export async function redeliverWebhook(
  db: DbOrTx,
  projectId: string,
  endpointId: string,
  deliveryId: string,
): Promise<WebhookDeliveryRef | undefined> {
  const [row] = await db
    .update(webhookDeliveries)
    .set({
      status: 'pending',
      generation: sql`${webhookDeliveries.generation} + 1`,
      nextAttemptAt: new Date(),
      updatedAt: new Date(),
    })
    .where(
      and(
        eq(webhookDeliveries.projectId, projectId),
        eq(webhookDeliveries.endpointId, endpointId),
        eq(webhookDeliveries.id, deliveryId),
      ),
    )
    .returning({ id: webhookDeliveries.id, generation: webhookDeliveries.generation });
  return row && { id: row.id, projectId, generation: row.generation };
}

/** A delivery with what an attempt needs (its endpoint's URL, secret and state), or `undefined`. */
export async function deliveryForAttempt(db: DbOrTx, deliveryId: string) {
  const [row] = await db
    .select({ delivery: webhookDeliveries, endpoint: webhookEndpoints })
    .from(webhookDeliveries)
    .innerJoin(webhookEndpoints, eq(webhookEndpoints.id, webhookDeliveries.endpointId))
    .where(eq(webhookDeliveries.id, deliveryId));
  return row;
}

/**
 * Records one attempt and moves the delivery: `succeeded`, still `pending` (with the next attempt's time), or
 * `failed`. Only a delivery still `pending` in the same generation moves (a redelivery started meanwhile wins).
 *
 * @returns false when the delivery was no longer this round's to finish.
 */
export async function recordWebhookAttempt(
  db: DbOrTx,
  d: { id: string; projectId: string; endpointId: string; generation: number },
  a: { statusCode?: number; error?: string; body?: string; durationMs: number },
  outcome: { status: 'succeeded' } | { status: 'pending'; nextAttemptAt: Date } | { status: 'failed' },
): Promise<boolean> {
  return db.transaction(async (tx) => {
    const [moved] = await tx
      .update(webhookDeliveries)
      .set({
        status: outcome.status,
        attempts: sql`${webhookDeliveries.attempts} + 1`,
        lastStatusCode: a.statusCode ?? null,
        lastError: a.error ?? null,
        nextAttemptAt: outcome.status === 'pending' ? outcome.nextAttemptAt : null,
        succeededAt: outcome.status === 'succeeded' ? new Date() : null,
        updatedAt: new Date(),
      })
      .where(
        and(
          eq(webhookDeliveries.id, d.id),
          eq(webhookDeliveries.status, 'pending'),
          eq(webhookDeliveries.generation, d.generation),
        ),
      )
      .returning({ attempts: webhookDeliveries.attempts });
    if (!moved) return false;
    await tx.insert(webhookAttempts).values({
      id: newId(),
      deliveryId: d.id,
      projectId: d.projectId,
      attempt: moved.attempts,
      statusCode: a.statusCode ?? null,
      error: a.error ?? null,
      responseBody: a.body ?? null,
      durationMs: a.durationMs,
    });
    if (outcome.status === 'succeeded') {
      await tx.update(webhookEndpoints).set({ lastSuccessAt: new Date() }).where(eq(webhookEndpoints.id, d.endpointId));
    }
    return true;
  });
}

/**
 * Disables an endpoint that has not succeeded since `since` (the creation of a delivery that just exhausted its
 * whole retry schedule): persistent failure, not one bad event.
 *
 * @returns whether it was disabled by this call.
 */
export async function disableFailingEndpoint(
  db: DbOrTx,
  endpointId: string,
  since: Date,
  reason: string,
): Promise<boolean> {
  const rows = await db
    .update(webhookEndpoints)
    .set({ enabled: false, disabledReason: reason, disabledAt: new Date(), updatedAt: new Date() })
    .where(
      and(
        eq(webhookEndpoints.id, endpointId),
        eq(webhookEndpoints.enabled, true),
        sql`(${webhookEndpoints.lastSuccessAt} is null or ${webhookEndpoints.lastSuccessAt} < ${since.toISOString()}::timestamptz)`,
      ),
    )
    .returning({ id: webhookEndpoints.id });
  return rows.length > 0;
}

/** Fails a pending delivery without an attempt (its endpoint was disabled meanwhile). */
export async function abandonWebhookDelivery(
  db: DbOrTx,
  deliveryId: string,
  generation: number,
  reason: string,
): Promise<void> {
  await db
    .update(webhookDeliveries)
    .set({ status: 'failed', lastError: reason, nextAttemptAt: null, updatedAt: new Date() })
    .where(
      and(
        eq(webhookDeliveries.id, deliveryId),
        eq(webhookDeliveries.status, 'pending'),
        eq(webhookDeliveries.generation, generation),
      ),
    );
}

/**
 * Pending deliveries not touched for `olderThanMs`, in id order after `afterId`, for the reconciler: their job
 * may have been lost with Redis. Re-adding one whose job is alive is a no-op (same job id).
 */
export async function stalePendingDeliveries(
  db: DbOrTx,
  olderThanMs: number,
  afterId: string | null,
  limit: number,
): Promise<WebhookDeliveryRef[]> {
  const rows = await db.execute<{ id: string; project_id: string; generation: number }>(sql`
    select id, project_id, generation from webhook_deliveries
    where status = 'pending' and id > ${afterId ?? '00000000-0000-0000-0000-000000000000'}::uuid
      and coalesce(next_attempt_at, updated_at) < now() - make_interval(secs => ${olderThanMs / 1000})
    order by id limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id, generation: r.generation }));
}
