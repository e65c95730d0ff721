/**
 * Accepting a message submitted to the SMTP relay (RFC 6409 message submission): the same rules and the same
 * write as `POST /v1/send` (`../accept`): the sender on a verified domain of the project (and on one of the key's
 * domains for a restricted key), one email per envelope recipient with its contact upserted, the suppression list,
 * test keys' mail to the sink, the `email.suppressed` webhooks, the send jobs after the commit.
 *
 * What differs is the content: the message goes out as its client composed it. Its bytes, with the platform's
 * headers taken out and the ones every message carries added when missing (`./headers`), are stored once as a
 * `message/rfc822` file that every recipient's email references, with `body_format` `mime`; the worker sends
 * those bytes (`../compose`). Bcc recipients are envelope recipients like any other, and the stored message has
 * no Bcc header.
 *
 * A message with a Message-ID is idempotent per key: submitted again (the same envelope and bytes) within 24 hours,
 * it is answered as the first time and nothing new is written (the `Idempotency-Key` store of the HTTP API, keyed
 * `smtp:<key id>:<recipients hash>:<Message-ID>`). The idempotency row, the file and the emails are one statement,
 * which claims the key (waiting for a concurrent submission of the same message to commit, then replaying it) and
 * stores the emails' ids as its answer (`./replay` rebuilds it): the relay answers `250` only once it committed. A
 * message without one (the relay adds it) has no idempotency row. Either way the statement is shared by concurrent
 * messages and `/v1/send` requests (`../write-batcher`).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { validationError } from '@mailroom/platform/errors';
import {
  emailDomain,
  normalizeEmail,
  normalizedKey,
  addressProblem,
  type NormalizedMailbox,
} from '@mailroom/platform/address';
import { newId } from '@mailroom/platform/ids';
import type { KeyMode } from '@mailroom/projects/keys';
import { keyDomainRefusal, senderDomainCandidates } from '@mailroom/mail/sender';
import type { DbOrTx } from '@mailroom/db/client';
import { writeAccepted } from '../accept-write';
import { enqueueAccepted, sendResult, type SendResult } from '../accept-enqueue';
import type { TransactionalWriter } from '../write-batcher';
import { headerValues, prepareRelayMessage, splitMessage } from './headers';
import { relayFrom, relaySubject } from './header-text';
import { replayRelay } from './replay';

/** The body format of a relayed email: its content is its one file, the message as the client composed it. */
export const RELAY_BODY_FORMAT = 'mime';

/** The file name and content type a relayed message is stored under. */
export const RELAY_FILE = { filename: 'message.eml', contentType: 'message/rfc822' } as const;

/** Limits of one relayed message: the specification's for `/v1/send` (recipients, and 10 MB in all). */
export const RELAY_LIMITS = { recipients: 100, messageBytes: 10 * 1024 * 1024 } as const;

/** The authenticated key a message came with. */
export interface RelayKey {
  projectId: string;
  keyId: string;
  mode: KeyMode;
  /** A restricted key's sending domains; null: any verified domain of the project. */
  allowedDomains: readonly string[] | null;
}

/** What {@link acceptRelay} answers. */
export interface RelayResult extends SendResult {
  /** The message's Message-ID (with brackets), the client's or the one added. */
  messageId: string;
  /** The same message (Message-ID, key, envelope and bytes) was accepted before: nothing new was written. */
  replayed: boolean;
  /** Platform-owned header fields taken out of the message (by name). */
  removedHeaders: string[];
}

/**
 * The problem with an envelope recipient (`RCPT TO`), or `undefined`: the address rules of `/v1/send`.
 */
export function relayRecipientProblem(address: string): string | undefined {
  return addressProblem(address);
}

/**
 * Accepts one relayed message.
 *
 * @param deps.db - the pool (the replay of a resubmitted message reads it); the write is one statement, through
 *   `deps.writer` (a `transactionalBatcher`) when given.
 * @param rcptTo - the envelope recipients as given (`RCPT TO`), each already checked by
 *   {@link relayRecipientProblem}; duplicates (same address) are sent once.
 * @param raw - the message as received (DATA), at most {@link RELAY_LIMITS}.messageBytes.
 * @throws {@link AppError} 422 (`message`: unreadable header block; `from`: no From address, or not on a
 *   verified domain), 403 `KEY_DOMAIN_FORBIDDEN`, 422 `IDEMPOTENCY_CONFLICT` (a Message-ID already used by this
 *   key for other bytes or recipients); the database's errors (nothing committed: answer a temporary failure).
 */
export async function acceptRelay(
  deps: Parameters<typeof enqueueAccepted>[0] & { db: DbOrTx; writer?: TransactionalWriter },
  key: RelayKey,
  rcptTo: readonly string[],
  raw: Buffer,
  afterCommit: (fn: () => Promise<void>) => void,
): Promise<RelayResult> {
  const split = splitMessage(raw);
  if (!split)
    throw validationError([
      {
        field: 'message',
        message: 'has no readable header block (at most 256 KB of RFC 5322 header fields)',
        code: 'invalid_string',
      },
    ]);
  // Exactly one From field holding exactly one mailbox (`relayFrom`): the sender check below looks at that one, so
  // a second address (`From: a@ours.example, ceo@another-tenant.example`, or a second From line) would go out
  // unchecked.
  const sender = relayFrom(split);
  if (!sender || addressProblem(sender.address)) {
    throw validationError([
      {
        field: 'from',
        message: 'the message needs one From header with exactly one valid address',
        code: 'invalid_type',
      },
    ]);
  }
  const fromEmail = normalizeEmail(sender.address);
  const refused = keyDomainRefusal(fromEmail, key.allowedDomains);
  if (refused) throw refused;

  const recipients = new Map<string, NormalizedMailbox>();
  for (const address of rcptTo) {
    const email = normalizeEmail(address);
    if (!recipients.has(normalizedKey(email))) recipients.set(normalizedKey(email), { email });
  }
  const prepared = prepareRelayMessage(split, `${newId()}@${emailDomain(fromEmail)}`);
  const fromName = sender.name || null;
  const replyTo = headerValues(split, 'reply-to')[0]?.slice(0, 998) ?? null;
  const input = {
    recipients: [...recipients.values()],
    content: {
      templateId: null,
      marketing: false,
      // Relayed mail: the project's tracking mode decides.
      tracking: null,
      fromEmail,
      fromName,
      replyTo,
      subject: relaySubject(split).slice(0, 998),
      // The content is the stored message (`body_format` mime); `body` stays empty.
      body: '',
      bodyFormat: RELAY_BODY_FORMAT,
      variables: {},
      headers: {},
      test: key.mode === 'test',
      tags: null,
    },
    files: [{ ...RELAY_FILE, content: prepared.raw }],
    senderDomains: senderDomainCandidates(fromEmail),
  };

  // One submission is one Message-ID to one set of recipients: a client that is told 452 past the recipient limit
  // (RFC 5321 §4.5.3.1.10), or a smarthost that splits a long list, sends the same message to the rest in another
  // transaction, which is a new submission, not a conflicting one.
  const idempotencyKey = prepared.clientMessageId
    ? `smtp:${key.keyId}:${createHash('sha256')
        .update([...recipients.keys()].sort().join(','))
        .digest('hex')
        .slice(0, 32)}:${prepared.messageId}`.slice(0, 1000)
    : undefined;
  // The recipients are in the key: the fingerprint is the bytes alone. The key is claimed by the write statement itself,
  // which stores the emails' ids as the key's answer: with or without a Message-ID of the client's, the message is
  // one statement, shared with concurrent messages' and `/v1/send` requests' through `deps.writer`.
  const fingerprint = idempotencyKey ? createHash('sha256').update(raw).digest('hex') : '';
  const written = await writeAccepted(deps, key.projectId, {
    ...input,
    ...(idempotencyKey ? { idempotency: { key: idempotencyKey, fingerprint, statusCode: 250 } } : {}),
  });
  if (written.keyHeld) {
    const replayed = await replayRelay(deps.db, key.projectId, idempotencyKey!, fingerprint, prepared.messageId);
    return { ...replayed, messageId: prepared.messageId, replayed: true, removedHeaders: prepared.removed };
  }
  enqueueAccepted(deps, key.projectId, written, afterCommit, fromEmail);
  return { ...sendResult(written), messageId: prepared.messageId, replayed: false, removedHeaders: prepared.removed };
}
