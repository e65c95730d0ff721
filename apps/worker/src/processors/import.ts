/**
 * The `contact-import` job: validates the payload and runs the import (`runImport` of
 * `@mailroom/contacts/import-run`). A thrown run is retried by BullMQ from the last committed batch.
 *
 * @module
 */
import { UnrecoverableError, type Job, type Queue } from 'bullmq';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { dataValidator } from '@mailroom/platform/validation';
import { IMPORT_ATTEMPTS, ImportJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { runImport, type ImportRunResult } from '@mailroom/contacts/import-run';
import { type Config } from '@mailroom/config/config';
import { type Logger } from '@mailroom/platform/logger';
import { type Database } from '@mailroom/db/client';

const validatePayload = dataValidator(ImportJobPayload);

/** What a finished import job reports. */
export type ImportJobResult = ImportRunResult;

/** Dependencies of the processor. */
export interface ImportProcessorDeps {
  config: Config;
  database: Database;
  logger: Logger;
  /** Where the webhook deliveries of an import's topic changes are enqueued once their batch commits (without
   *  it, the reconciler enqueues them). */
  webhookQueue?: Queue<WebhookJobPayload>;
}

/** Creates the BullMQ processor function of the `contact-import` queue. */
export function createImportProcessor(deps: ImportProcessorDeps) {
  const run = {
    db: deps.database.db,
    batchSize: deps.config.importBatchSize,
    parallel: deps.config.importParallel,
    announce:
      deps.webhookQueue &&
      ((refs: WebhookDeliveryRef[]) => relayWebhookDeliveries(deps.webhookQueue!, deps.config, refs, deps.logger)),
  };
  return async (job: Job): Promise<ImportJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid import payload: ${JSON.stringify(checked.errors)}`);
    const { importId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, importId, projectId });
    return runImport(
      run,
      importId,
      { attempt: job.attemptsMade + 1, attempts: job.opts.attempts ?? IMPORT_ATTEMPTS },
      log,
    );
  };
}
