/**
 * Accepting a batch of distinct emails (`POST /v1/send/batch`): up to {@link SEND_BATCH_LIMIT} messages, each
 * exactly what `POST /v1/send` takes, checked one by one with the same schema and the same {@link prepareSend}.
 * A message with errors is answered with them, by its index, and sends nothing; the others are written together
 * and sent. A batch none of whose messages is accepted is refused as a whole (422, each field named
 * `<index>.<field>`), so a request that changes nothing always answers an error.
 *
 * The accepted messages are written in one transaction: through the multi-request statement of
 * `@mailroom/sending/queries/transactional-batch` (what the API's write batcher uses for concurrent sends), one
 * statement per round, where a round holds messages whose recipients are all different contacts (one statement
 * cannot update a contact twice; messages to the same recipient go in the rounds after, in order, with the effect
 * they would have had one after the other). A message whose sender no verified domain covers writes nothing and is
 * answered 422 on `from`; the rest still write. Only after the commit are the send jobs enqueued, all at once.
 *
 * @module
 */
import { AppError, validationError, type FieldError } from '@mailroom/platform/errors';
import type { KeyMode } from '@mailroom/projects/keys';
import type { DbOrTx } from '@mailroom/db/client';
import { writeTransactionalBatch } from './queries/transactional-batch';
import { senderRefusal } from '@mailroom/mail/sender';
import { prepareSend, type AcceptDeps, type SendRequest } from './accept';
import { transactionalRequest, writtenEmails, type AcceptedEmails } from './accept-write';
import { enqueueAccepted, sendResult, type SendResult } from './accept-enqueue';

/** Most messages in one batch (as Resend). */
export const SEND_BATCH_LIMIT = 100;

/** One accepted message: its index in the request and what `POST /v1/send` would have answered. */
export type BatchItemResult = { index: number } & SendResult;

/** One refused message: its index and the error `POST /v1/send` would have answered (nothing of it was written). */
export interface BatchItemError {
  index: number;
  /** The error code (`VALIDATION_ERROR`, `NOT_FOUND`, `KEY_DOMAIN_FORBIDDEN`, …). */
  code: string;
  statusCode: number;
  message: string;
  /** For `VALIDATION_ERROR`: each field (relative to the message, e.g. `tags.3.name`) with its rule. */
  errors?: { field: string; message: string; code: string }[];
}

/** The answer of a batch: accepted messages and refused ones, each in index order. */
export interface BatchResult {
  data: BatchItemResult[];
  errors: BatchItemError[];
}

function itemError(index: number, err: AppError): BatchItemError {
  return {
    index,
    code: err.code,
    statusCode: err.statusCode,
    message: err.message,
    ...(err.options.errors ? { errors: err.options.errors } : {}),
  };
}

/**
 * The 422 of a batch none of whose messages was accepted: every message's problems, each field prefixed with its
 * index (`3.tags.0.name`); an error without fields (a template not found, a sender outside the key's domains) is
 * named by the field it is about.
 */
function batchRefused(errors: BatchItemError[]): AppError {
  const about: Record<string, string> = { NOT_FOUND: 'template', KEY_DOMAIN_FORBIDDEN: 'from' };
  const fields: FieldError[] = errors
    .sort((a, b) => a.index - b.index)
    .flatMap((e) =>
      e.errors?.length
        ? e.errors.map((f) => ({ ...f, field: `${e.index}.${f.field}` }) as FieldError)
        : [
            {
              field: about[e.code] ? `${e.index}.${about[e.code]}` : String(e.index),
              message: `${e.code}: ${e.message}`,
              code: 'custom' as const,
            },
          ],
    );
  return validationError(fields, 'No message of the batch was accepted');
}

/**
 * Splits messages into rounds in which no two share a contact (greedy, in index order: a message goes into the
 * first round after every round holding one of its recipients, so messages to one address are written in order).
 */
export function contactRounds<T>(items: T[], keysOf: (item: T) => string[]): T[][] {
  const rounds: T[][] = [];
  const keysByRound: Set<string>[] = [];
  for (const item of items) {
    const keys = keysOf(item);
    let last = -1;
    keysByRound.forEach((set, r) => {
      if (keys.some((k) => set.has(k))) last = r;
    });
    const r = last + 1;
    if (!rounds[r]) {
      rounds[r] = [];
      keysByRound[r] = new Set();
    }
    rounds[r].push(item);
    for (const k of keys) keysByRound[r].add(k);
  }
  return rounds;
}

/**
 * Accepts a batch for a project (see the module notes).
 *
 * @param items - the messages as sent, each checked by `validate` (the `/v1/send` body schema; it throws the
 *   422 of that schema, which becomes the message's error).
 * @param mode - `test`: every message is a test email (delivered to the test sink), as with `/v1/send`.
 * @returns the accepted messages' results and the refused messages' errors, by index.
 * @throws {@link AppError} 422 `VALIDATION_ERROR` when no message was accepted (each field named `<index>.<field>`;
 *   nothing written); what Postgres throws while writing (then nothing of the batch is written); an error that is not an
 *   {@link AppError} of 4xx while checking a message.
 */
export async function acceptSendBatch(
  deps: AcceptDeps,
  projectId: string,
  items: readonly unknown[],
  validate: (item: unknown) => SendRequest,
  afterCommit: (fn: () => Promise<void>) => void,
  mode: KeyMode = 'live',
  allowedDomains: readonly string[] | null = null,
): Promise<BatchResult> {
  const errors: BatchItemError[] = [];
  const accepted: { index: number; input: AcceptedEmails }[] = [];
  for (const [index, item] of items.entries()) {
    try {
      accepted.push({ index, input: await prepareSend(deps.db, projectId, validate(item), mode, allowedDomains) });
    } catch (err) {
      if (!(err instanceof AppError) || err.statusCode >= 500) throw err;
      errors.push(itemError(index, err));
    }
  }

  const prepared = accepted.map((a) => ({ ...a, ...transactionalRequest(projectId, a.input) }));
  const rounds = contactRounds(prepared, (p) => p.list.map((r) => r.emailKey));
  const writeAll = async (tx: DbOrTx) => {
    const out: { index: number; from: string; written: ReturnType<typeof writtenEmails> }[] = [];
    for (const round of rounds) {
      const writes = await writeTransactionalBatch(
        tx,
        round.map((p) => p.request),
      );
      round.forEach((p, i) => {
        if (writes[i].senderRefused) {
          errors.push({
            index: p.index,
            code: 'VALIDATION_ERROR',
            statusCode: 422,
            message: 'from: ' + senderRefusal(p.input.content.fromEmail).message,
            errors: [senderRefusal(p.input.content.fromEmail)],
          });
        } else {
          out.push({
            index: p.index,
            from: p.input.content.fromEmail,
            written: writtenEmails(p.list, writes[i], p.input.content.scheduledAt ?? null),
          });
        }
      });
    }
    return out;
  };
  // One round is one statement, atomic on its own; several share a transaction (the caller's, if `db` is one).
  const written = rounds.length <= 1 ? await writeAll(deps.db) : await deps.db.transaction(writeAll);

  // Nothing accepted: the request as a whole failed (and changed nothing), so it is answered as one.
  if (written.length === 0) throw batchRefused(errors);

  // The send jobs of every message after the commit, concurrently (the API's enqueuer folds them into batches).
  const later: (() => Promise<void>)[] = [];
  for (const w of written) enqueueAccepted(deps, projectId, w.written, (fn) => later.push(fn), w.from);
  if (later.length > 0) afterCommit(async () => void (await Promise.all(later.map((fn) => fn()))));

  return {
    data: written.map((w) => ({ index: w.index, ...sendResult(w.written) })).sort((a, b) => a.index - b.index),
    errors: errors.sort((a, b) => a.index - b.index),
  };
}
