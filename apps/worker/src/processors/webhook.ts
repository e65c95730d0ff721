/**
 * The `webhook` job: validates the payload and makes one attempt at the delivery (`attemptWebhookDelivery` of
 * `@mailroom/webhooks/delivery`). A thrown attempt is retried by BullMQ after the schedule's next wait.
 *
 * @module
 */
import { UnrecoverableError, type Job } from 'bullmq';
import { dataValidator } from '@mailroom/platform/validation';
import { attemptWebhookDelivery, type WebhookDeliveryResult } from '@mailroom/webhooks/delivery';
import { WebhookJobPayload } from '@mailroom/queues/catalog';
import { type Config } from '@mailroom/config/config';
import { type Logger } from '@mailroom/platform/logger';
import { type Database } from '@mailroom/db/client';

const validatePayload = dataValidator(WebhookJobPayload);

/** What a finished job reports (shown in the dashboard). */
export type WebhookJobResult = WebhookDeliveryResult;

/** Creates the BullMQ processor function of the `webhook` queue. */
export function createWebhookProcessor(deps: { config: Config; database: Database; logger: Logger }) {
  const delivery = { config: deps.config, db: deps.database.db };
  return async (job: Job): Promise<WebhookJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid webhook payload: ${JSON.stringify(checked.errors)}`);
    const { deliveryId, generation } = checked.value;
    const log = deps.logger.child({ jobId: job.id, deliveryId, projectId: checked.value.projectId });
    return attemptWebhookDelivery(
      delivery,
      { deliveryId, generation },
      { attempt: job.attemptsMade + 1, attempts: job.opts.attempts ?? 1 },
      log,
    );
  };
}
