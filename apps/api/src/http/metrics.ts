/**
 * Prometheus metrics of an API process (`prom-client`, one registry per app): requests by route template and
 * status, their latency, the SES events received through SNS (`mailroom_ses_events_total{event,bounce_type}`:
 * `delivered`, `bounced` with SES's bounce type, `complained`, `rejected`, `opened`…; redeliveries not counted),
 * its Postgres pool (`mailroom_db_pool_connections{pool="main",state}`) and the process's default metrics. Served at
 * `GET /metrics` behind `METRICS_TOKEN` or `ADMIN_TOKEN` (Prometheus sends it as a bearer token).
 *
 * @module
 */
import type { Request, Response } from 'express';
import { collectDefaultMetrics, Counter, Histogram, Registry } from 'prom-client';
import { registerPoolMetrics, type PoolCounts } from '@mailroom/platform/pool-metrics';

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
    for (const bounceType of ['Permanent', 'Transient']) this.sesEvents.inc({ event: 'bounced', bounce_type: bounceType }, 0);
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

}
