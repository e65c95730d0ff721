/**
 * Amazon SES event records (the `Message` of an SNS notification) turned into one normalized shape.
 *
 * Follows "Contents of event data that Amazon SES publishes to Amazon SNS"
 * (https://docs.aws.amazon.com/ses/latest/dg/event-publishing-retrieving-sns-contents.html): event publishing
 * records carry `eventType`; the older identity notifications carry `notificationType` with the same objects.
 *
 * @module
 */

/** What happened to a message, in our words. `ignored`: an event type that changes nothing here. */
export type FeedbackKind =
  | 'delivered'
  | 'delivery_delayed'
  | 'bounced'
  | 'complained'
  | 'rejected'
  | 'rendering_failed'
  | 'opened'
  | 'clicked'
  | 'sent'
  | 'ignored';

/** SES bounce types. `Transient` and `Undetermined` count toward soft-bounce suppression; `Permanent` suppresses. */
export type BounceType = 'Permanent' | 'Transient' | 'Undetermined';

/** One SES event, normalized. */
export interface SesFeedback {
  kind: FeedbackKind;
  /** SES's name for it (`Bounce`, `Open`…). */
  sesType: string;
  /** SES message id (`mail.messageId`): our `emails.message_id`. */
  messageId: string;
  /** Our tags on the message (`email_id`, `project_id`), when present. */
  tags: Record<string, string>;
  /** When it happened, per SES. */
  occurredAt: Date;
  /** Addresses concerned (bounced, complained, delayed, delivered recipients). */
  recipients: string[];
  /** Every recipient of the message (`mail.destination`). */
  destination: string[];
  bounceType?: BounceType;
  /**
   * What the email's timeline and the webhook payload show (bounce subtype, diagnostic code, link, user agent…).
   * A bounce's or delay's RFC 3463 enhanced status code (`5.1.1`; SES's `status` of the first recipient) is
   * `smtpStatus`, never `status`: in a webhook payload `status` is the email's status.
   */
  details: Record<string, unknown>;
}

/** Thrown for a record that is not an SES event (the SNS message is refused with 400). */
export class SesEventError extends Error {
  override name = 'SesEventError';
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Obj) : {});
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const addresses = (list: unknown, key = 'emailAddress'): string[] =>
  Array.isArray(list)
    ? list.map((r) => (typeof r === 'string' ? r : str(obj(r)[key]))).filter((a): a is string => Boolean(a))
    : [];

function time(...candidates: unknown[]): Date {
  for (const c of candidates) {
    const t = typeof c === 'string' ? Date.parse(c) : NaN;
    if (!Number.isNaN(t)) return new Date(t);
  }
  return new Date();
}

/** Drops undefined values so stored JSON stays small. */
function compact(o: Obj): Obj {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined));
}

/**
 * Parses an SES event record (JSON text).
 *
 * @throws {@link SesEventError} when it is not JSON, has no event type or no `mail.messageId`.
 */
export function parseSesEvent(text: string): SesFeedback {
  let record: Obj;
  try {
    record = obj(JSON.parse(text));
  } catch {
    throw new SesEventError('SES event is not JSON');
  }
  const sesType = str(record.eventType) ?? str(record.notificationType);
  if (!sesType) throw new SesEventError('SES event has no eventType');
  const mail = obj(record.mail);
  const messageId = str(mail.messageId);
  if (!messageId) throw new SesEventError('SES event has no mail.messageId');
  const tags: Record<string, string> = {};
  for (const [k, v] of Object.entries(obj(mail.tags))) {
    const first: unknown = Array.isArray(v) ? (v as unknown[])[0] : v;
    if (typeof first === 'string') tags[k] = first;
  }
  const base = { sesType, messageId, tags, destination: addresses(mail.destination) };

  switch (sesType) {
    case 'Delivery': {
      const d = obj(record.delivery);
      return {
        ...base,
        kind: 'delivered',
        occurredAt: time(d.timestamp, mail.timestamp),
        recipients: addresses(d.recipients),
        details: compact({
          smtpResponse: str(d.smtpResponse),
          processingTimeMillis: d.processingTimeMillis,
          reportingMTA: str(d.reportingMTA),
        }),
      };
    }
    case 'DeliveryDelay': {
      const d = obj(record.deliveryDelay);
      const delayed = Array.isArray(d.delayedRecipients) ? d.delayedRecipients.map(obj) : [];
      return {
        ...base,
        kind: 'delivery_delayed',
        occurredAt: time(d.timestamp, mail.timestamp),
        recipients: addresses(delayed),
        details: compact({
          delayType: str(d.delayType),
          expirationTime: str(d.expirationTime),
          smtpStatus: str(delayed[0]?.status),
          diagnosticCode: str(delayed[0]?.diagnosticCode),
        }),
      };
    }
    case 'Bounce': {
      const b = obj(record.bounce);
      const bounceType: BounceType =
        b.bounceType === 'Permanent' || b.bounceType === 'Transient' ? b.bounceType : 'Undetermined';
      const bounced = Array.isArray(b.bouncedRecipients) ? b.bouncedRecipients.map(obj) : [];
      return {
        ...base,
        kind: 'bounced',
        bounceType,
        occurredAt: time(b.timestamp, mail.timestamp),
        recipients: addresses(bounced),
        details: compact({
          bounceType,
          bounceSubType: str(b.bounceSubType),
          smtpStatus: str(bounced[0]?.status),
          diagnosticCode: str(bounced[0]?.diagnosticCode),
          feedbackId: str(b.feedbackId),
        }),
      };
    }
    case 'Complaint': {
      const c = obj(record.complaint);
      return {
        ...base,
        kind: 'complained',
        occurredAt: time(c.timestamp, mail.timestamp),
        recipients: addresses(c.complainedRecipients),
        details: compact({
          complaintFeedbackType: str(c.complaintFeedbackType),
          complaintSubType: str(c.complaintSubType),
          userAgent: str(c.userAgent),
          feedbackId: str(c.feedbackId),
        }),
      };
    }
    case 'Reject':
      return {
        ...base,
        kind: 'rejected',
        occurredAt: time(mail.timestamp),
        recipients: addresses(mail.destination),
        details: compact({ reason: str(obj(record.reject).reason) }),
      };
    case 'Rendering Failure':
    case 'RenderingFailure': {
      const f = obj(record.failure);
      return {
        ...base,
        kind: 'rendering_failed',
        occurredAt: time(mail.timestamp),
        recipients: addresses(mail.destination),
        details: compact({ reason: str(f.errorMessage), templateName: str(f.templateName) }),
      };
    }
    case 'Open': {
      const o = obj(record.open);
      return {
        ...base,
        kind: 'opened',
        occurredAt: time(o.timestamp, mail.timestamp),
        recipients: addresses(mail.destination),
        details: compact({ ipAddress: str(o.ipAddress), userAgent: str(o.userAgent) }),
      };
    }
    case 'Click': {
      const c = obj(record.click);
      return {
        ...base,
        kind: 'clicked',
        occurredAt: time(c.timestamp, mail.timestamp),
        recipients: addresses(mail.destination),
        details: compact({
          link: str(c.link),
          linkTags: c.linkTags,
          ipAddress: str(c.ipAddress),
          userAgent: str(c.userAgent),
        }),
      };
    }
    case 'Send':
      return {
        ...base,
        kind: 'sent',
        occurredAt: time(mail.timestamp),
        recipients: addresses(mail.destination),
        details: {},
      };
    default:
      return { ...base, kind: 'ignored', occurredAt: time(mail.timestamp), recipients: [], details: {} };
  }
}
