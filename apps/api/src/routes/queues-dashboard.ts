/**
 * The queue dashboard: bull-board (`@bull-board/express`) at `/admin/queues`, showing every queue of the
 * catalog (`@mailroom/queues/catalog`: send, contact-import, campaign, webhook, workflow, maintenance), where
 * operators see why a job failed and retry it.
 *
 * Guarded by `ADMIN_TOKEN`, usable from a browser: `GET /admin/login` shows a form; `POST /admin/login` with the
 * right token sets an HttpOnly, SameSite=Strict session cookie (`mailroom_admin`, an HMAC of the token and its
 * issue time, valid 12 hours; changing `ADMIN_TOKEN` ends every session) and redirects to the dashboard. A
 * `Authorization: Bearer <ADMIN_TOKEN>` header works too. Without either, a browser is sent to the login page
 * and anything else gets 401.
 *
 * Abuse: `POST /admin/login` is limited per client IP (`ADMIN_LOGIN_LIMIT_PER_MINUTE`, every attempt counted
 * before the token is read), and a wrong token there or in the bearer header counts as a failed authentication
 * (`AUTH_FAILURE_LIMIT_PER_MINUTE`); both answer 429 with `Retry-After` (the login page for a browser, the
 * standard error body otherwise). Once the address is over its failure limit, a bearer header gets 429 whatever
 * the token (no oracle at full speed); a valid session cookie keeps working, and the login form (at its own
 * slow limit) still takes the right token.
 *
 * CSRF: the SameSite=Strict cookie is not the only defence. Every state-changing call (any method but GET, HEAD,
 * OPTIONS) to the login, the logout and the dashboard is refused with 403 `FORBIDDEN` when the browser says it
 * comes from another site: `Sec-Fetch-Site` other than `same-origin` or `none` (Fetch Metadata), or, from a browser
 * that sends no `Sec-Fetch-Site`, an `Origin` other than this server's (the request's own origin or `PUBLIC_URL`'s;
 * `Origin: null` is refused). A request with neither header is not a browser's cross-site request (curl, scripts
 * with the bearer token) and passes. `same-site` is refused too: a sibling subdomain is another party, yet a
 * SameSite cookie goes with its requests. The session cookie is `Secure` whenever `PUBLIC_URL` is https.
 *
 * While Redis is unreachable the dashboard's API (`/admin/queues/api/…`) answers 503 `SERVICE_UNAVAILABLE` with
 * the standard error body, like every other route, rather than bull-board's own 500.
 *
 * @module
 */
import { createHmac } from 'node:crypto';
import express, { type Request, type RequestHandler, type Response, type Router } from 'express';
import { parse as parseCookies } from 'cookie';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import { AppError, ErrorCode, isUnavailableError } from '@mailroom/platform/errors';
import { queueList } from '@mailroom/queues/create';
import { safeEqual } from '@mailroom/platform/bearer';
import { checkAdminBearer, checkAdminToken } from '../http/auth';
import type { AppDeps } from '../http/context';
import { clientIp, IpLimiter, type FailureLimiter } from '../http/rate-limit';

const BASE = '/admin/queues';
const COOKIE = 'mailroom_admin';
const SESSION_MS = 12 * 3600_000;

function sessionValue(token: string, issuedAt: number): string {
  return `${issuedAt}.${createHmac('sha256', token).update(`mailroom-admin-session:${issuedAt}`).digest('base64url')}`;
}

function validSession(token: string, value: string | undefined): boolean {
  if (!value) return false;
  const issuedAt = Number(value.split('.')[0]);
  if (!Number.isFinite(issuedAt) || Date.now() - issuedAt > SESSION_MS || issuedAt > Date.now() + 60_000) return false;
  return safeEqual(value, sessionValue(token, issuedAt));
}

function loginPage(message?: string): string {
  const note = message ? `<p class="error">${message}</p>` : '';
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Mailroom admin</title>
<style>body{font-family:system-ui,sans-serif;max-width:24rem;margin:6rem auto;padding:0 1rem}input,button{font:inherit;padding:.5rem;width:100%;box-sizing:border-box;margin:.25rem 0}.error{color:#b00020}</style>
</head><body><h1>Mailroom admin</h1>${note}
<form method="post" action="/admin/login"><label for="token">Admin token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required autofocus>
<button type="submit">Sign in</button></form></body></html>`;
}

/** A `<link>` to a stylesheet on Google Fonts. */
const REMOTE_FONT_LINK = /<link[^>]+href="https:\/\/fonts\.(googleapis|gstatic)\.com[^>]*>/g;

/**
 * bull-board's adapter, except that an error meaning Redis (or Postgres) is unreachable goes on to the app's
 * error middleware (503 `SERVICE_UNAVAILABLE`, standard body) instead of bull-board's 500.
 */
class DashboardAdapter extends ExpressAdapter {
  /**
   * bull-board's page links a web font from fonts.googleapis.com, which an offline or locked-down operator network
   * cannot reach (and which tells a third party who opens the dashboard): the rendered page drops the link and
   * falls back to the system font. Everything else the page loads is served from here.
   */
  override setViewsPath(viewPath: string): this {
    super.setViewsPath(viewPath);
    type Engine = (file: string, options: object, cb: (err: Error | null, html?: string) => void) => void;
    const app = (this as unknown as { app: { engines: Record<string, Engine>; engine(ext: string, fn: Engine): void } })
      .app;
    const render = app.engines['.ejs'];
    app.engine('ejs', (file, options, cb) =>
      render(file, options, (err, html) => cb(err, html?.replace(REMOTE_FONT_LINK, ''))),
    );
    return this;
  }

  override setErrorHandler(handler: Parameters<ExpressAdapter['setErrorHandler']>[0]): this {
    return super.setErrorHandler((err) => {
      if (isUnavailableError(err)) throw err;
      return handler(err);
    });
  }
}

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * Whether a request is a browser's cross-site (or same-site, other-origin) request, from its Fetch Metadata
 * (`Sec-Fetch-Site`, W3C Fetch Metadata Request Headers) or, failing that, its `Origin` (RFC 6454 §7).
 *
 * @param publicOrigin - the origin of `PUBLIC_URL` (scheme://host[:port]).
 */
export function fromAnotherSite(req: Request, publicOrigin: string): boolean {
  const site = req.get('sec-fetch-site')?.trim().toLowerCase();
  if (site) return site !== 'same-origin' && site !== 'none';
  const origin = req.get('origin')?.trim();
  if (origin === undefined || origin === '') return false;
  const host = req.get('host');
  const own = host ? `${req.protocol}://${host}`.toLowerCase() : undefined;
  const given = origin.toLowerCase();
  return given !== publicOrigin && given !== own;
}

const unavailable = () =>
  new AppError(ErrorCode.SERVICE_UNAVAILABLE, 'The queue dashboard needs Redis, which is unreachable; retry shortly', {
    headers: { 'Retry-After': '5' },
  });

/**
 * Mounts the login routes and the dashboard (nothing when `ADMIN_TOKEN` is unset: the admin surface is off).
 *
 * @param failures - the app's failed-authentication counter (wrong tokens count against the client IP).
 */
export function mountQueueDashboard(router: Router, deps: AppDeps, failures: FailureLimiter): void {
  const token = deps.config.adminToken;
  if (!token) return;
  const publicUrl = new URL(deps.config.publicUrl);
  const publicOrigin = publicUrl.origin.toLowerCase();
  // `URL` lower-cases the scheme: `HTTPS://…` is https too.
  const secure = publicUrl.protocol === 'https:';
  const cookieOptions = { httpOnly: true, sameSite: 'strict', path: '/admin', secure } as const;
  const sameOrigin: RequestHandler = (req, _res, next) => {
    if (!SAFE_METHODS.has(req.method) && fromAnotherSite(req, publicOrigin)) {
      throw new AppError(
        ErrorCode.FORBIDDEN,
        'Refused: a state-changing dashboard call must come from the dashboard itself (cross-site request)',
      );
    }
    next();
  };
  const loginLimit = new IpLimiter(
    deps.redis,
    deps.config.queuePrefix,
    'adminlogin',
    deps.config.adminLoginLimitPerMinute,
    'sign-in attempts',
  );
  const serverAdapter = new DashboardAdapter().setBasePath(BASE);
  createBullBoard({
    // Every queue of the catalog; the maintenance queue's jobs are the worker's, read here through this process's connection.
    queues: queueList(deps.queues).map((q) => new BullMQAdapter(q)),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'Mailroom queues' } },
  });

  router.get('/admin/login', (_req, res) => {
    res.type('html').send(loginPage());
  });
  // A browser gets the login page with the refusal; any other client the standard error body.
  const refuse = (req: Request, res: Response, err: unknown): void => {
    if (!(err instanceof AppError) || req.accepts(['html', 'json']) !== 'html') throw err;
    for (const [k, v] of Object.entries(err.options.headers ?? {})) res.setHeader(k, v);
    const message =
      err.code === ErrorCode.RATE_LIMITED
        ? `Too many attempts: try again in ${err.options.headers?.['Retry-After'] ?? 'a few'} s.`
        : 'That token is not right.';
    res.status(err.statusCode).type('html').send(loginPage(message));
  };
  router.post(
    '/admin/login',
    sameOrigin,
    async (req, res, next) => {
      // Counted before the body is read: a refused client costs no parsing.
      try {
        await loginLimit.consume(clientIp(req));
      } catch (err) {
        return refuse(req, res, err);
      }
      next();
    },
    express.urlencoded({ extended: false, limit: '4kb' }),
    async (req, res) => {
      const posted = (req.body as { token?: unknown } | undefined)?.token;
      const given = typeof posted === 'string' ? posted : '';
      try {
        if (!(await checkAdminToken(req, given, token, failures)))
          throw new AppError(ErrorCode.UNAUTHORIZED, 'Give the admin token');
      } catch (err) {
        return refuse(req, res, err);
      }
      res.cookie(COOKIE, sessionValue(token, Date.now()), { ...cookieOptions, maxAge: SESSION_MS });
      res.redirect(303, BASE);
    },
  );
  router.post('/admin/logout', sameOrigin, (_req, res) => {
    res.clearCookie(COOKIE, cookieOptions);
    res.redirect(303, '/admin/login');
  });

  const guard: RequestHandler = async (req, res, next) => {
    const header = req.get('authorization');
    const bearer = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    // A signed-in operator is let through first: it costs no Redis call and works from a blocked address.
    if (validSession(token, parseCookies(req.headers.cookie ?? '')[COOKIE])) return next();
    // A wrong bearer token counts as a failed authentication (401, or 429 beyond the limit, whatever the token).
    if (await checkAdminBearer(req, bearer, token, failures)) return next();
    if (req.accepts(['html', 'json']) === 'html' && req.method === 'GET') return res.redirect(303, '/admin/login');
    throw new AppError(ErrorCode.UNAUTHORIZED, 'Sign in at /admin/login or send the admin token');
  };
  // The dashboard's API reads Redis on every call: with Redis down, answer 503 at once rather than try. (A call
  // already under way when Redis goes gets its 503 from DashboardAdapter.)
  const redisUp: RequestHandler = (req, _res, next) => {
    if (req.path.startsWith('/api/') && deps.redis.status !== 'ready') throw unavailable();
    next();
  };
  router.use(BASE, sameOrigin, guard, redisUp, serverAdapter.getRouter() as RequestHandler);
}
