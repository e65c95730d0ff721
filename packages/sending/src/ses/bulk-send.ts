/**
 * Campaign mail through SES v2 `SendBulkEmail` with Mailroom's own rendering passed through (decision 0178): one
 * call carries up to {@link BULK_MAX_ENTRIES} emails of one campaign, each entry with the subject, HTML and text
 * our renderer made for its recipient (`renderEmail`: the same escaping, Markdown and fallbacks as every other
 * email), its headers (List-Unsubscribe and List-Unsubscribe-Post with the email's own signed URL, RFC 8058; the
 * bulk-mail headers) as `ReplacementHeaders`, and its message tags. The template is given inline
 * ({@link PASSTHROUGH_TEMPLATE}, `DefaultContent.Template.TemplateContent`): it only inserts the three values,
 * which SES inserts as they are (it escapes nothing), so no SES template is created, kept or deleted.
 *
 * What SES builds differs from our MIME in one way worth knowing: the `Message-ID` is SES's own (SES refuses it
 * as a custom header), so a message sent again after a lost answer cannot be collapsed by receivers by its id.
 *
 * An email whose message SES could not build as ours (attachments, header values outside printable ASCII or
 * longer than SES takes, more headers than it takes, an address outside ASCII, content over the data limit) is
 * not {@link bulkEligible}: it goes by `SendEmail` with raw content, as before.
 *
 * Limits and statuses: the SES v2 API reference (`SendBulkEmail`, `BulkEmailEntry`, `BulkEmailEntryResult`,
 * `MessageHeader`, `ReplacementTemplate`, `Template`).
 *
 * @module
 */
import type { BulkEmailEntryResult, SendBulkEmailCommandInput } from '@aws-sdk/client-sesv2';
import { encodeWord } from 'nodemailer/lib/mime-funcs';
import type { OutboundMessage } from './transport';

/** Most entries (destinations) SES takes in one `SendBulkEmail` call. */
export const BULK_MAX_ENTRIES = 50;
/** Most headers one message may carry through `ReplacementHeaders`. */
export const BULK_MAX_HEADERS = 15;
/** Longest header value SES takes (characters). */
const MAX_HEADER_VALUE = 870;
/** Longest `ReplacementTemplateData` SES takes (characters). */
export const BULK_MAX_DATA_CHARS = 262_144;
/** A header name SES takes: 1–126 printable ASCII characters, no colon. */
const HEADER_NAME = /^[!-9;-~]{1,126}$/;
/** A header value SES takes: printable ASCII and spaces. */
const HEADER_VALUE = /^[ -~]*$/;
/** Printable ASCII: what an address must be here (SES wants the local part in 7 bits, the domain in Punycode). */
const ASCII = /^[!-~]+$/;

/** The inline template of every call: the entry's own rendering, inserted as it is. */
export const PASSTHROUGH_TEMPLATE = { Subject: '{{subject}}', Html: '{{html}}', Text: '{{text}}' } as const;

/** One email of a bulk call. */
export interface BulkEntry {
  /** The recipient as a header value (`mailboxHeader`). */
  to: string;
  /** The entry's `ReplacementTemplateData`: JSON of `{ subject, html, text }` as rendered for this recipient. */
  data: string;
  /** The message's headers, name and value (checked by {@link bulkEligible}). */
  headers: readonly (readonly [string, string])[];
  /** SES message tags. */
  tags: Record<string, string>;
  /** The email id (pins a lost answer to its connection, as `OutboundMessage.key`). */
  key: string;
}

/** One `SendBulkEmail` call: what its entries share, and the entries (at most {@link BULK_MAX_ENTRIES}). */
export interface BulkOutbound extends Pick<
  OutboundMessage,
  'from' | 'priority' | 'connection' | 'projectId' | 'stream' | 'tracking' | 'trackingDomain'
> {
  /** The sender as a header value (`mailboxHeader`). */
  from: string;
  replyTo?: string[];
  entries: BulkEntry[];
}

/** What SES answered for one entry: its message id, or the error its status stands for (`classifySendError`). */
export type BulkEntryOutcome = (
  | { messageId: string }
  | {
      error: Error;
      /** The error is the whole call's (SES refused or never answered the request), not this entry's result. */
      wholeCall?: boolean;
    }
) & {
  /** The delivery connection the entry went through, when there are several. */
  connection?: string;
};

/** Each entry of `entries` failed with `err`, the error of the whole call. */
export function wholeCallFailed(entries: readonly unknown[], err: unknown): BulkEntryOutcome[] {
  const error = err instanceof Error ? err : new Error(String(err));
  return entries.map(() => ({ error, wholeCall: true }));
}

/**
 * `address` with its display name as a header value, encoded as nodemailer encodes it in our MIME (RFC 5322
 * quoted string; RFC 2047 encoded words for a name outside ASCII).
 */
export function mailboxHeader(address: string, name?: string | null): string {
  if (!name) return address;
  if (/^[\w ]*$/.test(name)) return `${name} <${address}>`;
  if (/^[\x20-\x7e]*$/.test(name)) return `"${name.replace(/([\\"])/g, '\\$1')}" <${address}>`;
  return `${encodeWord(name, 'Q', 52)} <${address}>`;
}

/**
 * Whether an email can go in a bulk call as it would go raw: no attachments, ASCII addresses (Reply-To printable
 * ASCII), headers SES takes as `ReplacementHeaders`, and its entry's data (`dataChars`, its
 * `ReplacementTemplateData`) within {@link BULK_MAX_DATA_CHARS}.
 */
export function bulkEligible(
  email: { attachmentIds: readonly string[]; toEmail: string; fromEmail: string; replyTo?: string | null },
  headers: readonly (readonly [string, string])[],
  dataChars = 0,
): boolean {
  if (email.attachmentIds.length > 0 || headers.length > BULK_MAX_HEADERS) return false;
  if (!ASCII.test(email.toEmail) || !ASCII.test(email.fromEmail)) return false;
  if (email.replyTo && !HEADER_VALUE.test(email.replyTo)) return false;
  if (dataChars > BULK_MAX_DATA_CHARS) return false;
  return headers.every(
    ([name, value]) => HEADER_NAME.test(name) && value.length <= MAX_HEADER_VALUE && HEADER_VALUE.test(value),
  );
}

/** The `SendBulkEmail` input of `call` through `configurationSet`. */
export function bulkEmailInput(call: BulkOutbound, configurationSet: string | undefined): SendBulkEmailCommandInput {
  return {
    FromEmailAddress: call.from,
    ...(call.replyTo && call.replyTo.length > 0 ? { ReplyToAddresses: call.replyTo } : {}),
    ...(configurationSet ? { ConfigurationSetName: configurationSet } : {}),
    DefaultContent: { Template: { TemplateContent: { ...PASSTHROUGH_TEMPLATE }, TemplateData: '{}' } },
    BulkEmailEntries: call.entries.map((e) => ({
      Destination: { ToAddresses: [e.to] },
      ReplacementEmailContent: { ReplacementTemplate: { ReplacementTemplateData: e.data } },
      ReplacementHeaders: e.headers.map(([Name, Value]) => ({ Name, Value })),
      ReplacementTags: Object.entries(e.tags).map(([Name, Value]) => ({ Name, Value })),
    })),
  };
}

/**
 * The error name each entry status stands for, as `SendEmail` throws it, so `classifySendError` classifies an
 * entry as it classifies a call: throttled (no attempt spent), permanent, or transient (`TRANSIENT_FAILURE`,
 * `FAILED` and anything new). The SDK's names and the API reference's differ for three: both are here.
 */
const STATUS_ERROR: Record<string, string> = {
  MESSAGE_REJECTED: 'MessageRejected',
  MAIL_FROM_DOMAIN_NOT_VERIFIED: 'MailFromDomainNotVerifiedException',
  CONFIGURATION_SET_DOES_NOT_EXIST: 'NotFoundException',
  CONFIGURATION_SET_NOT_FOUND: 'NotFoundException',
  TEMPLATE_DOES_NOT_EXIST: 'NotFoundException',
  TEMPLATE_NOT_FOUND: 'NotFoundException',
  INVALID_SENDING_POOL_NAME: 'NotFoundException',
  INVALID_PARAMETER: 'BadRequestException',
  INVALID_PARAMETER_VALUE: 'BadRequestException',
  ACCOUNT_SUSPENDED: 'AccountSuspendedException',
  ACCOUNT_THROTTLED: 'TooManyRequestsException',
  ACCOUNT_DAILY_QUOTA_EXCEEDED: 'LimitExceededException',
  ACCOUNT_SENDING_PAUSED: 'SendingPausedException',
  CONFIGURATION_SET_SENDING_PAUSED: 'SendingPausedException',
  TRANSIENT_FAILURE: 'TransientFailure',
};

/**
 * Each entry's outcome from SES's `BulkEmailEntryResults` (in entry order). An entry SES gave no result or no
 * message id for is a transient error: it was not confirmed sent.
 */
export function bulkEntryOutcomes(results: BulkEmailEntryResult[] | undefined, entries: number): BulkEntryOutcome[] {
  return Array.from({ length: entries }, (_, i): BulkEntryOutcome => {
    const r = results?.[i];
    if (r?.Status === 'SUCCESS' && r.MessageId) return { messageId: r.MessageId };
    const status = r?.Status ?? 'MISSING';
    const error = new Error(`SendBulkEmail entry ${status}: ${r?.Error ?? 'no result for the entry'}`);
    error.name = STATUS_ERROR[status] ?? 'BulkEntryFailed';
    return { error };
  });
}
