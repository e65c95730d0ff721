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
import { adminOnly, adminStep, authenticate, authenticateStep, AuthCache } from './http/auth';
import { readDb, type AppDeps } from './http/context';
import { errorHandler, notFoundHandler } from './http/errors';
import { FailureLimiter, rateLimitStep } from './http/rate-limit';
import { toMiddleware } from './http/steps';
import { requestId } from './http/request-id';
import { mountRoutes, type AnyRoute } from './http/route';
import { buildOpenApi } from './openapi';
import { ApiMetrics } from './http/metrics';
import { registerReputationMetrics } from './http/reputation-metrics';
import { mountQueueDashboard } from './routes/queues-dashboard';
import { adminRoutes } from './routes/admin';
import { adminKeyRoutes } from './routes/admin-keys';
import { adminGuardrailRoutes } from './routes/admin-guardrails';
import { adminRetentionRoutes } from './routes/admin-retention';
import { reputationRoutes } from './routes/reputation';
import { contactRoutes } from './routes/contacts';
import { eventRoutes } from './routes/events';
import { importRoutes } from './routes/imports';
import { emailRoutes } from './routes/emails';
import { mountHealth } from './routes/health';
import { sendRoutes } from './routes/send';
import { templateRoutes } from './routes/templates';
import { templateRenderRoutes } from './routes/template-render';
import { emailRawOpenApiPaths, mountEmailRaw } from './routes/email-raw';
import { segmentRoutes } from './routes/segments';
import { campaignRoutes } from './routes/campaigns';
import { campaignGuardrailRoutes } from './routes/campaign-guardrails';
import { campaignRetryRoutes } from './routes/campaign-retry';
import { mountUnsubscribe, unsubscribeOpenApiPaths } from './routes/unsubscribe';
import { mountSesWebhook, sesWebhookOpenApiPaths } from './routes/ses-webhook';
import { suppressionRoutes } from './routes/suppressions';
import { webhookRoutes } from './routes/webhooks';
import { workflowRoutes } from './routes/workflows';
import { workflowGraphRoutes } from './routes/workflow-graph';
import { workflowExecutionRoutes } from './routes/workflow-executions';
import { verifyRoutes } from './routes/verify';
import { domainRoutes } from './routes/domains';

export type { AppDeps } from './http/context';

const VERSION = '0.1.0';

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
  app.set('trust proxy', typeof trustProxy === 'boolean' || typeof trustProxy === 'number' ? trustProxy : [...trustProxy]);
  app.set('query parser', 'simple');

  const authCache = new AuthCache(deps.config.authCacheTtlMs, deps.config.authNegativeCacheTtlMs);
  const authFailures = new FailureLimiter(deps.redis, deps.config.queuePrefix, {
    name: 'authfail',
    perMinute: deps.config.authFailureLimitPerMinute,
    trickleIntervalS: deps.config.blockedLookupIntervalS,
    what: 'failed authentications',
  });
  const limitStep = rateLimitStep(deps.redis, deps.config.queuePrefix, deps.config.rateLimitPerMinute);
  const limit = toMiddleware(limitStep);
  const { db } = deps.database;

  const metrics = new ApiMetrics();
  if (deps.replicas) metrics.observeReplicas(deps.replicas);
  registerReputationMetrics(metrics.registry, readDb(deps), deps.logger, { ttlMs: deps.config.reputationMetricsTtlMs });
  app.use(requestId(deps.logger, (req, res, seconds) => metrics.record(req, res, seconds)));

  const routes: AnyRoute[] = [
    ...sendRoutes(deps),
    ...verifyRoutes(deps),
    ...eventRoutes(deps),
    ...emailRoutes(deps),
    // Before `/contacts/:id`, whose pattern would also match `/contacts/import`.
    ...importRoutes(deps),
    ...contactRoutes(deps),
    ...templateRoutes(deps),
    ...templateRenderRoutes(deps),
    ...segmentRoutes(deps),
    ...campaignRoutes(deps),
    ...campaignGuardrailRoutes(deps),
    ...campaignRetryRoutes(deps),
    ...reputationRoutes(deps),
    ...suppressionRoutes(deps),
    ...webhookRoutes(deps),
    ...workflowRoutes(deps),
    ...workflowGraphRoutes(deps),
    ...workflowExecutionRoutes(deps),
    ...domainRoutes(deps),
    ...adminRoutes(deps, () => authCache.clear()),
    ...adminKeyRoutes(deps, () => authCache.clear()),
    ...adminGuardrailRoutes(deps),
    ...adminRetentionRoutes(deps),
  ];

  const router = express.Router();
  mountHealth(router, deps);
  mountQueueDashboard(router, deps, authFailures);
  router.get('/metrics', adminOnly(deps.config.adminToken, authFailures), async (_req, res) => {
    res.type(metrics.registry.contentType).send(await metrics.registry.metrics());
  });
  mountUnsubscribe(router, deps);
  mountSesWebhook(router, deps);
  const built = buildOpenApi(routes, { version: VERSION, serverUrl: deps.config.publicUrl });
  const openapi = { ...built, paths: { ...built.paths, ...emailRawOpenApiPaths, ...unsubscribeOpenApiPaths, ...sesWebhookOpenApiPaths } };
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
  mountRoutes(router, routes, {
    secret: [authenticateStep(db, authCache, ['secret'], authFailures), limitStep],
    anyKey: [authenticateStep(db, authCache, ['secret', 'public'], authFailures), limitStep],
    admin: [adminStep(deps.config.adminToken, authFailures)],
  }, deps.database);
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

