/**
 * The message of a claimed email: subject and body (a campaign email's from its campaign) rendered against the
 * one render context (`renderContext`: the contact's data, the request's variables, `unsubscribeUrl`, `plunk_id`,
 * `plunk_email`), then built as RFC 5322 bytes with its attachments and the headers `headers.ts` decides (custom
 * headers stored before that rule are filtered here; marketing mail carries List-Unsubscribe and
 * List-Unsubscribe-Post, RFC 8058, and the bulk-mail headers). The Message-ID is `<email id>@<sender domain>`, so
 * a message sent again after a lost claim can be collapsed by receivers.
 * A message relayed over SMTP (`body_format` mime) is sent as stored (`./relay/accept-relay`).
 *
 * @module
 */
import { buildMime, type MimeMessage } from '@mailroom/mail/mail';
import { messageHeaders } from '@mailroom/mail/headers';
import { createUnsubscribeToken, unsubscribeUrl } from '@mailroom/mail/unsubscribe';
import { renderContent, renderContext, type RenderedContent } from '@mailroom/mail/templates';
import { emailDomain } from '@mailroom/platform/address';
import type { PlatformConfig } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import { loadAttachments } from './queries/emails';
import { type DbOrTx } from '@mailroom/db/client';
import type { SendingEmail } from './claim';

/** A composed message: its bytes and the subject as rendered (stored on the row once sent). */
export interface ComposedMessage {
  raw: Buffer;
  subject: string;
}

/**
 * The email's content cannot be made into a message (its template does not parse, it nests too deep to render, the
 * MIME builder refuses it): the same email can never be composed, so sending it is a permanent failure.
 */
export class ComposeError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'ComposeError';
  }
}

function composeError(err: unknown): ComposeError {
  return new ComposeError((err as Error)?.message ?? String(err), { cause: err });
}

/**
 * Renders and builds the message of `email`.
 *
 * @param log - the job's logger: custom headers dropped by the header rule are logged at warn.
 * @param build - the MIME builder: `buildMime`; the compose benchmark passes the streamed reference
 *   (`buildMimeStreamed`) to time both through this one path.
 * @param rendered - `renderEmail`'s result for this email when the caller already has it (a bulk path that sends
 *   the email on its own after all), so it is not rendered twice.
 * @throws {@link ComposeError} when the content cannot be rendered or built (permanent); the database's error
 *   (loading attachments), which is transient.
 */
export async function composeMessage(
  db: DbOrTx,
  config: Pick<PlatformConfig, 'publicUrl'>,
  email: SendingEmail,
  log?: Logger,
  build: (message: MimeMessage) => Promise<Buffer> = buildMime,
  rendered?: RenderedEmail,
): Promise<ComposedMessage> {
  // A message relayed over SMTP goes out as its client composed it: the stored bytes, nothing rendered or rebuilt
  // (the relay took the platform's headers out and added the missing ones when it accepted them).
  if (email.bodyFormat === 'mime') return relayedMessage(db, email);
  const { content, headers, unsubscribeToken } = rendered ?? renderEmail(config, email, log);
  const files = await loadAttachments(db, email.projectId, email.attachmentIds);
  try {
    const raw = await build({
      from: { email: email.fromEmail, ...(email.fromName ? { name: email.fromName } : {}) },
      to: { email: email.toEmail, ...(email.toName ? { name: email.toName } : {}) },
      replyTo: email.replyTo,
      subject: content.subject,
      html: content.html,
      text: content.text,
      headers,
      attachments: files.map((f) => ({
        filename: f.filename,
        content: f.content,
        contentType: f.contentType,
        contentId: f.contentId,
        disposition: f.disposition,
      })),
      messageId: `${email.id}@${emailDomain(email.fromEmail)}`,
      // The token names this email (attribution, and a test email's link records a test event), so it differs
      // per email; left out of the boundaries, identical content still gives identical bytes.
      perMessage: [unsubscribeToken],
    });
    return { raw, subject: content.subject };
  } catch (err) {
    throw composeError(err);
  }
}

/** An email's content rendered, and the headers its message carries (before the MIME build). */
export interface RenderedEmail {
  content: RenderedContent;
  headers: [string, string][];
  /** The email's signed unsubscribe token (in its unsubscribe URL). */
  unsubscribeToken: string;
}

/**
 * Renders `email`'s subject and body against its render context and decides its headers (see the module notes).
 *
 * @throws {@link ComposeError} when the content cannot be rendered (permanent).
 */
export function renderEmail(
  config: Pick<PlatformConfig, 'publicUrl'>,
  email: SendingEmail,
  log?: Logger,
): RenderedEmail {
  // Marketing mail links to the one-click unsubscribe page of this very email (signed token, RFC 8058); a topic's
  // marketing email carries its topic in the token, so the one-click unsubscribe leaves that topic only.
  if (email.bodyFormat === 'mime') throw new ComposeError('a relayed message is sent as stored, never rendered');
  const unsubscribeToken = createUnsubscribeToken(email.id, email.signingKey, email.marketing ? email.topicId : null);
  const unsubscribe = unsubscribeUrl(config.publicUrl, unsubscribeToken);
  const context = renderContext({
    contact: { id: email.contactId, email: email.toEmail, data: email.contactData },
    variables: email.variables ?? {},
    unsubscribeUrl: unsubscribe,
  });
  const source = email.campaign
    ? { subject: email.campaign.subject, body: email.campaign.body, format: 'html' as const }
    : { subject: email.subject!, body: email.body!, format: email.bodyFormat! };
  let content: RenderedContent;
  try {
    content = renderContent(source, context);
  } catch (err) {
    throw composeError(err);
  }
  const { headers, dropped } = messageHeaders(email.headers ?? {}, {
    marketing: email.marketing,
    unsubscribeUrl: unsubscribe,
    // A transactional body that links to its unsubscribe URL gets the one-click headers too (unless it has its own).
    bodyLinksUnsubscribe: content.html.includes(unsubscribeToken),
  });
  if (dropped.length > 0)
    log?.warn({ dropped }, 'custom headers dropped: the platform owns them or they break the header rule');
  return { content, headers, unsubscribeToken };
}

/**
 * The stored bytes of a relayed email (`body_format` mime: its one attachment, `message/rfc822`).
 *
 * @throws an `Error` when the bytes are gone (the content was erased while the email was pending): the send fails.
 */
async function relayedMessage(db: DbOrTx, email: SendingEmail): Promise<ComposedMessage> {
  const [file] = await loadAttachments(db, email.projectId, email.attachmentIds.slice(0, 1));
  if (!file) throw new Error('the relayed message is no longer stored');
  return { raw: file.content, subject: email.subject ?? '' };
}
