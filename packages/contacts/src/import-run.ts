/**
 * Running a stored import: stream the file out of Postgres (one 1 MiB chunk at a time), parse it
 * (`parseImportFile`), and apply it in batches of `IMPORT_BATCH_SIZE` records with one array-parameter statement
 * each (`commitImportBatch`). Parsing the next batch overlaps with committing the previous one.
 *
 * Resumable: each batch commits its contacts and the new `rowsProcessed` together, and a rerun skips the records
 * already committed, so a crash or a lost lock never applies or counts a row twice. Memory stays flat: one chunk,
 * one batch being parsed and one being committed.
 *
 * A bad row is a row error, never a failed import: the parser refuses what Postgres could not store, and a batch
 * Postgres still refuses for its data is split until only the offending rows are left out (`commitImportBatch`).
 * Only infrastructure errors (Postgres unreachable, a lock timeout) make a run throw for a retry, and only an
 * unreadable file (`ImportFileError`) fails the import.
 *
 * @module
 */
import { rootMessage } from '@mailroom/platform/errors';
import { type Logger } from '@mailroom/platform/logger';
import { type Db } from '@mailroom/db/client';
import { ImportFileError, parseImportFile, type ImportRecord, type ImportRowError } from './imports';
import {
  commitImportBatch,
  finishImport,
  readImportChunk,
  startImport,
  type ContactImportRow,
} from './queries/imports';

/** What a run of an import reports. */
export type ImportRunResult =
  | { outcome: 'completed'; rows: number; created: number; updated: number; skipped: number; failed: number }
  | { outcome: 'failed'; reason: string }
  | { outcome: 'skipped'; reason: string };

/** What a run needs. */
export interface ImportRunDeps {
  db: Db;
  /** Records per committed batch, `IMPORT_BATCH_SIZE`. */
  batchSize: number;
}

/** Which attempt this run is (1-based `attempt` of `attempts`): the last one records the failure. */
export interface ImportRunAttempt {
  attempt: number;
  attempts: number;
}

/** Applies the file of a `running` import from its checkpoint to the end. @returns final totals. */
async function applyImportFile(deps: ImportRunDeps, imp: ContactImportRow, log: Logger) {
  const { db } = deps;
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
      if (records.length + errors.length >= deps.batchSize) await commit();
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

/**
 * Runs an import (queued, or running from an earlier attempt) to its end.
 *
 * @returns `skipped` when the import is missing or already finished, `failed` for an unreadable file (the import
 *   is failed), else `completed` with the totals of the whole import.
 * @throws an `Error` with the root cause's message (the query text with its rows stays out of job stores and
 *   logs) on an infrastructure failure: run again to resume from the last committed batch. On the last attempt
 *   the import is failed first.
 */
export async function runImport(deps: ImportRunDeps, importId: string, attempt: ImportRunAttempt, log: Logger): Promise<ImportRunResult> {
  const { db } = deps;
  const imp = await startImport(db, importId);
  if (!imp) return { outcome: 'skipped', reason: 'import is missing or already finished' };
  if (imp.rowsProcessed > 0) log.info({ fromRow: imp.rowsProcessed }, 'resuming import');
  try {
    const { totals, bytesRead } = await applyImportFile(deps, imp, log);
    await finishImport(db, importId, { bytesProcessed: bytesRead });
    return { outcome: 'completed', ...totals };
  } catch (err) {
    if (err instanceof ImportFileError) {
      await finishImport(db, importId, { error: err.message });
      log.warn({ reason: err.message }, 'import failed: unreadable file');
      return { outcome: 'failed', reason: err.message };
    }
    if (attempt.attempt >= attempt.attempts) {
      const reason = `stopped after ${attempt.attempts} attempts: ${rootMessage(err)}`;
      await finishImport(db, importId, { error: reason }).catch(() => undefined);
      log.error({ reason }, 'import failed');
    }
    throw new Error(rootMessage(err));
  }
}
