/**
 * The writes of concurrent `POST /v1/send` requests folded into batches: at most `maxInFlight` statements run at
 * once, and the requests that arrive meanwhile go together in the next (at most `maxBatch`), through
 * `@mailroom/sending/queries/transactional-batch` (one statement, one commit, one firing of each trigger for all of
 * them). At a low rate every request is written alone, at once, exactly as without batching.
 *
 * Only requests written straight to the pool are batched: one written in a transaction (an HTTP `Idempotency-Key`'s,
 * whose effect commits with its stored answer; one with files over `INLINE_FILE_BYTES` of `./accept-write`, inserted
 * first) is written alone in it. Smaller files (a relayed message's bytes) ride the statement (`files` of the
 * request), and so does an idempotency key whose stored answer is known before the write (`idempotency` of the
 * request: a relayed message's Message-ID), claimed by the statement itself. A batch that fails as a whole (two requests for one contact, a deadlock, one request's data refused)
 * writes nothing, and each of its requests is then written alone, with its own answer or error. A batch that lost
 * its connection (its commit unknown) gives every request the error (503) instead of a second write.
 *
 * @module
 */
import { Batcher, type BatcherOptions } from '@mailroom/platform/batcher';
import { isUnavailableError } from '@mailroom/platform/errors';
import type { DbOrTx } from '@mailroom/db/client';
import { writeTransactional } from './queries/transactional';
import { writeTransactionalBatch, type BatchWrite, type TransactionalRequest } from './queries/transactional-batch';

/** Writes one request's emails: alone, or in a batch (see the module notes). */
export type TransactionalWriter = (tx: DbOrTx, request: TransactionalRequest) => Promise<BatchWrite>;

/**
 * `writeTransactional` with its arguments as one {@link TransactionalRequest}; a request carrying `files` or an
 * `idempotency` key is written as a batch of one (the statement that stores and claims them).
 */
export const writeAlone: TransactionalWriter = async (tx, r) =>
  r.files?.length || r.idempotency
    ? (await writeTransactionalBatch(tx, [r]))[0]
    : writeTransactional(tx, r.projectId, r.contacts, r.recipients, r.content, r.webhookTimestamp, r.senderDomains);

/**
 * A {@link TransactionalWriter} batching the requests written straight to `db`.
 *
 * @param options.maxBatch - most requests in one statement (1 writes every request alone); `observe` is told each
 *   statement's number of requests.
 */
export function transactionalBatcher(db: DbOrTx, options: BatcherOptions): TransactionalWriter {
  if (options.maxBatch <= 1) return writeAlone;
  const batcher = new Batcher<TransactionalRequest, BatchWrite>(
    (requests) => writeTransactionalBatch(db, requests),
    (request) => writeAlone(db, request),
    // A dropped connection leaves the batch's commit unknown: its requests get the error (503), never a second write.
    { ...options, retryAlone: (err) => !isUnavailableError(err) },
  );
  return (tx, request) => (tx === db ? batcher.run(request) : writeAlone(tx, request));
}
