/**
 * The public double opt-in confirmation (docs/guides/topics.md, double opt-in). No API key: the signed token is the
 * authority.
 *
 * - `GET /confirm?token=…`: a page with one button. A GET never confirms, because link scanners and mail security
 *   gateways fetch every link in a message.
 * - `POST /confirm` (form field `token`, from that page): confirms once, recording the proof of consent (time, the
 *   client's IP address as `TRUST_PROXY` resolves it, its user agent), subscribes the contact (globally, or to the
 *   confirmation's topics), records `contact.confirmed` (event and webhook). A repeat answers "already confirmed"
 *   and changes nothing; a confirmation older than `DOUBLE_OPT_IN_EXPIRY_HOURS`, or expired by the worker's pass,
 *   answers 410 and changes nothing.
 *
 * An unknown, tampered or foreign token gets 404. Failed lookups are counted per client IP as the unsubscribe page
 * counts them (`UNSUBSCRIBE_LIMIT_PER_MINUTE`). The pages carry the unsubscribe pages' headers (strict CSP, no
 * framing, no referrer).
 *
 * @module
 */
import express, { type Request, type Response, type Router } from 'express';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { confirmDoubleOptIn, confirmationTokenId, verifyConfirmationToken } from '@mailroom/contacts/double-opt-in';
import { confirmationTarget, type ConfirmationTarget } from '@mailroom/contacts/queries/confirmations';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { sql } from 'drizzle-orm';
import type { AppDeps } from '../http/context';
import { clientIp, FailureLimiter } from '../http/rate-limit';
import { escapeHtml, page, pageHeaders } from './unsubscribe';

/** Mounts `GET /confirm` and `POST /confirm`. */
export function mountConfirm(router: Router, deps: AppDeps): void {
  const { db } = deps.database;
  const failures = new FailureLimiter(deps.redis, deps.config.queuePrefix, {
    name: 'confirm',
    perMinute: deps.config.unsubscribeLimitPerMinute,
    trickleIntervalSeconds: deps.config.blockedLookupIntervalSeconds,
    what: 'unknown confirmation links',
  });

  /** The confirmation a token names, once its MAC checks out. @throws 404, 429 (as the unsubscribe routes). */
  const resolve = async (req: Request, token: unknown): Promise<ConfirmationTarget> => {
    const client = clientIp(req);
    const id = typeof token === 'string' ? confirmationTokenId(token) : undefined;
    if (!id) {
      await failures.fail(client);
      throw notFound('Confirmation link');
    }
    const attempt = await failures.attempt(client);
    const target = await confirmationTarget(db, id);
    if (!target || !verifyConfirmationToken(token as string, target.id, target.signingKey))
      throw attempt.failure(notFound('Confirmation link'));
    await attempt.succeeded();
    return target;
  };

  const expired = (t: ConfirmationTarget) =>
    t.expiredAt !== null ||
    (!t.confirmedAt && t.createdAt.getTime() + deps.config.doubleOptInExpiryHours * 3_600_000 < Date.now());
  const gone = () => new AppError(ErrorCode.EXPIRED, 'This confirmation link has expired');

  router.use('/confirm', pageHeaders);
  router.get('/confirm', async (req: Request, res: Response) => {
    const token = typeof req.query.token === 'string' ? req.query.token : '';
    const target = await resolve(req, token);
    res.set('Cache-Control', 'no-store').type('html');
    if (target.confirmedAt) {
      res.send(
        page('Confirmed', `<h1>Already confirmed</h1><p>${escapeHtml(target.email)} is confirmed. Thank you.</p>`),
      );
      return;
    }
    if (expired(target)) {
      res
        .status(410)
        .send(
          page('Link expired', '<h1>Link expired</h1><p>This confirmation link has expired. Please sign up again.</p>'),
        );
      return;
    }
    res.send(
      page(
        'Confirm your subscription',
        `<h1>Confirm your subscription</h1><p>Confirm email to <strong>${escapeHtml(target.email)}</strong>?</p>
<form method="post" action="confirm"><input type="hidden" name="token" value="${escapeHtml(token)}"><button type="submit">Confirm</button></form>`,
      ),
    );
  });

  router.post(
    '/confirm',
    express.urlencoded({ extended: false, limit: '4kb' }),
    async (req: Request, res: Response) => {
      const form = req.body as Record<string, unknown> | undefined;
      const target = await resolve(req, form?.token ?? req.query.token);
      res.set('Cache-Control', 'no-store');
      if (!target.confirmedAt && expired(target)) throw gone();
      const log = res.locals.log;
      const proof = { ip: clientIp(req), userAgent: req.get('user-agent')?.slice(0, 1000) ?? null };
      const { outcome, deliveries } = await db.transaction(async (tx) => {
        const test = await tx.execute<{ test: boolean }>(
          sql`select test from emails where id = ${target.emailId}::uuid`,
        );
        const outcome = await confirmDoubleOptIn(tx, target, proof, test.rows[0]?.test ?? false);
        const deliveries =
          outcome.status === 'confirmed' ? await recordWebhookEvents(tx, target.projectId, outcome.events) : [];
        return { outcome, deliveries };
      });
      await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log);
      if (outcome.status === 'expired') throw gone();
      const confirmed = outcome.status === 'confirmed';
      if (req.accepts(['html', 'json']) === 'json') {
        res.json({ success: true, data: { email: target.email, confirmed: true, changed: confirmed } });
        return;
      }
      res
        .type('html')
        .send(
          page(
            'Confirmed',
            `<h1>${confirmed ? 'Subscription confirmed' : 'Already confirmed'}</h1><p>${escapeHtml(target.email)} is confirmed. Thank you.</p>`,
          ),
        );
    },
  );
}

const tokenField = {
  type: 'string',
  pattern: '^[A-Za-z0-9_-]{43}$',
  description: 'the signed token from the confirmation email',
};

/** OpenAPI paths of the two routes (they answer HTML, so they are not declared with `route()`). */
export const confirmOpenApiPaths = {
  '/confirm': {
    get: {
      operationId: 'confirmPage',
      summary: 'Double opt-in confirmation page (never confirms by itself)',
      tags: ['Topics'],
      security: [],
      parameters: [{ name: 'token', in: 'query', required: true, schema: tokenField }],
      responses: {
        200: { description: 'HTML page with one button (or "already confirmed")', content: { 'text/html': {} } },
        404: { description: 'Unknown, tampered or foreign token' },
        410: { description: 'The link expired (DOUBLE_OPT_IN_EXPIRY_HOURS)' },
        429: { description: 'Over UNSUBSCRIBE_LIMIT_PER_MINUTE failed lookups from this IP in the minute' },
      },
    },
    post: {
      operationId: 'confirm',
      summary: "Confirm a double opt-in (the page's button); idempotent",
      description:
        "Records the proof (time, IP address, user agent), subscribes the contact (globally, or to the confirmation's topics) and " +
        'records `contact.confirmed`, once. Answers HTML, or `{success, data: {email, confirmed, changed}}` when the client accepts JSON.',
      tags: ['Topics'],
      security: [],
      requestBody: {
        required: true,
        content: {
          'application/x-www-form-urlencoded': {
            schema: { type: 'object', required: ['token'], properties: { token: tokenField } },
          },
        },
      },
      responses: {
        200: { description: 'Confirmed (or already)' },
        404: { description: 'Unknown, tampered or foreign token' },
        410: { description: 'The link expired (DOUBLE_OPT_IN_EXPIRY_HOURS)' },
        429: { description: 'Over UNSUBSCRIBE_LIMIT_PER_MINUTE failed lookups from this IP in the minute' },
      },
    },
  },
};
