/**
 * The SNS messages of SES event publishing (`POST /webhooks/ses`), from their raw body to their effect.
 *
 * - Every message is checked: its topic must be one we accept (`SNS_TOPIC_ARNS`), and its signature must verify
 *   against the certificate at `SigningCertURL` on a trusted SNS host ({@link SnsVerifier}). Anything else is an
 *   {@link SnsRejection} (400 malformed; 403 unsigned, forged, tampered, stale or foreign) and changes nothing.
 * - `SubscriptionConfirmation`: confirmed by fetching its `SubscribeURL` (also on a trusted host).
 *   `UnsubscribeConfirmation`: acknowledged and logged (re-subscribing is an operator's decision).
 * - `Notification` of SES receiving (`notificationType: Received`): the received message is stored for the project
 *   of its recipient's inbound-enabled domain (`./inbound/receive`).
 * - `Notification`: one transaction records the SNS `MessageId` and applies the SES event (`applySesFeedback`:
 *   status, counters, timeline, contact event, suppression, the campaign guardrail's pause, webhook deliveries). A
 *   redelivered message id is acknowledged with no effect. The webhook deliveries are enqueued after the commit.
 *
 * SNS (https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html) retries 5xx answers, so a
 * passing certificate-fetch or confirmation problem is a 503 rejection and the message comes back.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { FeedbackConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';
import { type WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { type Db } from '@mailroom/db/client';
import { isTrustedSnsUrl, parseSnsMessage, SnsRejection, SnsVerifier, type SnsMessage } from './sns';
import { parseSesEvent, type BounceType, type FeedbackKind } from './ses-events';
import type { MailConfig } from '@mailroom/mail/config';
import { createInboundReceiver, type InboundResult } from './inbound/receive';
import { isReceiptRecord, parseSesReceipt } from './inbound/receipt';
import { applySesFeedback, recordSnsMessage, type FeedbackOutcome } from './queries/feedback';

/** What handling a message answers. */
export interface SesWebhookResult {
  type: SnsMessage['Type'];
  /** The message id was seen before: nothing changed. */
  duplicate: boolean;
  /** For a notification: the email it concerned and what it did (absent for unknown messages). */
  emailId?: string;
  status?: string;
  suppressed?: string[];
  ignored?: string;
  /** For a notification seen for the first time: the SES event it carried (its bounce type for a bounce). */
  event?: { kind: FeedbackKind; bounceType?: BounceType };
  /** For a receipt notification (SES receiving): the received messages stored, one per project. */
  inbound?: InboundResult['inbound'];
}

/** What handling messages needs. */
export interface SesWebhookDeps {
  config: FeedbackConfig &
    Pick<AudienceConfig, 'guardrails'> &
    Pick<QueueConfig, 'webhookRetryScheduleMs'> &
    Pick<MailConfig, 'sesRegion' | 'awsCredentials'>;
  db: Db;
  webhookQueue: Queue<WebhookJobPayload>;
}

/**
 * Creates the handler of SNS message bodies (one certificate cache for its lifetime).
 *
 * @returns a function of the raw body (text) that checks and applies the message.
 * @throws {@link SnsRejection} (400, 403 or 503) and `SesEventError` (an unreadable SES event); database errors as
 *   they come.
 */
export function createSesWebhookHandler(
  deps: SesWebhookDeps,
): (body: string, log: Logger) => Promise<SesWebhookResult> {
  const { config, db } = deps;
  const verifier = new SnsVerifier(config.snsCertHosts);
  const topics = new Set(config.snsTopicArns);
  const policy = { limit: config.softBounceLimit, windowHours: config.softBounceWindowHours };
  const receive = createInboundReceiver(deps);

  const handle = async (m: SnsMessage, log: Logger): Promise<SesWebhookResult> => {
    if (m.Type === 'SubscriptionConfirmation') {
      if (!isTrustedSnsUrl(m.SubscribeURL!, config.snsCertHosts))
        throw new SnsRejection(403, 'SubscribeURL is not on a trusted SNS host');
      const res = await fetch(m.SubscribeURL!, { redirect: 'error', signal: AbortSignal.timeout(5_000) }).catch(
        (err: Error) => {
          throw new SnsRejection(503, `cannot confirm the subscription: ${err.message}`);
        },
      );
      if (!res.ok) throw new SnsRejection(503, `subscription confirmation answered ${res.status}`);
      const fresh = await recordSnsMessage(db, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type });
      log.info({ topicArn: m.TopicArn }, 'SNS subscription confirmed');
      return { type: m.Type, duplicate: !fresh };
    }
    if (m.Type === 'UnsubscribeConfirmation') {
      const fresh = await recordSnsMessage(db, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type });
      log.warn(
        { topicArn: m.TopicArn },
        'SNS subscription removed: SES events stop arriving until an operator re-subscribes',
      );
      return { type: m.Type, duplicate: !fresh };
    }
    // SES receiving (a receipt rule's SNS or S3 action) publishes `notificationType: Received`: a message for us.
    const record = jsonOrUndefined(m.Message);
    if (isReceiptRecord(record)) {
      const r = await receive(parseSesReceipt(record), { messageId: m.MessageId, topicArn: m.TopicArn }, log);
      return { type: m.Type, duplicate: r.duplicate, inbound: r.inbound, ...(r.ignored ? { ignored: r.ignored } : {}) };
    }
    const feedback = parseSesEvent(m.Message);
    const event = { kind: feedback.kind, ...(feedback.bounceType ? { bounceType: feedback.bounceType } : {}) };
    const outcome = await db.transaction(async (tx): Promise<FeedbackOutcome | 'duplicate'> => {
      if (!(await recordSnsMessage(tx, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type })))
        return 'duplicate';
      return applySesFeedback(tx, feedback, policy, config.guardrails);
    });
    if (outcome === 'duplicate') return { type: m.Type, duplicate: true };
    if (!outcome.applied) {
      log.info({ snsMessageId: m.MessageId, reason: outcome.reason }, 'SES event ignored');
      return { type: m.Type, duplicate: false, ignored: outcome.reason, event };
    }
    await relayWebhookDeliveries(deps.webhookQueue, config, outcome.deliveries, log);
    return {
      type: m.Type,
      duplicate: false,
      emailId: outcome.emailId,
      status: outcome.status,
      suppressed: outcome.suppressed,
      event,
    };
  };

  return async (body, log) => {
    const m = parseSnsMessage(body);
    if (!topics.has(m.TopicArn)) throw new SnsRejection(403, 'topic is not accepted here (SNS_TOPIC_ARNS)');
    await verifier.verify(m);
    return handle(m, log);
  };
}

function jsonOrUndefined(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
