/**
 * Liveness and readiness probes (no auth): `GET /health/live` (the process answers) and `GET /health/ready`
 * (Postgres and Redis answer within 2 s; else 503 naming what failed).
 *
 * @module
 */
import type { Router } from 'express';
import { sql } from 'drizzle-orm';
import type { AppDeps } from '../http/context';

function within<T>(ms: number, p: Promise<T>): Promise<T> {
  return Promise.race([p, new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms).unref())]);
}

/** Mounts the probes. */
export function mountHealth(router: Router, deps: AppDeps): void {
  router.get('/health/live', (_req, res) => {
    res.json({ success: true, data: { status: 'ok' } });
  });
  router.get('/health/ready', async (_req, res) => {
    const [pg, redis] = await Promise.allSettled([
      within(2000, deps.database.db.execute(sql`select 1`)),
      within(2000, deps.redis.ping()),
    ]);
    const checks = {
      postgres: pg.status === 'fulfilled' ? 'ok' : `error: ${(pg.reason as Error).message}`,
      redis: redis.status === 'fulfilled' ? 'ok' : `error: ${(redis.reason as Error).message}`,
    };
    const ok = pg.status === 'fulfilled' && redis.status === 'fulfilled';
    res.status(ok ? 200 : 503).json({ success: ok, data: { status: ok ? 'ok' : 'unavailable', checks } });
  });
}
