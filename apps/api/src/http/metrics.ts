/**
 * Prometheus metrics of an API process (`prom-client`, one registry per app): requests by route template and
 * status, their latency, the SES events received through SNS (`mailroom_ses_events_total{event,bounce_type}`:
 * `delivered`, `bounced` with SES's bounce type, `complained`, `rejected`, `opened`…; redeliveries not counted),
 * its Postgres pool (`mailroom_db_pool_connections{pool="main",state}`), the read replicas' state and the reads
 * routed to them, and the process's default metrics. Served at `GET /metrics` behind `METRICS_TOKEN` or
 * `ADMIN_TOKEN` (Prometheus sends it as a bearer token).
 *
 * @module
 */
import type { Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { registerPoolMetrics, type PoolCounts } from '@mailroom/platform/pool-metrics';
import type { ReadReplicas } from '@mailroom/db/replicas';

/** The API's metrics. */
export class ApiMetrics {
  readonly registry = new Registry();
  private readonly requests = new Counter({
    name: 'mailroom_http_requests_total',
    help: 'HTTP requests by method, route template and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'mailroom_http_request_duration_seconds',
    help: 'HTTP request latency (s) by method and route template',
    labelNames: ['method', 'route'] as const,
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });

  /** SES events received (first deliveries of SNS messages only), by our event kind and SES's bounce type. */
  readonly sesEvents = new Counter({
    name: 'mailroom_ses_events_total',
    help: 'SES events received through SNS, by kind (delivered, bounced, complained, ...) and bounce type',
    labelNames: ['event', 'bounce_type'] as const,
    registers: [this.registry],
  });

  /** @param pool - the process's Postgres pool, exported as `mailroom_db_pool_connections{pool="main"}`. */
  constructor(pool?: PoolCounts) {
    collectDefaultMetrics({ register: this.registry, prefix: 'mailroom_api_' });
    if (pool) registerPoolMetrics(this.registry, { main: { pool } });
    // Zero series for what the dashboard and alerts read, so a rate over them starts at the first event.
    for (const event of ['delivered', 'complained', 'rejected']) this.sesEvents.inc({ event, bounce_type: '' }, 0);
    for (const bounceType of ['Permanent', 'Transient'])
      this.sesEvents.inc({ event: 'bounced', bounce_type: bounceType }, 0);
  }

  /**
   * Records one finished request (`seconds`: its duration). The route is Express's template (`/workflows/:id`),
   * never the raw path, so ids do not explode the label set; unmatched requests count as `unmatched`. Called from
   * the request-id middleware's `finish` listener (one listener per request for both).
   */
  record(req: Request, res: Response, seconds: number): void {
    const routePath = (req.route as { path?: string | RegExp | Array<string | RegExp> } | undefined)?.path; // Express types `req.route` as `any`
    const route = routePath ? `${req.baseUrl}${String(routePath)}` : 'unmatched';
    this.requests.inc({ method: req.method, route, status: String(res.statusCode) });
    this.duration.observe({ method: req.method, route }, seconds);
  }

  /**
   * Registers the read replicas' metrics, read at scrape time:
   * - `mailroom_db_replica_lag_seconds{replica}`: replay lag at the last check (absent while unknown: down, not a
   *   replica, nothing replayed yet);
   * - `mailroom_db_replica_up{replica}`: 1 when the replica takes reads (reachable, in recovery, within the lag
   *   limit), else 0;
   * - `mailroom_db_reads_total{connection,replica}`: read-only queries by where they ran (`connection`: `replica`
   *   with the replica's `host:port/database`, or `primary` with `replica=""`).
   */
  observeReplicas(replicas: ReadReplicas): void {
    new Gauge({
      name: 'mailroom_db_replica_lag_seconds',
      help: 'replay lag of each read replica at its last check (s)',
      labelNames: ['replica'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const r of replicas.status()) if (r.lagMs !== null) this.set({ replica: r.name }, r.lagMs / 1000);
      },
    });
    new Gauge({
      name: 'mailroom_db_replica_up',
      help: '1 when a read replica takes reads (reachable, in recovery, within DATABASE_REPLICA_MAX_LAG_MS), else 0',
      labelNames: ['replica'] as const,
      registers: [this.registry],
      collect() {
        for (const r of replicas.status()) this.set({ replica: r.name }, r.state === 'ok' ? 1 : 0);
      },
    });
    const seen = new Map<string, number>();
    new Counter({
      name: 'mailroom_db_reads_total',
      help: 'read-only queries of the API by where they ran: a read replica or the primary',
      labelNames: ['connection', 'replica'] as const,
      registers: [this.registry],
      collect() {
        for (const c of replicas.readCounts()) {
          const key = `${c.connection}\t${c.replica}`;
          const delta = c.count - (seen.get(key) ?? 0);
          seen.set(key, c.count);
          if (delta > 0) this.inc({ connection: c.connection, replica: c.replica }, delta);
        }
      },
    });
  }
}
