/**
 * Unsubscribing through the link of a marketing email (docs/api/overview.md, marketing mail; RFC 8058 one-click; RFC
 * 2369 List-Unsubscribe): the signed token names an email, whose contact is unsubscribed, once.
 *
 * @module
 */
import { parseUnsubscribeToken, verifyUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { unsubscribeContact, unsubscribeTarget, type UnsubscribeTarget } from '@mailroom/contacts/queries/unsubscribe';
import { commitWithOutbox, type OutboxDeps } from '@mailroom/webhooks/outbox';
import { type Logger } from '@mailroom/platform/logger';
import { type DbOrTx } from '@mailroom/db/client';

/**
 * The email a token names, when the token's MAC checks out under its project's key.
 *
 * @param emailId - what `unsubscribeTokenEmailId(token)` read from the token.
 * @returns the target, or `undefined` for an unknown, tampered or foreign token.
 */
export async function unsubscribeTargetOf(
  db: DbOrTx,
  emailId: string,
  token: string,
): Promise<UnsubscribeTarget | undefined> {
  const target = await unsubscribeTarget(db, emailId);
  if (!target || !verifyUnsubscribeToken(token, target.emailId, target.signingKey)) return undefined;
  // A topic token names its email's topic; a plain token of a topic email (never made) would leave everything.
  if ((parseUnsubscribeToken(token)?.topicId ?? null) !== target.topicId) return undefined;
  return target;
}

/**
 * Unsubscribes the target's contact (`subscribed=false`, event `contact.unsubscribed`, the email's timeline, the
 * campaign's count) and announces the `contact.unsubscribed` webhook, only when this call changed it.
 *
 * @param oneClick - an RFC 8058 one-click POST (`method: one-click`), else the page's button (`link`).
 * @returns whether this call changed the contact (false: already unsubscribed, or deleted).
 */
export async function unsubscribeThroughLink(
  deps: OutboxDeps,
  log: Logger,
  target: UnsubscribeTarget,
  oneClick: boolean,
): Promise<boolean> {
  const method = oneClick ? 'one-click' : 'link';
  const data = {
    contactId: target.contactId,
    email: target.toEmail,
    method,
    emailId: target.emailId,
    campaignId: target.campaignId,
  };
  return commitWithOutbox(
    deps,
    log,
    target.projectId,
    (tx) => unsubscribeContact(tx, target, method),
    (done) => (done ? [{ type: 'contact.unsubscribed', data }] : []),
  );
}
