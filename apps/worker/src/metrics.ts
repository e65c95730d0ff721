/**
 * Prometheus metrics of a worker process (`prom-client`, one registry per worker), served at `GET /metrics` on the
 * worker's health port (internal, not the public API):
 *
 * - `mailroom_queue_jobs{queue,state}`: waiting (incl. prioritized), active, delayed, failed jobs per queue, read
 *   from Redis at scrape time;
 * - `mailroom_emails_total{outcome}`: emails finished by send jobs, by outcome (sent, failed, suppressed, cancelled, skipped), and
 *   SES throttles (`throttled`);
 * - `mailroom_ses_send_duration_seconds{connection,outcome}`: SES call latency (`SendEmail`, or a `SendBulkEmail` of
 *   a campaign job or of one-email jobs ready together; ok, error) per delivery connection;
 * - `mailroom_send_rate_gate_wait_seconds{connection}`: time an SES call waited for its slots under its connection's
 *   rate;
 * - `mailroom_ses_connection_healthy{connection}` (1, or 0 while failed over) and the SES account gauges per
 *   connection (`connections.ts`, `@mailroom/sending/ses/account-metrics`);
 * - `mailroom_campaign_progress_ratio{campaign}` and `mailroom_campaign_pending_emails{campaign}` for SENDING
 *   campaigns, read from Postgres at scrape time;
 * - `mailroom_reconciler_reenqueued_total{kind}`: jobs the reconciler had to re-create;
 * - `mailroom_workflow_jobs_total{status}`: workflow jobs by the execution's status when the job ended;
 * - `mailroom_db_pool_connections{pool,state}`: the Postgres pools' connections (`total`, `idle`) and the queries
 *   waiting for one (`waiting`), per pool (`main`, and `send`: the send path's claims and finishes), read at scrape time;
 * - `mailroom_queue_oldest_waiting_seconds{queue}`: how long the job next in line has been waiting (s; 0 when none
 *   waits), read from Redis at scrape time (see {@link oldestWaitingSeconds});
 * - `mailroom_campaigns_paused{reason}`: PAUSED campaigns by reason (`bounce_rate`, `complaint_rate`, `quota`),
 *   read from Postgres at scrape time;
 * - `mailroom_redis_maxmemory_policy{policy}`: 1 for Redis's `maxmemory-policy` in force (`noeviction` is the only
 *   safe one; no series while it cannot be read; see `@mailroom/queues/eviction-policy`);
 * - the process's default metrics (`mailroom_worker_` prefix).
 *
 * @module
 */
import type { Job, Queue } from 'bullmq';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { sendingCampaignProgress } from '@mailroom/campaigns/queries/campaigns';
import { type Database } from '@mailroom/db/client';
import { registerPoolMetrics } from '@mailroom/platform/pool-metrics';
import { pausedCampaignCounts } from '@mailroom/campaigns/queries/campaign-pause';
import { CAMPAIGN_PAUSE_REASONS } from '@mailroom/db/schema';
import type { EvictionPolicyProbe } from '@mailroom/queues/eviction-policy';

/**
 * When a job started waiting for its current turn (ms since the epoch): its creation plus the delay it was added
 * with, or the start of its last attempt when it is waiting again (a retry after backoff, a paused campaign's send
 * rechecking), whichever is later. BullMQ keeps no "waiting since" of its own.
 */
function waitingSince(job: Job): number {
  return Math.max(job.timestamp + (job.opts.delay ?? 0), job.processedOn ?? 0);
}

/**
 * How long the job next in line of `queue` has been waiting (s; 0 when none waits): the older of the wait list's
 * oldest job and the prioritized set's first. Two job reads per queue, whatever the depth; a low-priority job
 * starved behind a steady stream of higher ones is not seen (its age shows as depth instead).
 */
export async function oldestWaitingSeconds(queue: Queue, now = Date.now()): Promise<number> {
  const [waiting, prioritized] = await Promise.all([
    queue.getJobs(['wait'], 0, 0, true),
    queue.getJobs(['prioritized'], 0, 0, true),
  ]);
  const since = [...waiting, ...prioritized].filter(Boolean).map(waitingSince);
  return since.length === 0 ? 0 : Math.max(0, (now - Math.min(...since)) / 1000);
}

/** The worker's metrics. */
export class WorkerMetrics {
  readonly registry = new Registry();
  readonly emails = new Counter({
    name: 'mailroom_emails_total',
    help: 'emails finished by send jobs, by outcome, and SES throttles',
    labelNames: ['outcome'] as const,
    registers: [this.registry],
  });
  readonly sesSend = new Histogram({
    name: 'mailroom_ses_send_duration_seconds',
    help: "SES call latency (s): a SendEmail, or a SendBulkEmail carrying a campaign job's emails or one-email jobs ready together; per delivery connection",
    labelNames: ['connection', 'outcome'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  readonly gateWait = new Histogram({
    name: 'mailroom_send_rate_gate_wait_seconds',
    help: "time an SES call waited for its slots under its delivery connection's rate (s); a bulk call takes one per email",
    labelNames: ['connection'] as const,
    buckets: [0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers: [this.registry],
  });
  readonly reenqueued = new Counter({
    name: 'mailroom_reconciler_reenqueued_total',
    help: 'jobs re-created by the reconciler',
    labelNames: ['kind'] as const,
    registers: [this.registry],
  });
  readonly workflowJobs = new Counter({
    name: 'mailroom_workflow_jobs_total',
    help: 'workflow jobs by the execution status they left',
    labelNames: ['status'] as const,
    registers: [this.registry],
  });

  /**
   * @param pools - the process's Postgres pools by name, for `mailroom_db_pool_connections` (default: `database`
   *   as `main`).
   */
  constructor(
    queues: Queue[],
    database: Database,
    pools: Record<string, Pick<Database, 'pool'>> = { main: database },
    eviction?: EvictionPolicyProbe,
  ) {
    collectDefaultMetrics({ register: this.registry, prefix: 'mailroom_worker_' });
    registerPoolMetrics(this.registry, pools);
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
          for (const state of ['active', 'delayed', 'failed'] as const)
            this.set({ queue: q.name, state }, c[state] ?? 0);
        }
      },
    });
    new Gauge({
      name: 'mailroom_queue_oldest_waiting_seconds',
      help: 'how long the job next in line has been waiting, per queue (s; 0 when none waits)',
      labelNames: ['queue'] as const,
      registers: [this.registry],
      async collect() {
        this.reset();
        const ages = await Promise.all(queues.map((q) => oldestWaitingSeconds(q)));
        queues.forEach((q, i) => this.set({ queue: q.name }, ages[i]));
      },
    });
    new Gauge({
      name: 'mailroom_campaigns_paused',
      help: 'PAUSED campaigns by the reason they paused (bounce_rate, complaint_rate, quota)',
      labelNames: ['reason'] as const,
      registers: [this.registry],
      async collect() {
        // Every reason has a series (0 when none), so an alert's rate or increase sees the first pause.
        const counts = new Map<string, number>(CAMPAIGN_PAUSE_REASONS.map((r) => [r, 0]));
        for (const { reason, count } of await pausedCampaignCounts(database.db)) counts.set(reason, count);
        for (const [reason, count] of counts) this.set({ reason }, count);
      },
    });
    if (eviction) {
      new Gauge({
        name: 'mailroom_redis_maxmemory_policy',
        help: 'Redis maxmemory-policy in force: 1 for each policy found (noeviction is the only safe one; none while unreadable)',
        labelNames: ['policy'] as const,
        registers: [this.registry],
        async collect() {
          this.reset();
          for (const policy of (await eviction.current()).policies) this.set({ policy }, 1);
        },
      });
    }
    const pending = new Gauge({
      name: 'mailroom_campaign_pending_emails',
      help: 'emails of a SENDING campaign not yet final',
      labelNames: ['campaign'] as const,
      registers: [this.registry],
    });
    new Gauge({
      name: 'mailroom_campaign_progress_ratio',
      help: "share of a SENDING campaign's recipients whose email is final (0–1)",
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
