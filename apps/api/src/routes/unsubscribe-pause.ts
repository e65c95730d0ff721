/**
 * "Pause instead" on the unsubscribe page: beside the unsubscribe button, a plain HTML form (no script) offers to
 * pause marketing email for {@link PAUSE_CHOICES_DAYS} days. `POST /unsubscribe/{token}/pause` with `days` snoozes
 * the email's contact until then (`contacts.snoozed_until`, event and webhook `contact.snoozed` with `method:
 * link`, the email and its campaign). The contact stays subscribed; campaigns and marketing workflow steps skip it
 * until the date, and the worker announces `contact.unsnoozed` when it passes. The same signed token, rate limit
 * and headers as the unsubscribe routes apply (`unsubscribe.ts` mounts this).
 *
 * @module
 */
import express, { type Request, type Response, type Router } from 'express';
import { validationError } from '@mailroom/platform/errors';
import type { UnsubscribeTarget } from '@mailroom/contacts/queries/unsubscribe';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { PAUSE_CHOICES_DAYS, snoozeInTransaction } from '@mailroom/audiences/snooze';
import type { AppDeps } from '../http/context';

const DAY_MS = 86_400_000;

/** What the pause route borrows from the unsubscribe routes. */
export interface PausePageKit {
  /** The token's email (404 / 429 as the unsubscribe routes answer). */
  resolve: (req: Request) => Promise<UnsubscribeTarget>;
  /** A whole HTML page. */
  page: (title: string, body: string) => string;
  escapeHtml: (s: string) => string;
}

/**
 * The form shown under the unsubscribe button: one button per choice, posting `days` to `<token>/pause`
 * (relative to the page's own path, `/unsubscribe/<token>`).
 */
export function pauseChoicesHtml(token: string, escapeHtml: (s: string) => string): string {
  const buttons = PAUSE_CHOICES_DAYS.map(
    (d) => `<button type="submit" name="days" value="${d}">Pause for ${d} days</button>`,
  ).join(' ');
  return `<p>Or keep your subscription and pause marketing email for a while:</p>
<form method="post" action="${escapeHtml(token)}/pause">${buttons}</form>`;
}

/** Mounts `POST /unsubscribe/:token/pause`. */
export function mountUnsubscribePause(router: Router, deps: AppDeps, kit: PausePageKit): void {
  router.post(
    '/unsubscribe/:token/pause',
    express.urlencoded({ extended: false, limit: '4kb' }),
    async (req: Request, res: Response) => {
      const target = await kit.resolve(req);
      const days = Number((req.body as Record<string, unknown> | undefined)?.days);
      if (!(PAUSE_CHOICES_DAYS as readonly number[]).includes(days)) {
        throw validationError([
          { field: 'days', message: `must be one of ${PAUSE_CHOICES_DAYS.join(', ')}`, code: 'invalid_enum_value' },
        ]);
      }
      const until = new Date(Date.now() + days * DAY_MS);
      let changed = false;
      if (target.contactId) {
        const contactId = target.contactId;
        const { change, deliveries } = await deps.database.db.transaction((tx) =>
          snoozeInTransaction(tx, target.projectId, contactId, until, {
            method: 'link',
            emailId: target.emailId,
            campaignId: target.campaignId,
          }),
        );
        changed = change !== null;
        await relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, res.locals.log);
      }
      res.set('Cache-Control', 'no-store');
      if (req.accepts(['html', 'json']) === 'json') {
        res.json({ success: true, data: { email: target.toEmail, snoozedUntil: until.toISOString(), days, changed } });
        return;
      }
      const date = until.toISOString().slice(0, 10);
      res
        .type('html')
        .send(
          kit.page(
            'Paused',
            `<h1>Paused</h1><p>${kit.escapeHtml(target.toEmail)} will get no marketing email from us until ${date}. You stay subscribed.</p>`,
          ),
        );
    },
  );
}

/** OpenAPI path of the pause route (it answers HTML, so it is not declared with `route()`). */
export function pauseOpenApiPath(tokenParameter: Record<string, unknown>) {
  return {
    '/unsubscribe/{token}/pause': {
      post: {
        operationId: 'pauseMarketingEmail',
        summary: "Pause marketing email for 30 or 90 days instead of unsubscribing (the page's second form)",
        description:
          "Snoozes the email's contact until now plus `days` (`snoozedUntil`), records `contact.snoozed` (method `link`) and " +
          'announces its webhook; the contact stays subscribed. Answers HTML, or `{success, data: {email, snoozedUntil, days, changed}}` ' +
          'when the client accepts JSON. A `days` other than 30 or 90 gets 422.',
        tags: ['Unsubscribe'],
        security: [],
        parameters: [tokenParameter],
        requestBody: {
          required: true,
          content: {
            'application/x-www-form-urlencoded': {
              schema: {
                type: 'object',
                required: ['days'],
                properties: { days: { type: 'integer', enum: [...PAUSE_CHOICES_DAYS] } },
              },
            },
          },
        },
        responses: {
          200: { description: 'Paused' },
          404: { description: 'Unknown, tampered or foreign token' },
          422: { description: '`days` is not one of the choices' },
          429: {
            description: 'Over UNSUBSCRIBE_LIMIT_PER_MINUTE failed lookups (unknown tokens) from this IP in the minute',
          },
        },
      },
    },
  };
}
