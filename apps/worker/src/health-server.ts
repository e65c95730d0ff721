/**
 * The worker's health and metrics endpoint (`WORKER_HEALTH_PORT`, internal: not the public API):
 *
 * - `GET /health/live`: 200 while the send worker runs, 503 once it is stopping;
 * - `GET /health/ready`: 200 when Postgres and Redis answer and the send worker runs, else 503; the body also
 *   reports Redis's `maxmemory-policy` (`redisEvictionPolicy`: `ok` or `warning: …`) without failing on it;
 * - `GET /metrics`: the Prometheus text of {@link WorkerMetrics}; when `METRICS_TOKEN` is set it requires
 *   `Authorization: Bearer <METRICS_TOKEN>` (401 otherwise, RFC 6750 §3 `WWW-Authenticate`), checked by the same
 *   `matchesToken` as the API's `/metrics`.
 *
 * The probes stay open: a kubelet or compose probe cannot send a secret, and they tell nothing but up or down.
 *
 * @module
 */
import type http from 'node:http';
import { sql } from 'drizzle-orm';
import type { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { bearerToken, matchesToken } from '@mailroom/platform/bearer';
import type { EvictionPolicyProbe } from '@mailroom/queues/eviction-policy';
import type { Database } from '@mailroom/db/client';
import type { WorkerMetrics } from './metrics';

/** What the endpoint reads. */
export interface HealthDeps {
  /** The send worker: its running state is the process's liveness. */
  worker: Worker;
  database: Database;
  redis: Redis;
  metrics: WorkerMetrics;
  eviction: EvictionPolicyProbe;
  /** `METRICS_TOKEN`; unset leaves `/metrics` open. */
  metricsToken: string | undefined;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

/** The request listener of the worker's health port. */
export function healthListener(deps: HealthDeps): http.RequestListener {
  const serve = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/health/live') {
      const running = deps.worker.isRunning();
      json(res, running ? 200 : 503, { status: running ? 'ok' : 'stopping' });
      return;
    }
    if (path === '/health/ready') {
      const checks = await Promise.allSettled([deps.database.db.execute(sql`select 1`), deps.redis.ping()]);
      const ok = checks.every((c) => c.status === 'fulfilled') && deps.worker.isRunning();
      const policy = checks[1].status === 'fulfilled' ? await deps.eviction.current() : undefined;
      json(res, ok ? 200 : 503, {
        status: ok ? 'ok' : 'unavailable',
        ...(policy ? { redisEvictionPolicy: policy.status === 'ok' ? 'ok' : `warning: ${policy.message}` } : {}),
      });
      return;
    }
    if (path === '/metrics') {
      if (
        deps.metricsToken !== undefined &&
        !matchesToken(bearerToken(req.headers.authorization), [deps.metricsToken])
      ) {
        res.writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer realm="metrics"' });
        res.end('a bearer token (METRICS_TOKEN) is required\n');
        return;
      }
      try {
        const body = await deps.metrics.registry.metrics();
        res.writeHead(200, { 'content-type': deps.metrics.registry.contentType });
        res.end(body);
      } catch (err) {
        res.writeHead(500).end(String(err));
      }
      return;
    }
    res.writeHead(404).end();
  };
  // node:http ignores a listener's result; `serve` catches what can fail (metrics) and cannot reject otherwise.
  return (req, res) => void serve(req, res);
}
