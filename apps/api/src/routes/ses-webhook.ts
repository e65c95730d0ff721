/**
 * `POST /webhooks/ses` (and `POST /webhooks/sns`, Plunk's path for the same endpoint, so an SNS subscription made
 * for Plunk keeps working unchanged): the Amazon SNS HTTP(S) endpoint of SES event publishing (a configuration set,
 * `SES_CONFIGURATION_SET`, publishing to an SNS topic listed in `SNS_TOPIC_ARNS`). No API key: the SNS
 * signature is the authority. What a message does: `@mailroom/feedback/ses-webhook`.
 *
 * Answers: 200 with the handling's result; a refused message is 400 (malformed JSON, not of the SNS shape, or not
 * an SES event), 403 (unsigned, i.e. `SignatureVersion`, `Signature` or `SigningCertURL` missing or malformed,
 * forged, tampered, stale or foreign: an authentication failure) or 503 (certificate or confirmation fetch failed),
 * and changes nothing. SNS retries 5xx answers, so a passing database problem comes back too.
 *
 * @module
 */
import express, { type Request, type Response, type Router } from 'express';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { SnsRejection } from '@mailroom/feedback/sns';
import { SesEventError } from '@mailroom/feedback/ses-events';
import { createSesWebhookHandler, type SesWebhookResult } from '@mailroom/feedback/ses-webhook';
import type { AppDeps } from '../http/context';

const REJECTION_CODE = {
  400: ErrorCode.BAD_REQUEST,
  403: ErrorCode.FORBIDDEN,
  503: ErrorCode.SERVICE_UNAVAILABLE,
} as const;

/** The endpoint's paths: ours, and Plunk's alias. */
export const SES_WEBHOOK_PATHS = ['/webhooks/ses', '/webhooks/sns'] as const;

/**
 * Mounts `POST /webhooks/ses` and its alias `POST /webhooks/sns`.
 *
 * @param onEvent - called once per SES event seen for the first time (the metrics' `mailroom_ses_events_total`).
 */
export function mountSesWebhook(
  router: Router,
  deps: AppDeps,
  onEvent: (event: NonNullable<SesWebhookResult['event']>) => void = () => undefined,
): void {
  const handle = createSesWebhookHandler({
    config: deps.config,
    db: deps.database.db,
    webhookQueue: deps.queues.webhook,
  });

  // SNS posts `text/plain; charset=UTF-8` whatever the content; read the body as text of any type.
  router.post(
    [...SES_WEBHOOK_PATHS],
    express.text({ type: () => true, limit: '512kb' }),
    async (req: Request, res: Response) => {
      const log = res.locals.log;
      try {
        const { event, ...data } = await handle(typeof req.body === 'string' ? req.body : '', log);
        if (event) onEvent(event);
        res.json({ success: true, data });
      } catch (err) {
        if (err instanceof SnsRejection) {
          log.warn({ reason: err.message }, 'SNS message refused');
          throw new AppError(REJECTION_CODE[err.status], err.message);
        }
        if (err instanceof SesEventError) throw new AppError(ErrorCode.BAD_REQUEST, err.message);
        throw err;
      }
    },
  );
}

const sesEventsOperation = {
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
    requestBody: {
      required: true,
      content: { 'text/plain': { schema: { type: 'string', description: 'the SNS message JSON' } } },
    },
    responses: {
      200: { description: 'Processed (or a redelivery, `duplicate: true`)' },
      400: {
        description: 'Malformed: not JSON, not of the SNS message shape (signature fields aside), or not an SES event',
      },
      403: {
        description:
          'Not authenticated: unsigned (`SignatureVersion` 1 or 2, `Signature` or `SigningCertURL` missing or malformed), ' +
          'forged or tampered, older than 30 days, untrusted certificate URL, or a topic not accepted',
      },
      503: { description: 'Signing certificate or database unreachable; SNS retries' },
    },
  },
};

/** OpenAPI description of the route (it reads its own body, so it is not a declared route), under both paths. */
export const sesWebhookOpenApiPaths = {
  '/webhooks/ses': sesEventsOperation,
  '/webhooks/sns': {
    post: {
      ...sesEventsOperation.post,
      operationId: 'snsEvents',
      summary: "Alias of POST /webhooks/ses under Plunk's path",
      description: `The same endpoint as \`POST /webhooks/ses\`, at the path Plunk uses, so an SNS subscription made for Plunk works unchanged. ${sesEventsOperation.post.description}`,
    },
  },
};
