/**
 * `mailroom_db_pool_connections{pool,state}`: a process's Postgres pools as a Prometheus gauge, read at scrape time:
 * connections open (`total`) and idle (`idle`), and queries waiting for one (`waiting`), per named pool. One
 * definition for the API (pool `main`) and the worker (`main`, and `send` for the send path's claims and finishes).
 *
 * @module
 */
import { Gauge, type Registry } from 'prom-client';

/** What the gauge reads of a pool (node-postgres's `Pool` counters). */
export interface PoolCounts {
  readonly totalCount: number;
  readonly idleCount: number;
  readonly waitingCount: number;
}

/** Registers the gauge on `registry` for `pools` (name → an object holding the pool, as `Database` does). */
export function registerPoolMetrics(registry: Registry, pools: Record<string, { readonly pool: PoolCounts }>): void {
  new Gauge({
    name: 'mailroom_db_pool_connections',
    help: 'Postgres pool connections (total, idle) and queries waiting for one (waiting), per pool',
    labelNames: ['pool', 'state'] as const,
    registers: [registry],
    collect() {
      for (const [name, { pool }] of Object.entries(pools)) {
        this.set({ pool: name, state: 'total' }, pool.totalCount);
        this.set({ pool: name, state: 'idle' }, pool.idleCount);
        this.set({ pool: name, state: 'waiting' }, pool.waitingCount);
      }
    },
  });
}
