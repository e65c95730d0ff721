/**
 * The queue dashboard: bull-board (`@bull-board/express`) at `/admin/queues`, showing every queue (send,
 * contact-import, campaign, webhook, workflow, maintenance), where operators see why a job failed and retry it.
 *
 * Guarded by `ADMIN_TOKEN`, usable from a browser: `GET /admin/login` shows a form; `POST /admin/login` with the
 * right token sets an HttpOnly, SameSite=Strict session cookie (`mailroom_admin`, an HMAC of the token and its
 * issue time, valid 12 hours; changing `ADMIN_TOKEN` ends every session) and redirects to the dashboard. A
 * `Authorization: Bearer <ADMIN_TOKEN>` header works too. Without either, a browser is sent to the login page
 * and anything else gets 401.
 *
 * @module
 */
import { createHmac } from 'node:crypto';
import express, { type RequestHandler, type Router } from 'express';
import { parse as parseCookies } from 'cookie';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { ExpressAdapter } from '@bull-board/express';
import { Queue } from 'bullmq';
import { QueueName, queueOptions, safeEqual } from '@mailroom/core';
import type { AppDeps } from '../http/context';

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

/** Mounts the login routes and the dashboard (nothing when `ADMIN_TOKEN` is unset: the admin surface is off). */
export function mountQueueDashboard(router: Router, deps: AppDeps): void {
  const token = deps.config.adminToken;
  if (!token) return;
  const serverAdapter = new ExpressAdapter().setBasePath(BASE);
  createBullBoard({
    // The maintenance queue is the worker's; the dashboard reads it through this process's connection.
    queues: [deps.sendQueue, deps.importQueue, deps.campaignQueue, deps.webhookQueue, deps.workflowQueue, new Queue(QueueName.maintenance, queueOptions(deps.config, deps.redis))].map(
      (q) => new BullMQAdapter(q),
    ),
    serverAdapter,
    options: { uiConfig: { boardTitle: 'Mailroom queues' } },
  });

  router.get('/admin/login', (_req, res) => {
    res.type('html').send(loginPage());
  });
  router.post('/admin/login', express.urlencoded({ extended: false, limit: '4kb' }), (req, res) => {
    const given = typeof req.body?.token === 'string' ? req.body.token : '';
    if (!safeEqual(given, token)) {
      res.status(401).type('html').send(loginPage('That token is not right.'));
      return;
    }
    res.cookie(COOKIE, sessionValue(token, Date.now()), { httpOnly: true, sameSite: 'strict', path: '/admin', maxAge: SESSION_MS, secure: deps.config.publicUrl.startsWith('https:') });
    res.redirect(303, BASE);
  });
  router.post('/admin/logout', (_req, res) => {
    res.clearCookie(COOKIE, { path: '/admin' });
    res.redirect(303, '/admin/login');
  });

  const guard: RequestHandler = (req, res, next) => {
    const header = req.get('authorization');
    const bearer = header?.startsWith('Bearer ') ? header.slice(7).trim() : undefined;
    if ((bearer && safeEqual(bearer, token)) || validSession(token, parseCookies(req.headers.cookie ?? '')[COOKIE])) return next();
    if (req.accepts(['html', 'json']) === 'html' && req.method === 'GET') return res.redirect(303, '/admin/login');
    res.status(401).json({ success: false, error: { code: 'UNAUTHORIZED', message: 'Sign in at /admin/login or send the admin token', statusCode: 401 } });
  };
  router.use(BASE, guard, serverAdapter.getRouter());
}
