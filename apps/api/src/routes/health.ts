/**
 * Liveness and readiness probes (no auth): `GET /health/live` (the process answers) and `GET /health/ready`
 * (Postgres and Redis answer within 2 s; else 503 naming what failed).
 *
 * Readiness also reports Redis's `maxmemory-policy` (`checks.redisEvictionPolicy`: `ok`, or `warning: …` when it
 * evicts or cannot be read; read at most once a minute) without failing on it: an evicting policy makes jobs late,
 * never lost (emails are Postgres rows first), and taking every API process out of its load balancer for it would
 * refuse all mail instead. The reasoning is in docs/self-hosting/monitoring.md.
 *
 * @module
 */
import type { Router } from 'express';
import { sql } from 'drizzle-orm';
import { EvictionPolicyProbe } from '@mailroom/queues/eviction-policy';
import type { AppDeps } from '../http/context';
import { logged } from '@mailroom/platform/logger';
import { errorMessage } from '@mailroom/platform/errors';

function within<T>(ms: number, p: Promise<T>): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref()),
  ]);
}

/** Mounts the probes. */
export function mountHealth(router: Router, deps: AppDeps): void {
  const eviction = new EvictionPolicyProbe(deps.redis);
  router.get('/health/live', (_req, res) => {
    res.json({ success: true, data: { status: 'ok' } });
  });
  router.get('/health/ready', async (_req, res) => {
    const [pg, redis] = await Promise.allSettled([
      within(2000, deps.database.db.execute(sql`select 1`)),
      within(2000, deps.redis.ping()),
    ]);
    // Only asked of a Redis that answers (else the ping already says what is wrong).
    const policy =
      redis.status === 'fulfilled'
        ? await logged(within(2000, eviction.current()), deps.logger, 'Redis eviction policy check', 'debug')
        : undefined;
    const checks = {
      postgres: pg.status === 'fulfilled' ? 'ok' : `error: ${errorMessage(pg.reason)}`,
      redis: redis.status === 'fulfilled' ? 'ok' : `error: ${errorMessage(redis.reason)}`,
      ...(policy ? { redisEvictionPolicy: policy.status === 'ok' ? 'ok' : `warning: ${policy.message}` } : {}),
    };
    const ok = pg.status === 'fulfilled' && redis.status === 'fulfilled';
    res.status(ok ? 200 : 503).json({ success: ok, data: { status: ok ? 'ok' : 'unavailable', checks } });
  });
}
