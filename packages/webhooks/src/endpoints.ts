/**
 * Webhook endpoints as a project manages them: the rules of their URL and event types, creation with a new
 * signing secret, and redelivery (a new round of attempts of one delivery, with the same `webhook-id`).
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { type Logger } from '@mailroom/platform/logger';
import {
  createWebhookEndpoint,
  getWebhookEndpoint,
  redeliverWebhook,
  updateWebhookEndpoint,
  type WebhookEndpointRow,
} from './queries/webhooks';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { type DbOrTx } from '@mailroom/db/client';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { type OutboxDeps } from './outbox';
import { isWebhookEventPattern, newWebhookSecret, webhookUrlProblem } from './webhooks';

/** An endpoint's fields as a request gives them (all optional for an update). */
export interface EndpointFields {
  url?: string;
  eventTypes?: string[];
  description?: string | null;
  enabled?: boolean;
}

/**
 * Field errors of an endpoint's URL (`webhookUrlProblem`) and event types (`isWebhookEventPattern`).
 *
 * @param allowPrivate - `WEBHOOK_ALLOW_PRIVATE_TARGETS`.
 */
export function endpointErrors(body: Pick<EndpointFields, 'url' | 'eventTypes'>, allowPrivate: boolean): FieldError[] {
  const errors: FieldError[] = [];
  if (body.url !== undefined) {
    const problem = webhookUrlProblem(body.url, allowPrivate);
    if (problem) errors.push({ field: 'url', message: problem, code: 'invalid_string' });
  }
  body.eventTypes?.forEach((t, i) => {
    if (!isWebhookEventPattern(t))
      errors.push({ field: `eventTypes.${i}`, message: `unknown event type "${t}"`, code: 'invalid_enum_value' });
  });
  return errors;
}

/** The project's endpoint. @throws {@link AppError} 404 when there is none. */
export async function loadEndpoint(db: DbOrTx, projectId: string, id: string): Promise<WebhookEndpointRow> {
  const e = await getWebhookEndpoint(db, projectId, id);
  if (!e) throw notFound('Webhook endpoint');
  return e;
}

/**
 * Creates an endpoint with a new signing secret (`whsec_…`; the row holds it).
 *
 * @throws {@link AppError} 422 naming the bad URL or event types.
 */
export async function addEndpoint(
  db: DbOrTx,
  projectId: string,
  body: EndpointFields & { url: string; eventTypes: string[] },
  allowPrivate: boolean,
): Promise<WebhookEndpointRow> {
  const errors = endpointErrors(body, allowPrivate);
  if (errors.length > 0) throw validationError(errors);
  return createWebhookEndpoint(db, projectId, { ...body, secret: newWebhookSecret() });
}

/**
 * Updates an endpoint; enabling it clears the platform's disable reason.
 *
 * @throws {@link AppError} 422 naming the bad URL or event types, 404 when the project has no such endpoint.
 */
export async function changeEndpoint(
  db: DbOrTx,
  projectId: string,
  id: string,
  body: EndpointFields,
  allowPrivate: boolean,
): Promise<WebhookEndpointRow> {
  const errors = endpointErrors(body, allowPrivate);
  if (errors.length > 0) throw validationError(errors);
  const e = await updateWebhookEndpoint(db, projectId, id, body);
  if (!e) throw notFound('Webhook endpoint');
  return e;
}

/**
 * Starts a new round of attempts of a delivery of an enabled endpoint, then enqueues it (a Redis failure is
 * logged; the reconciler repairs it).
 *
 * @returns the delivery, now `pending` in its next generation.
 * @throws {@link AppError} 404 (no such endpoint, or no such delivery of it), 409 `INVALID_STATE` (the endpoint is
 *   disabled).
 */
export async function redeliver(
  deps: OutboxDeps,
  log: Logger,
  projectId: string,
  endpointId: string,
  deliveryId: string,
): Promise<WebhookDeliveryRef> {
  const { db } = deps.database;
  const endpoint = await loadEndpoint(db, projectId, endpointId);
  if (!endpoint.enabled)
    throw new AppError(
      ErrorCode.INVALID_STATE,
      'The endpoint is disabled; enable it (PATCH enabled: true) before redelivering',
    );
  const ref = await redeliverWebhook(db, projectId, endpointId, deliveryId);
  if (!ref) throw notFound('Webhook delivery');
  await relayWebhookDeliveries(deps.queues.webhook, deps.config, [ref], log);
  return ref;
}
