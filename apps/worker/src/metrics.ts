/**
 * Prometheus metrics of a worker process (`prom-client`, one registry per worker), served at `GET /metrics` on the
 * worker's health port (internal, not the public API):
 *
 * - `mailroom_queue_jobs{queue,state}`: waiting (incl. prioritized), active, delayed, failed jobs per queue, read
 *   from Redis at scrape time;
 * - `mailroom_emails_total{outcome}`: send jobs by outcome (sent, failed, suppressed, cancelled, skipped) and
 *   SES throttles (`throttled`);
 * - `mailroom_ses_send_duration_seconds{connection,outcome}`: SES `SendEmail` latency (ok, error) per delivery
 *   connection;
 * - `mailroom_send_rate_gate_wait_seconds{connection}`: time a send waited for its slot under its connection's rate;
 * - `mailroom_ses_connection_healthy{connection}` (1, or 0 while failed over) and the SES account gauges per
 *   connection (`connections.ts`, `@mailroom/sending/ses/account-metrics`);
 * - `mailroom_campaign_progress_ratio{campaign}` and `mailroom_campaign_pending_emails{campaign}` for SENDING
 *   campaigns, read from Postgres at scrape time;
 * - `mailroom_reconciler_reenqueued_total{kind}`: jobs the reconciler had to re-create;
 * - `mailroom_workflow_jobs_total{status}`: workflow jobs by the execution's status when the job ended;
 * - `mailroom_db_pool_connections{pool,state}`: the Postgres pools' connections (`total`, `idle`) and the queries
 *   waiting for one (`waiting`), per pool (`main`, and `send`: the send path's claims and finishes), read at scrape time;
 * - the process's default metrics (`mailroom_worker_` prefix).
 *
 * @module
 */
import type { Queue } from 'bullmq';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sendingCampaignProgress } from '@mailroom/audiences/queries/campaigns';
import { type Database } from '@mailroom/db/client';

/** The worker's metrics. */
export class WorkerMetrics {
  readonly registry = new Registry();
  readonly emails = new Counter({ name: 'mailroom_emails_total', help: 'send jobs by outcome, and SES throttles', labelNames: ['outcome'] as const, registers: [this.registry] });
  readonly sesSend = new Histogram({
    name: 'mailroom_ses_send_duration_seconds',
    help: 'SES SendEmail latency (s), per delivery connection',
    labelNames: ['connection', 'outcome'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly gateWait = new Histogram({
    name: 'mailroom_send_rate_gate_wait_seconds',
    help: 'time a send waited for its slot under its delivery connection\'s rate (s)',
    labelNames: ['connection'] as const,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly reenqueued = new Counter({ name: 'mailroom_reconciler_reenqueued_total', help: 'jobs re-created by the reconciler', labelNames: ['kind'] as const, registers: [this.registry] });
  readonly workflowJobs = new Counter({ name: 'mailroom_workflow_jobs_total', help: 'workflow jobs by the execution status they left', labelNames: ['status'] as const, registers: [this.registry] });

  /**
   * @param pools - the process's Postgres pools by name, for `mailroom_db_pool_connections` (default: `database`
   *   as `main`).
   */
  constructor(queues: Queue[], database: Database, pools: Record<string, Pick<Database, 'pool'>> = { main: database }) {
    collectDefaultMetrics({ register: this.registry, prefix: 'mailroom_worker_' });
    new Gauge({
      name: 'mailroom_db_pool_connections',
      help: 'Postgres pool connections (total, idle) and queries waiting for one (waiting), per pool',
      labelNames: ['pool', 'state'] as const,
      registers: [this.registry],
      collect() {
        for (const [name, { pool }] of Object.entries(pools)) {
          this.set({ pool: name, state: 'total' }, pool.totalCount);
          this.set({ pool: name, state: 'idle' }, pool.idleCount);
          this.set({ pool: name, state: 'waiting' }, pool.waitingCount);
        }
      },
    });
    new Gauge({
      name: 'mailroom_queue_jobs',
      help: 'jobs per queue and state',
      labelNames: ['queue', 'state'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        for (const q of queues) {
          const c = await q.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed');
          this.set({ queue: q.name, state: 'waiting' }, (c.waiting ?? 0) + (c.prioritized ?? 0));
          for (const state of ['active', 'delayed', 'failed'] as const) this.set({ queue: q.name, state }, c[state] ?? 0);
        }
      },
    });
    const pending = new Gauge({ name: 'mailroom_campaign_pending_emails', help: 'emails of a SENDING campaign not yet final', labelNames: ['campaign'] as const, registers: [this.registry] });
    new Gauge({
      name: 'mailroom_campaign_progress_ratio',
      help: 'share of a SENDING campaign\'s recipients whose email is final (0–1)',
      labelNames: ['campaign'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        pending.reset();
        for (const c of await sendingCampaignProgress(database.db)) {
          this.set({ campaign: c.id }, c.recipients > 0 ? (c.recipients - c.pending) / c.recipients : 0);
          pending.set({ campaign: c.id }, c.pending);
        }
      },
    });
  }
}
