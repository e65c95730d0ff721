/**
 * The `contact-import` job: stream the uploaded file out of Postgres (one 1 MiB chunk at a time), parse it
 * (`parseImportFile`), and apply it in batches of `IMPORT_BATCH_SIZE` records with one array-parameter statement
 * each (`commitImportBatch`). Parsing the next batch overlaps with committing the previous one.
 *
 * Resumable: each batch commits its contacts and the new `rowsProcessed` together, and a retried job skips the
 * records already committed, so a crash or a lost lock never applies or counts a row twice. Memory stays flat:
 * one chunk, one batch being parsed and one being committed.
 *
 * A bad row is a row error, never a failed import: the parser refuses what Postgres could not store, and a batch
 * Postgres still refuses for its data is split until only the offending rows are left out (`commitImportBatch`).
 * Only infrastructure errors (Postgres or Redis unreachable, a lock timeout) make the job retry, and only an
 * unreadable file (`ImportFileError`) fails the import.
 *
 * @module
 */
import { UnrecoverableError, type Job } from 'bullmq';
import { dataValidator } from '@mailroom/platform/validation';
import { IMPORT_ATTEMPTS, ImportJobPayload } from '@mailroom/queues/catalog';
import { ImportFileError, parseImportFile, type ImportRecord, type ImportRowError } from '@mailroom/contacts/imports';
import { rootMessage } from '@mailroom/platform/errors';
import { type Config } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import {
  commitImportBatch,
  finishImport,
  readImportChunk,
  startImport,
  type ContactImportRow,
} from '@mailroom/contacts/queries/imports';
import { type Database } from '@mailroom/db/client';

const validatePayload = dataValidator(ImportJobPayload);

/** What a finished import job reports. */
export type ImportJobResult =
  | { outcome: 'completed'; rows: number; created: number; updated: number; skipped: number; failed: number }
  | { outcome: 'failed'; reason: string }
  | { outcome: 'skipped'; reason: string };

/** Dependencies of the processor. */
export interface ImportProcessorDeps {
  config: Config;
  database: Database;
  logger: Logger;
}

/** Applies the file of a `running` import from its checkpoint to the end. @returns final totals. */
async function runImport(deps: ImportProcessorDeps, imp: ContactImportRow, log: Logger) {
  const { db } = deps.database;
  let bytesRead = 0;
  async function* chunks() {
    for (let seq = 0; ; seq++) {
      const chunk = await readImportChunk(db, imp.id, seq);
      if (!chunk) return;
      bytesRead += chunk.length;
      yield chunk;
    }
  }

  const totals = { rows: imp.rowsProcessed, created: imp.created, updated: imp.updated, skipped: imp.skipped, failed: imp.failed };
  let committedRow = imp.rowsProcessed;
  let inflight: Promise<void> | undefined;
  let records: ImportRecord[] = [];
  let errors: ImportRowError[] = [];
  let index = 0;

  const commit = async () => {
    const batch = { records, errors, fromRow: committedRow, toRow: index, bytesProcessed: bytesRead, errorsKept: 0 };
    records = [];
    errors = [];
    committedRow = index;
    // One batch in flight: wait for the previous one before this one (progress is conditional on it, and its
    // failed count includes the rows Postgres refused, which only its commit knows).
    await inflight;
    batch.errorsKept = totals.failed;
    inflight = commitImportBatch(db, imp, batch).then((c) => {
      totals.created += c.created;
      totals.updated += c.updated;
      totals.skipped += c.skipped;
      totals.failed += c.failed;
      totals.rows = batch.toRow;
    });
    // Surface a failure now rather than after the next batch has been parsed.
    inflight.catch(() => undefined);
  };

  try {
    for await (const item of parseImportFile(imp.format, chunks())) {
      index++;
      if (index <= imp.rowsProcessed) continue;
      if (item.ok) records.push(item.record);
      else errors.push(item.error);
      if (records.length + errors.length >= deps.config.importBatchSize) await commit();
    }
  } catch (err) {
    // The records before an unreadable part of the file are valid: keep them.
    if (err instanceof ImportFileError && records.length + errors.length > 0) await commit();
    await inflight;
    throw err;
  }
  if (records.length + errors.length > 0) await commit();
  await inflight;
  log.info({ ...totals, bytes: bytesRead }, 'import finished');
  return { totals, bytesRead };
}

/** Creates the BullMQ processor function of the `contact-import` queue. */
export function createImportProcessor(deps: ImportProcessorDeps) {
  const { db } = deps.database;
  return async (job: Job): Promise<ImportJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid import payload: ${JSON.stringify(checked.errors)}`);
    const { importId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, importId, projectId });

    const imp = await startImport(db, importId);
    if (!imp) return { outcome: 'skipped', reason: 'import is missing or already finished' };
    if (imp.rowsProcessed > 0) log.info({ fromRow: imp.rowsProcessed }, 'resuming import');
    try {
      const { totals, bytesRead } = await runImport(deps, imp, log);
      await finishImport(db, importId, { bytesProcessed: bytesRead });
      return { outcome: 'completed', ...totals };
    } catch (err) {
      if (err instanceof ImportFileError) {
        await finishImport(db, importId, { error: err.message });
        log.warn({ reason: err.message }, 'import failed: unreadable file');
        return { outcome: 'failed', reason: err.message };
      }
      const attempts = job.opts.attempts ?? IMPORT_ATTEMPTS;
      if (job.attemptsMade + 1 >= attempts) {
        const reason = `stopped after ${attempts} attempts: ${rootMessage(err)}`;
        await finishImport(db, importId, { error: reason }).catch(() => undefined);
        log.error({ reason }, 'import failed');
      }
      // Retried from the last committed batch; the wrapped query text (with its rows) stays out of Redis and logs.
      throw new Error(rootMessage(err));
    }
  };
}
