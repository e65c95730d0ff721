/**
 * Committing one batch of a running import: its contacts, its row errors and the import's progress in one
 * transaction, with the rows Postgres refuses for their data isolated as row errors. Two batches of one import may
 * be applied at once (`IMPORT_PARALLEL`): they commit in file order, each waiting for the one before through
 * transaction-level advisory locks (`importBatchLock`).
 *
 * @module
 */
import { and, eq, sql } from 'drizzle-orm';
import { errorCode, rootMessage } from '@mailroom/platform/errors';
import { storableRowError, findUnstorable, type ImportRecord, type ImportRowError } from '../imports';
import type { DbOrTx } from '@mailroom/db/client';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { contactImportErrors, contactImports } from '@mailroom/db/schema';
import {
  IMPORT_ERRORS_KEPT,
  importBatchLock,
  importContactBatch,
  type ImportBatchGate,
  type ImportCounts,
} from './imports';

/**
 * True when a Postgres error blames the data of a statement rather than the server or the connection: SQLSTATE
 * class 22 (data exception: 22P05 untranslatable character, 22021 bad byte sequence, 22P02 bad JSON…) and class
 * 54 (program limit exceeded: 54001 stack depth, 54000 index row too large). Splitting the statement's rows can
 * isolate such a failure. Connection loss (08xxx, 57P01, socket errors), lock timeouts (55P03) and everything
 * else are not: retrying the same rows later may succeed.
 */
export function isRowDataError(err: unknown): boolean {
  const code = errorCode(err);
  return !!code && /^(22|54)[0-9A-Z]{3}$/.test(code);
}

/** Counts of a committed batch; `failed` covers the parser's row errors and the rows Postgres refused. */
export interface ImportBatchCounts extends ImportCounts {
  failed: number;
}

/** The row error of a record Postgres refused: the field when the guard can tell, else the whole row. */
function refusedRowError(r: ImportRecord, err: unknown): ImportRowError {
  const located = findUnstorable({
    email: r.email,
    data: { ...Object.fromEntries(r.removed.map((k) => [k, null])), ...r.set },
  });
  return {
    row: r.row,
    email: r.email,
    errors: [
      {
        field: located?.field ?? '(row)',
        message: `could not be stored (${errorCode(err)}): ${located?.message ?? rootMessage(err)}`,
        code: located?.code ?? 'custom',
      },
    ],
  };
}

/**
 * Applies records inside a savepoint; when Postgres refuses them for their data ({@link isRowDataError}), splits
 * them in halves (file order kept) until the refused records stand alone, and returns those as row errors. A few
 * bad rows in a batch of n cost O(bad × log n) extra statements, and every other row is applied.
 *
 * @throws any error that is not a data error (connection lost, lock timeout): the caller's transaction fails whole.
 */
async function applyIsolatingBadRows(
  tx: DbOrTx,
  projectId: string,
  records: ImportRecord[],
  defaultSubscribed: boolean,
  after: ImportBatchGate | undefined,
  deliveries: WebhookDeliveryRef[],
): Promise<{ counts: ImportCounts; refused: ImportRowError[] }> {
  try {
    const counts = await tx.transaction((sp) =>
      importContactBatch(sp, projectId, records, defaultSubscribed, after, deliveries),
    );
    return { counts, refused: [] };
  } catch (err) {
    if (!isRowDataError(err)) throw err;
    if (records.length === 1)
      return { counts: { created: 0, updated: 0, skipped: 0 }, refused: [refusedRowError(records[0], err)] };
    const mid = Math.ceil(records.length / 2);
    const a = await applyIsolatingBadRows(tx, projectId, records.slice(0, mid), defaultSubscribed, after, deliveries);
    const b = await applyIsolatingBadRows(tx, projectId, records.slice(mid), defaultSubscribed, after, deliveries);
    return {
      counts: {
        created: a.counts.created + b.counts.created,
        updated: a.counts.updated + b.counts.updated,
        skipped: a.counts.skipped + b.counts.skipped,
      },
      refused: [...a.refused, ...b.refused],
    };
  }
}

/** How a batch is chained to the batch before it when both are applied at once. */
export interface ImportBatchChain {
  /** `fromRow` of the batch before, when another transaction may still be applying it: this batch's statements
   *  end by waiting for its commit (or rollback), so batches commit in file order. */
  after?: number;
  /** Called once this batch's transaction holds its own lock: from then on the next batch may start. */
  onLocked?: () => void;
  /** Enqueues the webhook deliveries the batch wrote (topic changes), called after it committed; never throws
   *  (the reconciler enqueues what it could not). Without it, the reconciler does. */
  announce?: (deliveries: WebhookDeliveryRef[]) => Promise<void>;
}

/**
 * Commits one batch of an import in one transaction: the contacts, the kept row errors, and the progress
 * (`rowsProcessed`, counts). The progress update is conditional on the previous `rowsProcessed`, so two
 * workers can never both apply the same batch.
 *
 * Two batches may run at once (`chain`): the transaction first takes its own advisory lock (the batch's
 * `fromRow`), writes its contacts, then waits for the batch before (`chain.after`) to end before the statements'
 * counter triggers and its progress update. The caller gives the two batches no address in common, so neither
 * ever waits for a contact row the other holds; the one before never waits for the one after. If the batch
 * before rolled back, this one's progress check fails and it rolls back too.
 *
 * A record Postgres refuses for its data (see {@link isRowDataError}) becomes a row error of this batch and the
 * other records are applied: a bad row is never fatal. Row errors are stored through {@link storableRowError},
 * so a message quoting a NUL byte cannot fail the batch itself; the first `IMPORT_ERRORS_KEPT` of the import
 * are kept (counted from the committed `failed` once the batch before has committed).
 *
 * Commits are asynchronous (`synchronous_commit = off`, no fsync wait per batch): a database crash may lose the
 * last batches' commits, contacts and progress together, so a resumed import redoes exactly those.
 *
 * @returns the batch's counts; `failed` = parser row errors + refused records.
 * @throws when the import moved on meanwhile (another worker owns it, or the batch before failed), or on any
 *   error that is not a data error (connection lost, lock timeout); nothing of the batch is kept, and a retry
 *   redoes it.
 */
export async function commitImportBatch(
  db: DbOrTx,
  imp: { id: string; projectId: string; defaultSubscribed: boolean },
  batch: { records: ImportRecord[]; errors: ImportRowError[]; fromRow: number; toRow: number; bytesProcessed: number },
  chain: ImportBatchChain = {},
): Promise<ImportBatchCounts> {
  const deliveries: WebhookDeliveryRef[] = [];
  const counts = await db.transaction(async (tx) => {
    await tx.execute(
      sql`select ${importBatchLock({ importId: imp.id, fromRow: batch.fromRow }, false)}, set_config('synchronous_commit', 'off', true)`,
    );
    chain.onLocked?.();
    const after = chain.after === undefined ? undefined : { importId: imp.id, fromRow: chain.after };
    const { counts, refused } = batch.records.length
      ? await applyIsolatingBadRows(tx, imp.projectId, batch.records, imp.defaultSubscribed, after, deliveries)
      : { counts: { created: 0, updated: 0, skipped: 0 }, refused: [] };
    // The batch before has ended once this returns (its own statement, so the read below sees its commit).
    if (after) await tx.execute(sql`select ${importBatchLock(after, true)}`);
    const [state] = await tx
      .select({ failed: contactImports.failed })
      .from(contactImports)
      .where(eq(contactImports.id, imp.id));
    const errors = refused.length ? [...batch.errors, ...refused].sort((a, b) => a.row - b.row) : batch.errors;
    const keep = errors.slice(0, Math.max(0, IMPORT_ERRORS_KEPT - (state?.failed ?? 0))).map(storableRowError);
    if (keep.length) {
      await tx
        .insert(contactImportErrors)
        .values(keep.map((e) => ({ importId: imp.id, row: e.row, email: e.email, errors: e.errors })))
        .onConflictDoNothing();
    }
    const moved = await tx
      .update(contactImports)
      .set({
        rowsProcessed: batch.toRow,
        bytesProcessed: batch.bytesProcessed,
        created: sql`${contactImports.created} + ${counts.created}`,
        updated: sql`${contactImports.updated} + ${counts.updated}`,
        skipped: sql`${contactImports.skipped} + ${counts.skipped}`,
        failed: sql`${contactImports.failed} + ${errors.length}`,
        updatedAt: new Date(),
      })
      .where(
        and(
          eq(contactImports.id, imp.id),
          eq(contactImports.rowsProcessed, batch.fromRow),
          eq(contactImports.status, 'running'),
        ),
      )
      .returning({ id: contactImports.id });
    if (moved.length === 0)
      throw new Error(`import ${imp.id} is no longer at row ${batch.fromRow}: another worker owns it`);
    return { ...counts, failed: errors.length };
  });
  if (deliveries.length && chain.announce) await chain.announce(deliveries);
  return counts;
}
