/**
 * Running a stored import: stream the file out of Postgres (one 1 MiB chunk at a time), parse it
 * (`parseImportFile`), and apply it in batches of `IMPORT_BATCH_SIZE` records with one array-parameter statement
 * each (`commitImportBatch`). Parsing the next batch overlaps with committing the previous ones, and up to
 * `IMPORT_PARALLEL` batches are applied at once on their own connections (Postgres, maintaining the contact
 * indexes, is where an import spends its time); they commit in file order.
 *
 * Resumable: each batch commits its contacts and the new `rowsProcessed` together, and a rerun skips the records
 * already committed, so a crash or a lost lock never applies or counts a row twice. Memory stays flat: one chunk,
 * one batch being parsed and `IMPORT_PARALLEL` being committed.
 *
 * A bad row is a row error, never a failed import: the parser refuses what Postgres could not store, and a batch
 * Postgres still refuses for its data is split until only the offending rows are left out (`commitImportBatch`).
 * Only infrastructure errors (Postgres unreachable, a lock timeout) make a run throw for a retry, and only an
 * unreadable file (`ImportFileError`) fails the import.
 *
 * @module
 */
import { rootMessage } from '@mailroom/platform/errors';
import { type Logger, logged } from '@mailroom/platform/logger';
import { type Db } from '@mailroom/db/client';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { ImportFileError, parseImportFile, type ImportRecord, type ImportRowError } from './imports';
import { finishImport, readImportChunk, startImport, type ContactImportRow } from './queries/imports';
import { commitImportBatch } from './queries/import-batch';

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
  /** Batches applied at once, each in its own transaction, `IMPORT_PARALLEL` (default 1: one after the other). */
  parallel?: number;
  /** Enqueues the webhook deliveries a committed batch wrote (topic changes); never throws. Without it, the
   *  worker's reconciler enqueues them. */
  announce?: (deliveries: WebhookDeliveryRef[]) => Promise<void>;
}

/** Which attempt this run is (1-based `attempt` of `attempts`): the last one records the failure. */
export interface ImportRunAttempt {
  attempt: number;
  attempts: number;
}

/** A batch being committed. */
interface Inflight {
  fromRow: number;
  /** The batch's addresses (`emailKey`). */
  keys: Set<string>;
  /** Settles when the batch's transaction holds its lock, or has ended. */
  locked: Promise<void>;
  /** The commit: rejects with the batch's error. */
  done: Promise<void>;
}

function shareAnAddress(a: Set<string>, b: Set<string>): boolean {
  const [small, large] = a.size <= b.size ? [a, b] : [b, a];
  for (const k of small) if (large.has(k)) return true;
  return false;
}

/** Applies the file of a `running` import from its checkpoint to the end. @returns final totals. */
async function applyImportFile(deps: ImportRunDeps, imp: ContactImportRow, log: Logger) {
  const { db } = deps;
  const parallel = Math.max(1, deps.parallel ?? 1);
  let bytesRead = 0;
  async function* chunks() {
    for (let seq = 0; ; seq++) {
      const chunk = await readImportChunk(db, imp.id, seq);
      if (!chunk) return;
      bytesRead += chunk.length;
      yield chunk;
    }
  }

  const totals = {
    rows: imp.rowsProcessed,
    created: imp.created,
    updated: imp.updated,
    skipped: imp.skipped,
    failed: imp.failed,
  };
  let committedRow = imp.rowsProcessed;
  const inflight: Inflight[] = [];
  let records: ImportRecord[] = [];
  let errors: ImportRowError[] = [];
  let index = 0;

  // Oldest first, so the first failure in file order is the one thrown.
  const settleOldest = async () => {
    const oldest = inflight.shift();
    if (oldest) await oldest.done;
  };
  const settleAll = async () => {
    const all = inflight.splice(0);
    const results = await Promise.allSettled(all.map((f) => f.done));
    const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
  };

  const commit = async () => {
    const batch = { records, errors, fromRow: committedRow, toRow: index, bytesProcessed: bytesRead };
    records = [];
    errors = [];
    committedRow = index;
    const keys = new Set(batch.records.map((r) => r.emailKey));
    // Up to `parallel` batches at once, and never two with an address in common: that contact's rows apply in
    // file order, and the two transactions never wait for each other's rows.
    while (inflight.length >= parallel || inflight.some((f) => shareAnAddress(f.keys, keys))) await settleOldest();
    const before = inflight.at(-1);
    // The batch before must hold its lock before this one can wait for it.
    if (before) await before.locked;
    let onLocked: () => void = () => undefined;
    const locked = new Promise<void>((resolve) => (onLocked = resolve));
    const done = commitImportBatch(db, imp, batch, { after: before?.fromRow, onLocked, announce: deps.announce }).then(
      (c) => {
        totals.created += c.created;
        totals.updated += c.updated;
        totals.skipped += c.skipped;
        totals.failed += c.failed;
        totals.rows = Math.max(totals.rows, batch.toRow);
      },
    );
    // Surfaced by settleOldest/settleAll, in file order.
    done.catch(() => undefined);
    inflight.push({ fromRow: batch.fromRow, keys, locked: Promise.race([locked, done.catch(() => undefined)]), done });
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
    let failure = err;
    try {
      // The records before an unreadable part of the file are valid: keep them.
      if (err instanceof ImportFileError && records.length + errors.length > 0) await commit();
      await settleAll();
    } catch (commitErr) {
      // A batch that did not commit wins over an unreadable file: the run is retried, and reports the file then.
      if (err instanceof ImportFileError) failure = commitErr;
      await logged(settleAll(), log, 'import batches settling after a failure', 'debug');
    }
    throw failure;
  }
  if (records.length + errors.length > 0) await commit();
  await settleAll();
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
export async function runImport(
  deps: ImportRunDeps,
  importId: string,
  attempt: ImportRunAttempt,
  log: Logger,
): Promise<ImportRunResult> {
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
      await logged(finishImport(db, importId, { error: reason }), log, 'failed import finish');
      log.error({ reason }, 'import failed');
    }
    throw new Error(rootMessage(err));
  }
}
