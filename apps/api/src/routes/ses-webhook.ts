/**
 * `POST /webhooks/ses`: the Amazon SNS HTTP(S) endpoint of SES event publishing (a configuration set,
 * `SES_CONFIGURATION_SET`, publishing to an SNS topic listed in `SNS_TOPIC_ARNS`). No API key: the SNS
 * signature is the authority.
 *
 * - Every message is checked: its topic must be one we accept, and its signature must verify against the
 *   certificate at `SigningCertURL` on a trusted SNS host (see `@mailroom/core` sns). Anything else is refused
 *   (400 malformed JSON or not of the SNS shape; 403 unsigned, i.e. `SignatureVersion`, `Signature` or
 *   `SigningCertURL` missing or malformed, forged, tampered, stale or foreign: an authentication failure) and
 *   changes nothing.
 * - `SubscriptionConfirmation`: confirmed by fetching its `SubscribeURL` (also on a trusted host).
 *   `UnsubscribeConfirmation`: acknowledged and logged (re-subscribing is an operator's decision).
 * - `Notification`: one transaction records the SNS `MessageId` and applies the SES event (status, counters,
 *   timeline, contact event, suppression, the campaign guardrail's pause, webhook deliveries). A redelivered message id is acknowledged with no
 *   effect. The webhook deliveries are enqueued after the commit.
 *
 * SNS (https://docs.aws.amazon.com/sns/latest/dg/sns-message-delivery-retries.html) retries 5xx answers, so a
 * passing database or certificate-fetch problem is answered 503 and the message comes back.
 *
 * @module
 */
import express, { type Request, type Response, type Router } from 'express';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { announceWebhookDeliveries } from '@mailroom/queues/enqueue';
import { isTrustedSnsUrl, parseSnsMessage, SnsRejection, SnsVerifier, type SnsMessage } from '@mailroom/feedback/sns';
import { parseSesEvent, SesEventError } from '@mailroom/feedback/ses-events';
import { applySesFeedback, recordSnsMessage, type FeedbackOutcome } from '@mailroom/feedback/queries/feedback';
import type { AppDeps } from '../http/context';

const REJECTION_CODE = { 400: ErrorCode.BAD_REQUEST, 403: ErrorCode.FORBIDDEN, 503: ErrorCode.SERVICE_UNAVAILABLE } as const;

/** What the endpoint answers (`data` of the envelope). */
export interface SesWebhookResult {
  type: SnsMessage['Type'];
  /** The message id was seen before: nothing changed. */
  duplicate: boolean;
  /** For a notification: the email it concerned and what it did (absent for unknown messages). */
  emailId?: string;
  status?: string;
  suppressed?: string[];
  ignored?: string;
}

/** Mounts `POST /webhooks/ses`. */
export function mountSesWebhook(router: Router, deps: AppDeps): void {
  const { config } = deps;
  const { db } = deps.database;
  const verifier = new SnsVerifier(config.snsCertHosts);
  const topics = new Set(config.snsTopicArns);
  const policy = { limit: config.softBounceLimit, windowHours: config.softBounceWindowHours };

  const handle = async (m: SnsMessage, log: AppDeps['logger']): Promise<SesWebhookResult> => {
    if (m.Type === 'SubscriptionConfirmation') {
      if (!isTrustedSnsUrl(m.SubscribeURL!, config.snsCertHosts)) throw new SnsRejection(403, 'SubscribeURL is not on a trusted SNS host');
      const res = await fetch(m.SubscribeURL!, { redirect: 'error', signal: AbortSignal.timeout(5_000) }).catch((err: Error) => {
        throw new SnsRejection(503, `cannot confirm the subscription: ${err.message}`);
      });
      if (!res.ok) throw new SnsRejection(503, `subscription confirmation answered ${res.status}`);
      const fresh = await recordSnsMessage(db, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type });
      log.info({ topicArn: m.TopicArn }, 'SNS subscription confirmed');
      return { type: m.Type, duplicate: !fresh };
    }
    if (m.Type === 'UnsubscribeConfirmation') {
      const fresh = await recordSnsMessage(db, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type });
      log.warn({ topicArn: m.TopicArn }, 'SNS subscription removed: SES events stop arriving until an operator re-subscribes');
      return { type: m.Type, duplicate: !fresh };
    }
    const outcome = await db.transaction(async (tx): Promise<FeedbackOutcome | 'duplicate'> => {
      if (!(await recordSnsMessage(tx, { messageId: m.MessageId, topicArn: m.TopicArn, type: m.Type }))) return 'duplicate';
      return applySesFeedback(tx, parseSesEvent(m.Message), policy, config.guardrails);
    });
    if (outcome === 'duplicate') return { type: m.Type, duplicate: true };
    if (!outcome.applied) {
      log.info({ snsMessageId: m.MessageId, reason: outcome.reason }, 'SES event ignored');
      return { type: m.Type, duplicate: false, ignored: outcome.reason };
    }
    await announceWebhookDeliveries(deps.queues.webhook, config, outcome.deliveries, log);
    return { type: m.Type, duplicate: false, emailId: outcome.emailId, status: outcome.status, suppressed: outcome.suppressed };
  };

  // SNS posts `text/plain; charset=UTF-8` whatever the content; read the body as text of any type.
  router.post('/webhooks/ses', express.text({ type: () => true, limit: '512kb' }), async (req: Request, res: Response) => {
    const log = res.locals.log;
    try {
      const m = parseSnsMessage(typeof req.body === 'string' ? req.body : '');
      if (!topics.has(m.TopicArn)) throw new SnsRejection(403, 'topic is not accepted here (SNS_TOPIC_ARNS)');
      await verifier.verify(m);
      const data = await handle(m, log);
      res.json({ success: true, data });
    } catch (err) {
      if (err instanceof SnsRejection) {
        log.warn({ reason: err.message }, 'SNS message refused');
        throw new AppError(REJECTION_CODE[err.status], err.message);
      }
      if (err instanceof SesEventError) throw new AppError(ErrorCode.BAD_REQUEST, err.message);
      throw err;
    }
  });
}

/** OpenAPI description of the route (it reads its own body, so it is not a declared route). */
export const sesWebhookOpenApiPaths = {
  '/webhooks/ses': {
    post: {
      operationId: 'sesEvents',
      summary: 'Amazon SNS endpoint for SES event publishing',
      description:
        'Point the SNS topic of the SES configuration set (`SES_CONFIGURATION_SET`) here. Only topics listed in ' +
        '`SNS_TOPIC_ARNS` are accepted, and every message must carry a valid SNS signature (SignatureVersion 1 or 2) ' +
        'whose certificate is on a trusted SNS host. Subscription confirmations are confirmed automatically. ' +
        'Notifications (Delivery, DeliveryDelay, Bounce, Complaint, Reject, Open, Click, Rendering Failure) move the ' +
        'email forward only, count opens and clicks, record `email.<event>` on the contact, feed the suppression list ' +
        '(permanent bounces and complaints at once, transient bounces after `SOFT_BOUNCE_LIMIT` within ' +
        '`SOFT_BOUNCE_WINDOW_HOURS`; complaints also unsubscribe) and trigger outbound webhooks. A message id seen ' +
        'before changes nothing.',
      tags: ['Delivery feedback'],
      security: [],
      requestBody: { required: true, content: { 'text/plain': { schema: { type: 'string', description: 'the SNS message JSON' } } } },
      responses: {
        200: { description: 'Processed (or a redelivery, `duplicate: true`)' },
        400: { description: 'Malformed: not JSON, not of the SNS message shape (signature fields aside), or not an SES event' },
        403: {
          description:
            'Not authenticated: unsigned (`SignatureVersion` 1 or 2, `Signature` or `SigningCertURL` missing or malformed), ' +
            'forged or tampered, older than 30 days, untrusted certificate URL, or a topic not accepted',
        },
        503: { description: 'Signing certificate or database unreachable; SNS retries' },
      },
    },
  },
};
