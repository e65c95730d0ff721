/**
 * The `webhook` job: one attempt at delivering one outbox row to its endpoint, signed per Standard Webhooks.
 *
 * 1. Validate the payload (an invalid one is unrecoverable). Skip a delivery that is gone, finished, or of an
 *    older generation (a redelivery took over); fail it without an attempt when its endpoint is disabled.
 * 2. Sign the stored payload (`webhook-id` = delivery id, the same on every attempt) and send it, refusing
 *    non-public addresses unless the operator allows them.
 * 3. Record the attempt. A 2xx ends it `succeeded`. Otherwise it stays `pending` and the job throws, so BullMQ
 *    retries after the schedule's next wait; after the last attempt it is `failed`, and an endpoint with no
 *    success since the delivery was created is disabled (persistent failure).
 *
 * @module
 */
import { UnrecoverableError, type Job } from 'bullmq';
import { dataValidator } from '@mailroom/platform/validation';
import { sendHttp, signWebhook } from '@mailroom/webhooks/webhooks';
import { WebhookJobPayload, webhookBackoffMs } from '@mailroom/queues/catalog';
import { type Config } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import {
  abandonWebhookDelivery,
  deliveryForAttempt,
  disableFailingEndpoint,
  recordWebhookAttempt,
} from '@mailroom/db/queries/webhooks';
import { type Database } from '@mailroom/db/client';

const validatePayload = dataValidator(WebhookJobPayload);

/** What a finished job reports (shown in the dashboard). */
export type WebhookJobResult =
  | { outcome: 'succeeded'; statusCode: number; attempts: number }
  | { outcome: 'failed'; reason: string; endpointDisabled: boolean }
  | { outcome: 'skipped'; reason: string };

/** Creates the BullMQ processor function of the `webhook` queue. */
export function createWebhookProcessor(deps: { config: Config; database: Database; logger: Logger }) {
  const { config } = deps;
  const { db } = deps.database;

  return async (job: Job): Promise<WebhookJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid webhook payload: ${JSON.stringify(checked.errors)}`);
    const { deliveryId, generation } = checked.value;
    const log = deps.logger.child({ jobId: job.id, deliveryId, projectId: checked.value.projectId });

    const found = await deliveryForAttempt(db, deliveryId);
    if (!found) return { outcome: 'skipped', reason: 'delivery no longer exists' };
    const { delivery, endpoint } = found;
    if (delivery.generation !== generation) return { outcome: 'skipped', reason: 'superseded by a redelivery' };
    if (delivery.status !== 'pending') return { outcome: 'skipped', reason: `already ${delivery.status}` };
    if (!endpoint.enabled) {
      await abandonWebhookDelivery(db, delivery.id, generation, 'endpoint disabled');
      return { outcome: 'skipped', reason: 'endpoint disabled' };
    }

    const body = JSON.stringify(delivery.payload);
    const attempt = await sendHttp(endpoint.url, {
      headers: signWebhook(endpoint.secret, delivery.id, new Date(), body),
      body,
      timeoutMs: config.webhookTimeoutMs,
      allowPrivate: config.webhookAllowPrivateTargets,
    });
    const ref = { id: delivery.id, projectId: delivery.projectId, endpointId: endpoint.id, generation };
    const ok = attempt.statusCode !== undefined && attempt.statusCode >= 200 && attempt.statusCode < 300;
    if (ok) {
      await recordWebhookAttempt(db, ref, attempt, { status: 'succeeded' });
      log.info({ statusCode: attempt.statusCode, durationMs: attempt.durationMs }, 'webhook delivered');
      return { outcome: 'succeeded', statusCode: attempt.statusCode!, attempts: job.attemptsMade + 1 };
    }

    const reason = attempt.error ?? `answered ${attempt.statusCode}`;
    const last = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
    if (!last) {
      const nextAttemptAt = new Date(Date.now() + webhookBackoffMs(config.webhookRetryScheduleMs, job.attemptsMade + 1));
      await recordWebhookAttempt(db, ref, attempt, { status: 'pending', nextAttemptAt });
      log.warn({ reason, attempt: job.attemptsMade + 1, nextAttemptAt }, 'webhook attempt failed; will retry');
      throw new Error(`webhook attempt failed: ${reason}`);
    }
    await recordWebhookAttempt(db, ref, attempt, { status: 'failed' });
    const endpointDisabled = await disableFailingEndpoint(
      db,
      endpoint.id,
      delivery.createdAt,
      `every attempt failed since ${delivery.createdAt.toISOString()} (last: ${reason})`,
    );
    log.warn({ reason, endpointDisabled }, 'webhook delivery failed: retry schedule exhausted');
    return { outcome: 'failed', reason, endpointDisabled };
  };
}
