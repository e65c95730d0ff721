/**
 * The snooze expiry pass as a maintenance task: every {@link SNOOZE_EXPIRY_INTERVAL_MS}, one pass per interval
 * across all worker processes, clears the contacts' snoozes that have run out and announces each once as
 * `contact.unsnoozed` (method `expired`; `@mailroom/audiences/snooze`). Sending never waits for it: the
 * suppression rule compares `snoozed_until` with the time itself, so a snooze stops holding mail back at its end.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import type { WebhookJobPayload } from '@mailroom/queues/catalog';
import type { Logger } from '@mailroom/platform/logger';
import { expireSnoozesOnce } from '@mailroom/audiences/snooze';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** How often expired snoozes are looked for (ms): a `contact.unsnoozed` of an expiry comes this late at most, plus a pass. */
export const SNOOZE_EXPIRY_INTERVAL_MS = 2_000;

/** The expiry pass as a maintenance task. */
export function snoozesTask(deps: {
  config: Config;
  database: Database;
  webhookQueue: Queue<WebhookJobPayload>;
  logger: Logger;
}): MaintenanceTask {
  return oncePerInterval('snoozes', SNOOZE_EXPIRY_INTERVAL_MS, async () => ({
    cleared: await expireSnoozesOnce({
      database: deps.database,
      webhookQueue: deps.webhookQueue,
      config: deps.config,
      logger: deps.logger,
    }),
  }));
}
