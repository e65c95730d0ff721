/**
 * One attempt at delivering one outbox row to its endpoint, signed per Standard Webhooks
 * (https://www.standardwebhooks.com/).
 *
 * 1. Skip a delivery that is gone, finished, or of an older generation (a redelivery took over); fail it without
 *    an attempt when its endpoint is disabled.
 * 2. Sign the stored payload (`webhook-id` = delivery id, the same on every attempt) and send it, refusing
 *    non-public addresses unless the operator allows them.
 * 3. Record the attempt. A 2xx ends it `succeeded`. Otherwise it stays `pending` with the time of the next
 *    attempt from the retry schedule, and the attempt throws so the caller retries; after the last attempt it is
 *    `failed`, and an endpoint with no success since the delivery was created is disabled (persistent failure).
 *
 * @module
 */
import type { QueueConfig } from '@mailroom/queues/config';
import type { WebhookConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';
import {
  abandonWebhookDelivery,
  deliveryForAttempt,
  disableFailingEndpoint,
  recordWebhookAttempt,
} from './queries/webhooks';
import { type DbOrTx } from '@mailroom/db/client';
import { sendHttp, signWebhook, type HttpAttempt } from './webhooks';
import { webhookBackoffMs } from '@mailroom/queues/catalog';

/** Which attempt this is: 1-based `attempt` of `attempts` in the retry schedule. */
export interface AttemptNumber {
  attempt: number;
  attempts: number;
}

/** Where an attempt leaves its delivery. */
export type AttemptOutcome =
  { status: 'succeeded' } | { status: 'pending'; nextAttemptAt: Date } | { status: 'failed' };

/**
 * Where an HTTP attempt leaves its delivery: a 2xx answer `succeeded`; any other answer or none is retried at
 * `now` + the schedule's wait (`pending`), or, on the last attempt, `failed`.
 *
 * @param now - epoch ms.
 */
export function webhookAttemptOutcome(
  attempt: Pick<HttpAttempt, 'statusCode'>,
  n: AttemptNumber,
  schedule: readonly number[],
  now: number,
): AttemptOutcome {
  const ok = attempt.statusCode !== undefined && attempt.statusCode >= 200 && attempt.statusCode < 300;
  if (ok) return { status: 'succeeded' };
  if (n.attempt < n.attempts)
    return { status: 'pending', nextAttemptAt: new Date(now + webhookBackoffMs(schedule, n.attempt)) };
  return { status: 'failed' };
}

/** What an attempt that does not throw reports. */
export type WebhookDeliveryResult =
  | { outcome: 'succeeded'; statusCode: number; attempts: number }
  | { outcome: 'failed'; reason: string; endpointDisabled: boolean }
  | { outcome: 'skipped'; reason: string };

/** What an attempt needs. */
export interface WebhookDeliveryDeps {
  db: DbOrTx;
  config: Pick<QueueConfig, 'webhookRetryScheduleMs' | 'webhookTimeoutMs'> &
    Pick<WebhookConfig, 'webhookAllowPrivateTargets'>;
}

/**
 * Makes one attempt at a delivery of generation `generation` and records it.
 *
 * @returns `succeeded`, `failed` (the last attempt failed; `endpointDisabled` when this disabled the endpoint) or
 *   `skipped` (nothing to attempt).
 * @throws `Error` "webhook attempt failed: <reason>" when the attempt failed and another one is due (the delivery
 *   stays `pending` with its `nextAttemptAt`).
 */
export async function attemptWebhookDelivery(
  deps: WebhookDeliveryDeps,
  delivery: { deliveryId: string; generation: number },
  n: AttemptNumber,
  log: Logger,
): Promise<WebhookDeliveryResult> {
  const { config, db } = deps;
  const { deliveryId, generation } = delivery;
  const found = await deliveryForAttempt(db, deliveryId);
  if (!found) return { outcome: 'skipped', reason: 'delivery no longer exists' };
  const { delivery: d, endpoint } = found;
  if (d.generation !== generation) return { outcome: 'skipped', reason: 'superseded by a redelivery' };
  if (d.status !== 'pending') return { outcome: 'skipped', reason: `already ${d.status}` };
  if (!endpoint.enabled) {
    await abandonWebhookDelivery(db, d.id, generation, 'endpoint disabled');
    return { outcome: 'skipped', reason: 'endpoint disabled' };
  }

  const body = JSON.stringify(d.payload);
  const attempt = await sendHttp(endpoint.url, {
    headers: signWebhook(endpoint.secret, d.id, new Date(), body),
    body,
    timeoutMs: config.webhookTimeoutMs,
    allowPrivate: config.webhookAllowPrivateTargets,
  });
  const ref = { id: d.id, projectId: d.projectId, endpointId: endpoint.id, generation };
  const outcome = webhookAttemptOutcome(attempt, n, config.webhookRetryScheduleMs, Date.now());
  await recordWebhookAttempt(db, ref, attempt, outcome);
  if (outcome.status === 'succeeded') {
    log.info({ statusCode: attempt.statusCode, durationMs: attempt.durationMs }, 'webhook delivered');
    return { outcome: 'succeeded', statusCode: attempt.statusCode!, attempts: n.attempt };
  }

  const reason = attempt.error ?? `answered ${attempt.statusCode}`;
  if (outcome.status === 'pending') {
    log.warn(
      { reason, attempt: n.attempt, nextAttemptAt: outcome.nextAttemptAt },
      'webhook attempt failed; will retry',
    );
    throw new Error(`webhook attempt failed: ${reason}`);
  }
  const endpointDisabled = await disableFailingEndpoint(
    db,
    endpoint.id,
    d.createdAt,
    `every attempt failed since ${d.createdAt.toISOString()} (last: ${reason})`,
  );
  log.warn({ reason, endpointDisabled }, 'webhook delivery failed: retry schedule exhausted');
  return { outcome: 'failed', reason, endpointDisabled };
}
