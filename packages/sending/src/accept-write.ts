/**
 * The one write of an accepted send (`POST /v1/send`, `POST /v1/send/batch`, the SMTP relay): what a checked request
 * writes ({@link AcceptedEmails}, made by `prepareSend` of `./accept`), the data layer's request for it (a new email
 * id per recipient), and the write itself: contacts, files, email rows and their `queued` timeline entries in one
 * statement (`writeTransactional`, or with other requests' in a batch, `./write-batcher`), storing small files
 * itself; in a transaction with large ones. What was written goes on to `./accept-enqueue`.
 *
 * @module
 */
import { validationError } from '@mailroom/platform/errors';
import { newId } from '@mailroom/platform/ids';
import { normalizedKey, type NormalizedMailbox } from '@mailroom/platform/address';
import { insertAttachments } from './queries/emails';
import { type DbOrTx } from '@mailroom/db/client';
import type { TransactionalContent, TransactionalWrite } from './queries/transactional';
import type { TransactionalRequest } from './queries/transactional-batch';
import { senderRefusal } from '@mailroom/mail/sender';
import { writeAlone, type TransactionalWriter } from './write-batcher';
import type { WrittenEmails } from './accept-enqueue';

/** What one accepted request writes: its recipients (distinct), their contact upsert, the content all share. */
export interface AcceptedEmails {
  /** Distinct recipients (by normalised key), one email each. */
  recipients: NormalizedMailbox[];
  /** `subscribed` as the request stated it (undefined: unchanged for existing contacts, false for new ones). */
  subscribed?: boolean;
  /** Contact data to merge (`persist` of `splitVariables`). */
  data?: Record<string, unknown>;
  content: Omit<TransactionalContent, 'attachmentIds'>;
  /** Stored once, referenced by every email (a relayed message's bytes are one `message/rfc822` file). */
  files: {
    filename: string;
    contentType: string;
    content: Buffer;
    contentId?: string | null;
    disposition?: 'inline' | 'attachment' | null;
  }[];
  /** When given, the write checks the sender itself (see `writeTransactional`). */
  senderDomains?: string[];
  /**
   * An idempotency key the write claims itself (`idempotency` of `TransactionalRequest`), in the same statement,
   * storing as its answer `statusCode` and {@link StoredEmails} (the ids of the emails written).
   */
  idempotency?: { key: string; fingerprint: string; statusCode: number };
}

/** The answer stored with an idempotency key claimed by {@link writeAccepted}: the emails it wrote. */
export interface StoredEmails {
  emailIds: string[];
}

/** Rolls back a transaction whose idempotency key turned out held (its large files inserted first). */
class KeyHeld extends Error {}

/**
 * Files up to this many bytes in all (a relayed message, small attachments) are stored by the write statement
 * itself, which then stays one statement that concurrent requests share (`./write-batcher`); larger ones are
 * inserted first, in a transaction with the write (bytea arrays travel as hex text: twice their size).
 */
export const INLINE_FILE_BYTES = 256 * 1024;

/**
 * Writes an accepted request's contacts, files and emails atomically (the one write of `/v1/send` and the SMTP
 * relay): one statement, alone or batched through `deps.writer`, storing the files itself when they are at most
 * {@link INLINE_FILE_BYTES}; larger files are inserted in a transaction with the write. `inTransaction`: `db` is
 * the caller's transaction (the files inserted first, then the write, alone, in it).
 *
 * @throws {@link AppError} 422 on `from` when the write's sender check refused it; the database's error.
 */
export async function writeAccepted(
  deps: { db: DbOrTx; writer?: TransactionalWriter },
  projectId: string,
  input: AcceptedEmails,
  inTransaction = false,
): Promise<WrittenEmails> {
  // In the caller's transaction the write is not shared anyway: the files go in first, and the write is the lean
  // one-request statement (the batch statement for one request measured slower there).
  const inline = !inTransaction && input.files.reduce((n, f) => n + f.content.length, 0) <= INLINE_FILE_BYTES;
  const write = async (tx: DbOrTx): Promise<WrittenEmails> => {
    const attachmentIds = inline ? undefined : await insertAttachments(tx, projectId, input.files);
    const { request, list } = transactionalRequest(projectId, input, attachmentIds);
    const w = await (deps.writer ?? writeAlone)(tx, request);
    if (w.keyHeld) {
      // Our own transaction holds large files inserted first: rolled back. (A caller's transaction is the caller's.)
      if (!inline && !inTransaction) throw new KeyHeld();
      return { rows: [], deliveries: [], keyHeld: true, scheduledAt: null };
    }
    if (w.senderRefused) throw validationError([senderRefusal(input.content.fromEmail)]);
    return writtenEmails(list, w, input.content.scheduledAt ?? null);
  };
  // Files stored by the statement (or none): the write is one statement, atomic on its own.
  if (inline || inTransaction) return write(deps.db);
  return deps.db.transaction(write).catch((err: unknown) => {
    if (err instanceof KeyHeld) return { rows: [], deliveries: [], keyHeld: true as const, scheduledAt: null };
    throw err;
  });
}

/** A recipient of {@link transactionalRequest}, with its email's id and contact key. */
type RecipientRow = { id: string; email: NormalizedMailbox['email']; emailKey: string; name: string | null };

/**
 * The data layer's request for one accepted request: a new email id per recipient, and the files stored by the
 * statement itself (`attachmentIds` undefined) or already inserted (their ids).
 */
export function transactionalRequest(
  projectId: string,
  input: AcceptedEmails,
  attachmentIds?: string[],
): { request: TransactionalRequest; list: RecipientRow[] } {
  const files = attachmentIds ? [] : input.files.map((f) => ({ ...f, id: newId() }));
  const list = input.recipients.map((r) => ({
    id: newId(),
    email: r.email,
    emailKey: normalizedKey(r.email),
    name: r.name ?? null,
  }));
  const request: TransactionalRequest = {
    projectId,
    contacts: list.map((r) => ({
      email: r.email,
      subscribed: input.subscribed,
      defaultSubscribed: false,
      data: input.data,
    })),
    recipients: list,
    content: { ...input.content, attachmentIds: attachmentIds ?? files.map((f) => f.id) },
    webhookTimestamp: new Date().toISOString(),
    senderDomains: input.senderDomains,
    ...(files.length > 0 ? { files } : {}),
    ...(input.idempotency
      ? { idempotency: { ...input.idempotency, response: { emailIds: list.map((r) => r.id) } satisfies StoredEmails } }
      : {}),
  };
  return { request, list };
}

/** What the data layer's write of {@link transactionalRequest}'s request wrote, per recipient. */
export function writtenEmails(
  list: RecipientRow[],
  w: TransactionalWrite,
  scheduledAt: Date | null = null,
): WrittenEmails {
  const rows = list.map((r) => ({
    id: r.id,
    toEmail: r.email,
    suppressed: w.suppressed.get(r.emailKey),
    contact: w.contacts.get(r.emailKey)!,
  }));
  return { rows, deliveries: w.deliveries, scheduledAt };
}
