/**
 * Amazon SES receipt notifications (the `Message` of an SNS notification sent by a receipt rule's SNS action, or
 * the notification of its S3 action), per "Amazon SES notification contents for receiving email"
 * (https://docs.aws.amazon.com/ses/latest/dg/receiving-email-notifications-contents.html): `notificationType:
 * "Received"`, the `mail` and `receipt` objects, and for an SNS action the message itself in `content` (up to
 * 150 KB; `receipt.action.encoding` `UTF8` or `BASE64`).
 *
 * @module
 */
import type { InboundVerdicts } from '@mailroom/db/schema/inbound';
import { SesEventError } from '../ses-events';

/** Where the message's bytes are: inline in the notification, or in S3. */
export type ReceiptContent =
  { kind: 'inline'; raw: Buffer } | { kind: 's3'; bucket: string; key: string } | { kind: 'none'; actionType: string };

/** One receipt notification, normalised. */
export interface SesReceipt {
  /** `mail.messageId`: SES's id of the received message. */
  sesMessageId: string;
  /** `mail.timestamp`: when SES received it. */
  receivedAt: Date;
  /** `receipt.recipients`: the envelope recipients the rule matched (lower-cased). */
  recipients: string[];
  verdicts: InboundVerdicts;
  content: ReceiptContent;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const verdict = (v: unknown): string | null => str(obj(v).status)?.toUpperCase() ?? null;

/** Whether an SES record (parsed JSON) is a receipt notification rather than a sending event. */
export function isReceiptRecord(record: unknown): boolean {
  return str(obj(record).notificationType) === 'Received';
}

/**
 * Reads a receipt notification.
 *
 * @throws {@link SesEventError} when it has no `mail.messageId`, or inline content that is not text.
 */
export function parseSesReceipt(record: unknown): SesReceipt {
  const r = obj(record);
  const mail = obj(r.mail);
  const receipt = obj(r.receipt);
  const sesMessageId = str(mail.messageId);
  if (!sesMessageId) throw new SesEventError('SES receipt notification has no mail.messageId');
  const action = obj(receipt.action);
  const type = str(action.type) ?? '';
  const recipients = (
    Array.isArray(receipt.recipients) ? receipt.recipients : Array.isArray(mail.destination) ? mail.destination : []
  )
    .filter((a): a is string => typeof a === 'string')
    .map((a) => a.trim().toLowerCase());
  let content: ReceiptContent;
  if (typeof r.content === 'string') {
    content = {
      kind: 'inline',
      raw: Buffer.from(r.content, str(action.encoding)?.toUpperCase() === 'BASE64' ? 'base64' : 'utf8'),
    };
  } else if (r.content !== undefined) {
    throw new SesEventError('SES receipt notification content is not text');
  } else if (type === 'S3' && str(action.bucketName) && str(action.objectKey)) {
    content = { kind: 's3', bucket: str(action.bucketName)!, key: str(action.objectKey)! };
  } else {
    content = { kind: 'none', actionType: type };
  }
  const at = Date.parse(str(mail.timestamp) ?? str(receipt.timestamp) ?? '');
  return {
    sesMessageId,
    receivedAt: Number.isNaN(at) ? new Date() : new Date(at),
    recipients,
    verdicts: {
      spam: verdict(receipt.spamVerdict),
      virus: verdict(receipt.virusVerdict),
      spf: verdict(receipt.spfVerdict),
      dkim: verdict(receipt.dkimVerdict),
      dmarc: verdict(receipt.dmarcVerdict),
    },
    content,
  };
}
