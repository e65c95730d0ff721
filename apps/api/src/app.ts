/**
 * The Express application, without `listen` (tests drive it with supertest; `server.ts` serves it).
 *
 * Order of a request: request id → route match → auth → per-project rate limit → JSON body (size-limited per
 * route) → schema validation → handler → envelope; failures go to the one error middleware.
 *
 * @module
 */
import express, { type Express } from 'express';
import { getAbsoluteFSPath } from 'swagger-ui-dist';
import { adminStep, metricsOnly, authenticate, authenticateStep, AuthCache } from './http/auth';
import { readDb, type AppDeps } from './http/context';
import { errorHandler, notFoundHandler } from './http/errors';
import { authFailureLimiter, rateLimitStep } from './http/rate-limit';
import { toMiddleware } from './http/steps';
import { requestId } from './http/request-id';
import { mountRoutes, type AnyRoute } from './http/route';
import { apiDocument } from './openapi';
import { ApiMetrics } from './http/metrics';
import { registerReputationMetrics } from './http/reputation-metrics';
import { mountQueueDashboard } from './routes/queues-dashboard';
import { mountHealth } from './routes/health';
import { mountEmailRaw } from './routes/email-raw';
import { mountInboundRaw } from './routes/inbound';
import { mountUnsubscribe } from './routes/unsubscribe';
import { mountConfirm } from './routes/confirm';
import { mountSesWebhook } from './routes/ses-webhook';
import { apiRoutes, apiVersion, HAND_DESCRIBED_PATHS } from './api-routes';

export type { AppDeps } from './http/context';

/** The app plus the handles a host may need. */
export interface App {
  app: Express;
  /** Drops cached key lookups (after disabling a project or rotating keys from outside this process). */
  authCache: AuthCache;
  /** This app's Prometheus metrics (served at `GET /metrics`). */
  metrics: ApiMetrics;
  routes: AnyRoute[];
}

/** Builds the application from its dependencies. */
export function createApp(deps: AppDeps): App {
  const app = express();
  app.disable('x-powered-by');
  // Decides `req.ip`, which every per-IP limit counts against (TRUST_PROXY; Express's own forms).
  const { trustProxy } = deps.config;
  app.set(
    'trust proxy',
    typeof trustProxy === 'boolean' || typeof trustProxy === 'number' ? trustProxy : [...trustProxy],
  );
  app.set('query parser', 'simple');

  const authCache = new AuthCache(deps.config.authCacheTtlMs, deps.config.authNegativeCacheTtlMs);
  const authFailures = authFailureLimiter(deps.redis, deps.config);
  const limitStep = rateLimitStep(deps.redis, deps.config.queuePrefix, deps.config.rateLimitPerMinute);
  const limit = toMiddleware(limitStep);
  const { db } = deps.database;

  const metrics = new ApiMetrics(deps.database.pool);
  if (deps.replicas) metrics.observeReplicas(deps.replicas);
  registerReputationMetrics(metrics.registry, readDb(deps), deps.logger, { ttlMs: deps.config.reputationMetricsTtlMs });
  app.use(requestId(deps.logger, (req, res, seconds) => metrics.record(req, res, seconds)));

  const routes = apiRoutes(deps, () => authCache.clear());

  const router = express.Router();
  mountHealth(router, deps);
  mountQueueDashboard(router, deps, authFailures);
  router.get('/metrics', metricsOnly(deps.config, authFailures), async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  mountUnsubscribe(router, deps);
  mountConfirm(router, deps);
  mountSesWebhook(router, deps, (e) => metrics.sesEvents.inc({ event: e.kind, bounce_type: e.bounceType ?? '' }));
  const openapi = apiDocument(routes, HAND_DESCRIBED_PATHS, {
    version: apiVersion(),
    serverUrl: deps.config.publicUrl,
  });
  router.get('/openapi.json', (_req, res) => {
    res.json(openapi);
  });
  const swaggerDir = getAbsoluteFSPath();
  router.use('/docs/assets', express.static(swaggerDir, { index: false, maxAge: '1d' }));
  router.get('/docs', (_req, res) => {
    res.type('html').send(docsPage);
  });
  // Answers message/rfc822, not the JSON envelope: mounted by hand behind the same secret-key chain.
  mountEmailRaw(router, deps, [authenticate(db, authCache, ['secret'], authFailures), limit]);
  mountInboundRaw(router, deps, [authenticate(db, authCache, ['secret'], authFailures), limit]);
  mountRoutes(
    router,
    routes,
    {
      secret: [authenticateStep(db, authCache, ['secret'], authFailures), limitStep],
      sending: [authenticateStep(db, authCache, ['secret'], authFailures, { sending: true }), limitStep],
      anyKey: [authenticateStep(db, authCache, ['secret', 'public'], authFailures), limitStep],
      admin: [adminStep(deps.config.adminToken, authFailures)],
    },
    deps.database,
  );
  app.use(router);
  app.use(notFoundHandler);
  app.use(errorHandler);
  return { app, authCache, metrics, routes };
}

const docsPage = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Mailroom API</title>
<link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
<div id="ui"></div>
<script src="/docs/assets/swagger-ui-bundle.js"></script>
<script>
window.ui = SwaggerUIBundle({ url: '/openapi.json', dom_id: '#ui', deepLinking: true });
</script>
</body>
</html>`;
