/**
 * The workflow inbox drainer of a worker process: the engine's drainer and listener
 * (`@mailroom/workflows/engine/inbox`), with each committed batch's executions enqueued on the `workflow` queue
 * and its `workflow.started` deliveries on the `webhook` queue.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import { type WebhookJobPayload, type WorkflowJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries, enqueueExecutions } from '@mailroom/queues/enqueue';
import { type Config } from '@mailroom/config/config';
import { type Logger } from '@mailroom/platform/logger';
import { type Database } from '@mailroom/db/client';
import { drainInboxOnce as drainInbox, startInboxListener, type InboxTotals } from '@mailroom/workflows/engine/inbox';

/** Dependencies of the drainer. */
export interface WorkflowInboxDeps {
  config: Config;
  database: Database;
  workflowQueue: Queue<WorkflowJobPayload>;
  webhookQueue: Queue<WebhookJobPayload>;
  logger: Logger;
}

/** Drains the inbox until it is empty, enqueueing what each batch started and woke. @returns the totals. */
export function drainInboxOnce(deps: WorkflowInboxDeps): Promise<InboxTotals> {
  return drainInbox(deps.database.db, async (batch) => {
    await enqueueExecutions(deps.workflowQueue, [...batch.started, ...batch.woken], deps.logger);
    await relayWebhookDeliveries(deps.webhookQueue, deps.config, batch.deliveries, deps.logger);
  });
}

/** Starts listening and polling. @returns `stop()`, which waits for a running drain to end. */
export function startWorkflowInbox(deps: WorkflowInboxDeps): { stop: () => Promise<void> } {
  return startInboxListener({
    databaseUrl: deps.config.databaseUrl,
    pollMs: deps.config.workflowInboxPollMs,
    logger: deps.logger,
    drain: () => drainInboxOnce(deps),
  });
}
