/**
 * The public unsubscribe endpoint of marketing mail (docs/api/overview.md, marketing mail; RFC 8058 one-click; RFC 2369
 * List-Unsubscribe). No API key: the signed token in the path is the authority.
 *
 * - `GET /unsubscribe/{token}`: a confirmation page with one button. A GET never unsubscribes, because link
 *   scanners and mail security gateways fetch every link in a message.
 * - `POST /unsubscribe/{token}`: unsubscribes the email's contact (`subscribed=false`, event
 *   `contact.unsubscribed`, the email's timeline, the campaign's count, the `contact.unsubscribed` webhook:
 *   `@mailroom/feedback/unsubscribe`). Mailbox providers POST
 *   `List-Unsubscribe=One-Click` here (RFC 8058 §3.2). Idempotent: a repeat changes nothing and answers the same.
 *   Answers HTML, or the JSON envelope when the client accepts JSON.
 *
 * The page also offers to pause marketing email for a while instead (`unsubscribe-pause.ts`).
 * With topics (docs/guides/topics.md), the page is the preference center and the POST reads an `action`
 * (`preference-center.ts`); a topic's email's one-click POST leaves that topic only.
 *
 * An unknown, tampered or foreign token gets 404, and nothing changes. Both routes count *failed* lookups per
 * client IP (`UNSUBSCRIBE_LIMIT_PER_MINUTE`, default 300): each made-up token costs a database lookup, while
 * mailbox providers send real one-click POSTs from shared relays, which must never be rationed. A lookup is
 * counted before it is made (atomic in Redis, so a parallel burst cannot pass the limit) and given back when the
 * token resolves, so valid tokens never count. Beyond the limit the address gets 429 `RATE_LIMITED` with
 * `Retry-After` and no lookup, except one lookup per `BLOCKED_LOOKUP_INTERVAL_SECONDS` (a valid token then succeeds).
 * So a valid token is refused only while its address is over the limit through failures of its own (or, at one
 * instant, more than the limit of lookups in flight).
 *
 * Both routes (and their error answers) carry a strict `Content-Security-Policy` (the pages run no script and
 * load nothing: `default-src 'none'`, their one inline stylesheet allowed by its hash, `form-action 'self'`,
 * `frame-ancestors 'none'`, `base-uri 'none'`), `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` (for
 * browsers without `frame-ancestors`) and `Referrer-Policy: no-referrer` (the path holds the token).
 *
 * @module
 */
import { createHash } from 'node:crypto';
import express, { type Request, type Response, type Router } from 'express';
import { notFound } from '@mailroom/platform/errors';
import { parseUnsubscribeToken } from '@mailroom/mail/unsubscribe';
import { preferencesOf, savePreferences, unsubscribeTopicThroughLink } from '@mailroom/feedback/preferences';
import { checkedTopics, preferenceCenterBody, savedBody, unsubscribeAction } from './preference-center';
import { type UnsubscribeTarget } from '@mailroom/contacts/queries/unsubscribe';
import { unsubscribeTargetOf, unsubscribeThroughLink } from '@mailroom/feedback/unsubscribe';
import type { AppDeps } from '../http/context';
import { clientIp, FailureLimiter } from '../http/rate-limit';
import { mountUnsubscribePause, pauseChoicesHtml, pauseOpenApiPath } from './unsubscribe-pause';

/** Escapes text for the pages' HTML. */
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

const STYLE = `body{font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;color:#222}
button{font:inherit;padding:.5rem 1rem;cursor:pointer}
label{display:block;margin:.5rem 0 0}small{display:block;color:#555;margin-left:1.6rem}fieldset{margin:1rem 0}form{margin:1rem 0}`;

/** The pages' Content-Security-Policy (CSP Level 3): nothing but their own inline stylesheet and a form to here. */
export const UNSUBSCRIBE_PAGE_CSP = [
  "default-src 'none'",
  `style-src 'sha256-${createHash('sha256').update(STYLE).digest('base64')}'`,
  "form-action 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
].join('; ');

/** A whole page of the public routes (unsubscribe, preference center, confirmation), under {@link UNSUBSCRIBE_PAGE_CSP}. */
export function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<meta name="robots" content="noindex"><title>${title}</title>
<style>${STYLE}</style></head><body>${body}</body></html>`;
}

/** The public pages' security headers. */
export const pageHeaders: express.RequestHandler = (_req, res, next) => {
  res.set({
    'Content-Security-Policy': UNSUBSCRIBE_PAGE_CSP,
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  });
  next();
};

/** Mounts the two unsubscribe routes. */
export function mountUnsubscribe(router: Router, deps: AppDeps): void {
  const { db } = deps.database;
  const failures = new FailureLimiter(deps.redis, deps.config.queuePrefix, {
    name: 'unsubscribe',
    perMinute: deps.config.unsubscribeLimitPerMinute,
    trickleIntervalSeconds: deps.config.blockedLookupIntervalSeconds,
    what: 'unknown unsubscribe links',
  });

  /**
   * The email a token names, once its MAC checks out. A token not even shaped like one costs no lookup and is
   * counted as a failure after; any other is counted before its lookup and given back if it resolves.
   *
   * @throws {@link AppError} 404 `NOT_FOUND` (unknown, tampered or foreign), 429 `RATE_LIMITED` (address over its
   *   limit of failed lookups).
   */
  const resolve = async (req: Request): Promise<UnsubscribeTarget> => {
    const token = String(req.params.token);
    const client = clientIp(req);
    const emailId = parseUnsubscribeToken(token)?.emailId;
    if (!emailId) {
      await failures.fail(client);
      throw notFound('Unsubscribe link');
    }
    const attempt = await failures.attempt(client);
    const target = await unsubscribeTargetOf(db, emailId, token);
    if (!target) throw attempt.failure(notFound('Unsubscribe link'));
    await attempt.succeeded();
    return target;
  };

  router.use('/unsubscribe', pageHeaders);
  router.get('/unsubscribe/:token', async (req: Request, res: Response) => {
    const target = await resolve(req);
    // With topics (or a topic's email), the preference center (preference-center.ts); else the one-button page.
    const center = preferenceCenterBody(target.toEmail, await preferencesOf(db, target), escapeHtml);
    res
      .set('Cache-Control', 'no-store')
      .type('html')
      .send(
        page(
          center ? 'Email preferences' : 'Unsubscribe',
          (center ??
            `<h1>Unsubscribe</h1><p>Stop marketing email to <strong>${escapeHtml(target.toEmail)}</strong>?</p>
<form method="post"><button type="submit">Unsubscribe</button></form>`) +
            `\n${pauseChoicesHtml(String(req.params.token), escapeHtml)}`,
        ),
      );
  });
  mountUnsubscribePause(router, deps, { resolve, page, escapeHtml });

  // RFC 8058 bodies are `application/x-www-form-urlencoded` (or multipart); only the fact of the POST matters.
  router.post(
    '/unsubscribe/:token',
    express.urlencoded({ extended: false, limit: '16kb' }),
    async (req: Request, res: Response) => {
      const target = await resolve(req);
      const form = req.body as Record<string, unknown> | undefined;
      const oneClick = form?.['List-Unsubscribe'] === 'One-Click' || req.is('multipart/form-data') !== false;
      res.set('Cache-Control', 'no-store');
      const action = unsubscribeAction(form, oneClick, target.topicId !== null);
      if (action === 'preferences') {
        const changes = await savePreferences(deps, res.locals.log, target, checkedTopics(form));
        if (req.accepts(['html', 'json']) === 'json') {
          res.json({
            success: true,
            data: {
              email: target.toEmail,
              changed: changes.map((c) => ({ topicId: c.topicId, subscribed: c.subscribed })),
            },
          });
          return;
        }
        res.type('html').send(page('Preferences saved', savedBody(await preferencesOf(db, target), escapeHtml)));
        return;
      }
      if (action === 'unsubscribe_topic') {
        const changed = await unsubscribeTopicThroughLink(deps, res.locals.log, target, oneClick);
        const name = (await preferencesOf(db, target))?.emailTopic?.name ?? 'this topic';
        if (req.accepts(['html', 'json']) === 'json') {
          res.json({
            success: true,
            data: { email: target.toEmail, unsubscribed: true, topicId: target.topicId, changed },
          });
          return;
        }
        res
          .type('html')
          .send(
            page(
              'Unsubscribed',
              `<h1>Unsubscribed</h1><p>${escapeHtml(target.toEmail)} will no longer receive email about ${escapeHtml(name)}.</p>`,
            ),
          );
        return;
      }
      const changed = await unsubscribeThroughLink(deps, res.locals.log, target, oneClick);
      if (req.accepts(['html', 'json']) === 'json') {
        res.json({ success: true, data: { email: target.toEmail, unsubscribed: true, changed } });
        return;
      }
      res
        .type('html')
        .send(
          page(
            'Unsubscribed',
            `<h1>Unsubscribed</h1><p>${escapeHtml(target.toEmail)} will no longer receive marketing email from us.</p>`,
          ),
        );
    },
  );
}

const tokenParameter = {
  name: 'token',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}([A-Za-z0-9_-]{21})?$' },
  description: "the signed token from the message (64 characters for a topic's email: it carries the topic)",
};

/** OpenAPI paths of the two routes (they answer HTML, so they are not declared with `route()`). */
export const unsubscribeOpenApiPaths = {
  '/unsubscribe/{token}': {
    get: {
      operationId: 'unsubscribePage',
      summary:
        'Unsubscribe page, or the preference center when the project has topics (never changes anything by itself)',
      tags: ['Unsubscribe'],
      security: [],
      parameters: [tokenParameter],
      responses: {
        200: {
          description:
            'HTML page: one button; with public topics (or a topic email), a checkbox per public topic and "unsubscribe from all"',
          content: { 'text/html': {} },
        },
        404: { description: 'Unknown, tampered or foreign token' },
        429: {
          description:
            'Over UNSUBSCRIBE_LIMIT_PER_MINUTE failed lookups (unknown tokens) from this IP in the minute (`Retry-After` says when to retry)',
        },
      },
    },
    post: {
      operationId: 'unsubscribe',
      summary: "Unsubscribe (RFC 8058 one-click, or the page's button); idempotent",
      description:
        "Sets the contact's `subscribed` to false, records `contact.unsubscribed` and the email's `unsubscribed` timeline " +
        "entry, and counts it on the campaign, once. For a topic's email (a 64-character token) a one-click POST, or one " +
        'without `action`, leaves that topic only (`contact.topic_unsubscribed`), counted on the campaign once. `action=preferences` saves the preference ' +
        'center: each public topic subscribed when its id is among the `topic` fields, unsubscribed otherwise. ' +
        '`action=unsubscribe_all` leaves all marketing email. Answers HTML, or `{success, data: {email, unsubscribed, changed}}` ' +
        'when the client accepts JSON.',
      tags: ['Unsubscribe'],
      security: [],
      parameters: [tokenParameter],
      requestBody: {
        required: false,
        content: {
          'application/x-www-form-urlencoded': {
            schema: {
              type: 'object',
              properties: {
                'List-Unsubscribe': { const: 'One-Click' },
                action: { type: 'string', enum: ['unsubscribe_all', 'unsubscribe_topic', 'preferences'] },
                topic: {
                  type: 'array',
                  items: { type: 'string', format: 'uuid' },
                  description: 'with action=preferences: the checked topics (repeat the field)',
                },
              },
            },
          },
        },
      },
      responses: {
        200: { description: 'Unsubscribed (or already)' },
        404: { description: 'Unknown, tampered or foreign token' },
        429: {
          description:
            'Over UNSUBSCRIBE_LIMIT_PER_MINUTE failed lookups (unknown tokens) from this IP in the minute (`Retry-After` says when to retry); valid tokens are never counted',
        },
      },
    },
  },
  ...pauseOpenApiPath(tokenParameter),
};
