/**
 * Double opt-in (docs/guides/topics.md, double opt-in): `POST /contacts` with `doubleOptIn: true` writes the
 * confirmation and its email in the request's transaction; the recipient confirms through the signed link's page.
 *
 * The confirmation token names the confirmation and carries an HMAC-SHA256 of it under the project's signing key:
 * `base64url(confirmationId (16 bytes) ‖ mac (16 bytes))`, 43 characters, as unsubscribe tokens are made (the MAC's
 * input differs, so neither token passes for the other).
 *
 * @module
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { keyedIdAt, newId } from '@mailroom/platform/ids';
import { validationError, type FieldError } from '@mailroom/platform/errors';
import { senderError } from '@mailroom/mail/sender';
import { getTemplate } from '@mailroom/mail/queries/templates';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import { applyConfirmation, createConfirmation, markConfirmed, type ConfirmationRow } from './queries/confirmations';
import { setContactTopics, type TopicChange } from './queries/topics';
import type { WebhookEvent } from '@mailroom/db/queries/webhooks';
import { topicWebhookEvents } from './topics';
import type { DbOrTx } from '@mailroom/db/client';

const MAC_BYTES = 16;

function mac(id: string, key: Buffer): Buffer {
  return createHmac('sha256', key).update(`confirm:v1:${id}`).digest().subarray(0, MAC_BYTES);
}

/** Makes the token of a confirmation. @param key - the project's signing key. */
export function createConfirmationToken(confirmationId: string, key: Buffer): string {
  return Buffer.concat([Buffer.from(confirmationId.replace(/-/g, ''), 'hex'), mac(confirmationId, key)]).toString(
    'base64url',
  );
}

/** The confirmation id a token claims, before verification; `undefined` when it is not shaped like a token. */
export function confirmationTokenId(token: string): string | undefined {
  if (token.length !== 43 || !/^[A-Za-z0-9_-]+$/.test(token)) return undefined;
  const raw = Buffer.from(token, 'base64url');
  if (raw.length !== 16 + MAC_BYTES) return undefined;
  const hex = raw.subarray(0, 16).toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Checks a token's MAC in constant time. */
export function verifyConfirmationToken(token: string, confirmationId: string, key: Buffer): boolean {
  const raw = Buffer.from(token, 'base64url');
  if (raw.length !== 16 + MAC_BYTES) return false;
  return timingSafeEqual(raw.subarray(16), mac(confirmationId, key));
}

/** The public confirmation URL (`GET /confirm?token=`). @param publicUrl - `PUBLIC_URL`, without a trailing slash. */
export function confirmationUrl(publicUrl: string, token: string): string {
  return `${publicUrl}/confirm?token=${token}`;
}

/** The built-in confirmation email, used when the request names no template: `{{confirmUrl}}` is the link. */
export const DEFAULT_CONFIRMATION = {
  subject: 'Please confirm your subscription',
  body:
    '<p>Hello,</p><p>Please confirm that you want to receive our email at {{plunk_email}}:</p>' +
    '<p><a href="{{confirmUrl}}">Confirm my subscription</a></p>' +
    '<p>If you did not ask for this, ignore this message: nothing happens without your confirmation.</p>',
} as const;

/** What a double opt-in request names. */
export interface DoubleOptInRequest {
  /** A template of the project; `{{confirmUrl}}` in it is the link. Default: {@link DEFAULT_CONFIRMATION}. */
  templateId?: string;
  /** The sender; default the template's. Required without a template. Must be on a verified domain. */
  from?: string;
  fromName?: string;
  /** The topics to confirm; empty: the global marketing subscription. */
  topicIds: string[];
}

/**
 * Checks what a double opt-in needs before anything is written: the template is the project's and a sender is
 * known and on a verified domain. @returns the resolved sender and content. @throws {@link AppError} 422 naming
 * `confirmationTemplateId` or `confirmationFrom`.
 */
export async function resolveConfirmationEmail(
  db: DbOrTx,
  projectId: string,
  req: DoubleOptInRequest,
): Promise<{
  templateId: string | null;
  from: string;
  fromName: string | null;
  replyTo: string | null;
  subject: string;
  body: string;
}> {
  const template = req.templateId ? await getTemplate(db, projectId, req.templateId) : undefined;
  if (req.templateId && !template)
    throw validationError([
      { field: 'confirmationTemplateId', message: 'no template with this id in this project', code: 'custom' },
    ]);
  const from = req.from ?? template?.from ?? undefined;
  if (!from) {
    throw validationError([
      {
        field: 'confirmationFrom',
        message: 'is required: the confirmation email needs a sender (or a template with one)',
        code: 'invalid_type',
      },
    ]);
  }
  const bad: FieldError | undefined = await senderError(
    db,
    projectId,
    from,
    req.from ? 'confirmationFrom' : 'confirmationTemplateId',
  );
  if (bad) throw validationError([bad]);
  return {
    templateId: template?.id ?? null,
    from,
    fromName: req.fromName ?? template?.fromName ?? null,
    replyTo: template?.replyTo ?? null,
    subject: template?.subject ?? DEFAULT_CONFIRMATION.subject,
    body: template?.body ?? DEFAULT_CONFIRMATION.body,
  };
}

/**
 * Writes a confirmation and its (transactional, never topic-filtered) email in the caller's transaction. The email
 * is `queued`; the caller enqueues its send job after the commit (the reconciler enqueues it if that fails).
 *
 * @returns the confirmation, and the email id to enqueue.
 */
export async function startDoubleOptIn(
  tx: DbOrTx,
  a: {
    projectId: string;
    contact: { id: string; email: string };
    createdContact: boolean;
    topicIds: string[];
    email: Awaited<ReturnType<typeof resolveConfirmationEmail>>;
    signingKey: Buffer;
    publicUrl: string;
    test: boolean;
  },
): Promise<{ confirmation: ConfirmationRow; emailId: string }> {
  const id = newId();
  const emailId = keyedIdAt(Date.now(), `confirmation-email:${id}`);
  const link = confirmationUrl(a.publicUrl, createConfirmationToken(id, a.signingKey));
  await insertQueuedEmails(tx, [
    {
      id: emailId,
      projectId: a.projectId,
      contactId: a.contact.id,
      templateId: a.email.templateId,
      marketing: false,
      source: 'transactional',
      toEmail: a.contact.email,
      fromEmail: a.email.from,
      fromName: a.email.fromName,
      replyTo: a.email.replyTo,
      subject: a.email.subject,
      body: a.email.body,
      bodyFormat: 'html',
      variables: { confirmUrl: link },
      test: a.test,
    },
  ]);
  const confirmation = await createConfirmation(tx, {
    id,
    projectId: a.projectId,
    contactId: a.contact.id,
    topicIds: a.topicIds,
    createdContact: a.createdContact,
    emailId,
  });
  return { confirmation, emailId };
}

/** What a confirmation attempt found. */
export type ConfirmOutcome =
  | { status: 'confirmed'; confirmation: ConfirmationRow; changes: TopicChange[]; events: WebhookEvent[] }
  | { status: 'already_confirmed' | 'expired' };

/**
 * Confirms a double opt-in, once, in the caller's transaction: records the proof (now, `ip`, `userAgent`), subscribes
 * the contact globally and to the confirmation's topics (events `contact.subscribed`, `contact.topic_subscribed`,
 * `contact.confirmed`), and returns the webhook events to record (`contact.confirmed`, `contact.topic_subscribed`).
 * A confirmation already confirmed, or expired, changes nothing.
 */
export async function confirmDoubleOptIn(
  tx: DbOrTx,
  target: ConfirmationRow & { email: string },
  proof: { ip: string | null; userAgent: string | null },
  test: boolean,
): Promise<ConfirmOutcome> {
  const done = await markConfirmed(tx, target.id, proof);
  if (!done) return { status: target.expiredAt ? 'expired' : 'already_confirmed' };
  const changes = await setContactTopics(
    tx,
    done.projectId,
    done.contactId,
    done.topicIds.map((topicId) => ({ topicId, subscribed: true })),
    { method: 'confirmation', emailId: done.emailId, test },
  );
  const data = {
    confirmationId: done.id,
    topicIds: done.topicIds,
    confirmedAt: done.confirmedAt!.toISOString(),
    ip: done.ip,
    userAgent: done.userAgent,
  };
  await applyConfirmation(tx, done, data, test);
  const contact = { id: done.contactId, email: target.email };
  return {
    status: 'confirmed',
    confirmation: done,
    changes,
    events: [
      { type: 'contact.confirmed', data: { contactId: contact.id, email: contact.email, ...data } },
      ...topicWebhookEvents(contact, changes, { method: 'confirmation', emailId: done.emailId }),
    ],
  };
}
