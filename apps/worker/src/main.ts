/**
 * Worker process entry point: one worker per queue of the catalog (`send`, `contact-import`, `campaign`,
 * `webhook`, `workflow`, `maintenance`; see `queues/workers.ts`), the workflow inbox drainer, the maintenance
 * timers (reconciler, segment and domain refreshers, SES quota watcher, test-message retention, data retention, time partitions),
 * the watch for Redis losing its data (an immediate reconcile pass: `processors/redis-loss.ts`),
 * the SES account reading that sets the send rate (`@mailroom/sending/ses/account`), a health and metrics endpoint
 * (`/health/live`, `/health/ready`, `/metrics`), graceful shutdown.
 *
 * Shutdown (SIGTERM/SIGINT): stop taking jobs, let active ones finish (a job cut off by a hard kill is retried
 * by another worker after its lock expires), stop the reconciler, close Redis and Postgres.
 *
 * @module
 */
import type http from 'node:http';
import type { Worker } from 'bullmq';
import { listenOn, runService } from '@mailroom/platform/process';
import type { AccountProvider } from '@mailroom/mail/ses-account';
import type { QueueKey } from '@mailroom/queues/catalog';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues, queueList } from '@mailroom/queues/create';
import { createIdentityProvider, type DomainIdentityProvider } from '@mailroom/mail/identities';
import { createLogger, type Logger } from '@mailroom/platform/logger';
import { createResolver } from '@mailroom/verify/dns';
import { loadConfig, type Config } from '@mailroom/config/config';
import { createDatabase } from '@mailroom/db/client';
import { createSendProcessor } from './processors/send';
import type { SendBatchResult } from './processors/send-batch';
import { reconcileTask, type ReconcileResult } from './processors/reconcile';
import { reconcileNowTask, watchRedisLoss } from './processors/redis-loss';
import { createImportProcessor } from './processors/import';
import { createCampaignProcessor } from './processors/campaign';
import { segmentsTask } from './processors/segments';
import { createWebhookProcessor } from './processors/webhook';
import { createWorkers, setSendWorkerRate, type Workers } from './queues/workers';
import { createWorkflowProcessor } from './processors/workflow';
import { startWorkflowInbox } from './processors/workflow-inbox';
import { domainsTask } from './processors/domains';
import { maintenanceProcessor, startMaintenanceTimers, type MaintenanceTask } from './processors/maintenance';
import { countersTask } from './processors/counters';
import { snoozesTask } from './processors/snoozes';
import type { MailTransport } from '@mailroom/sending/ses/transport';
import { quotaTask } from './processors/quota';
import { checkQuotaOnce } from '@mailroom/sending/quota';
import { laneConnectionResolver } from '@mailroom/sending/lane-connection';
import { DEFAULT_CONNECTION } from '@mailroom/mail/connections';
import { startDeliveryConnections, type DeliveryConnections } from './connections';
import { testMessagesTask } from './processors/test-messages';
import { doubleOptInTask } from './processors/double-opt-in';
import { retentionTask } from './processors/retention';
import { partitionsTask } from './processors/partitions';
import { WorkerMetrics } from './metrics';
import { healthListener } from './health-server';
import { EvictionPolicyProbe } from '@mailroom/queues/eviction-policy';
import type { SendJobResult } from '@mailroom/sending/job';
import { SEND_BATCHES_IN_FLIGHT } from '@mailroom/sending/claim';
import type { WorkflowJobResult } from '@mailroom/workflows/engine/engine';

/**
 * Connections of the send path's own pool (claims and finishes, generic plans): the batcher runs at most two
 * statements of each kind at once (`SEND_BATCHES_IN_FLIGHT` in `@mailroom/sending/claim`).
 */
const SEND_POOL_SIZE = 2 * SEND_BATCHES_IN_FLIGHT;

/** A running worker process. */
export interface RunningWorker {
  /** The `send` worker (`workers.send`). */
  worker: Worker;
  /** The worker of every catalog queue. */
  workers: Workers;
  /** Port of the health and metrics endpoint (0 when disabled). */
  healthPort: number;
  /** This worker's Prometheus metrics. */
  metrics: WorkerMetrics;
  /** The delivery connections (router, health, each one's account, gate and quota). */
  connections: DeliveryConnections;
  stop(): Promise<void>;
}

/**
 * Starts the worker.
 *
 * @param options.transport - replaces every delivery connection's SES v2 transport (the router still routes).
 * @param options.identities - defaults to the provider `DOMAIN_IDENTITY_PROVIDER` selects.
 * @param options.account - the SES account's figures; defaults to the provider `SES_ACCOUNT_PROVIDER` selects.
 * @param options.accounts - other delivery connections' account figures by name; default: as `SES_ACCOUNT_PROVIDER` selects.
 * @param options.healthPort - port of `GET /health/live|ready`; `0` picks a free one, `null` disables it.
 */
export async function startWorker(
  config: Config,
  options: {
    transport?: MailTransport;
    healthPort?: number | null;
    logger?: Logger;
    identities?: DomainIdentityProvider;
    account?: AccountProvider;
    accounts?: ReadonlyMap<string, AccountProvider>;
  } = {},
): Promise<RunningWorker> {
  const logger = options.logger ?? createLogger(config, 'worker');
  const database = createDatabase({
    url: config.databaseUrl,
    poolSize: config.dbPoolSize,
    applicationName: 'mailroom-worker',
    onConnectionError: (err) => logger.warn({ err: err.message }, 'postgres connection lost; the pool reconnects'),
  });
  // The send jobs' claims and finishes (`@mailroom/sending/claim`): planned once per connection,
  // generically (see `createDatabase`'s `genericPlans`), on a pool of their own, so the rest of the worker keeps
  // Postgres's own choice. Replaced every 10 minutes, so no generic plan outlives the table sizes it was made for
  // by longer.
  const sendDatabase = createDatabase({
    url: config.databaseUrl,
    poolSize: SEND_POOL_SIZE,
    applicationName: 'mailroom-worker-send',
    genericPlans: true,
    maxLifetimeSeconds: 600,
    onConnectionError: (err) =>
      logger.warn({ err: err.message, pool: 'send' }, 'postgres connection lost; the pool reconnects'),
  });
  const connection = createRedis(config, 'worker');
  // The kept SES outcomes' SET and DEL (`@mailroom/sending/ses-accepted`), up to SEND_CONCURRENCY at once:
  // auto-pipelined, so those issued together (the DELs of one batch of finishes) share one write. Not the rate
  // gate's: its asks, pipelined together, reach Redis within one interval and all but the first are refused.
  const sendRedis = createRedis(config, 'worker', { autoPipelining: true });
  const queues = createQueues(config, connection);
  // BullMQ's jobs and locks live in Redis: an evicting maxmemory-policy can delete them (see eviction-policy.ts).
  const eviction = new EvictionPolicyProbe(connection);
  const policy = await eviction.current();
  if (policy.status === 'evicts') logger.error({ maxmemoryPolicy: policy.policies }, policy.message);
  else if (policy.status === 'unknown') logger.warn(policy.message);
  const metrics = new WorkerMetrics(queueList(queues), database, { main: database, send: sendDatabase }, eviction);
  // Each delivery connection's send rate: its account's maximum (read now and every SES_ACCOUNT_REFRESH_MS), capped
  // by its maxSendRate (SES_MAX_SEND_RATE for `default`), kept by its own rate gate; the router in front of them.
  const connections = await startDeliveryConnections({
    config,
    database,
    redis: connection,
    logger,
    metrics,
    transport: options.transport,
    account: options.account,
    accounts: options.accounts,
  });
  const account = connections.defaultAccount;
  const transport = connections.router;

  const { send: sendQueue, campaign: campaignQueue, webhook: webhookQueue, workflow: workflowQueue } = queues;
  const identities = options.identities ?? createIdentityProvider(config, createResolver(config));
  const quotaDeps = { config, database, account, sendQueue, campaignQueue, webhookQueue, logger };
  // One quota pass per delivery connection (its account, the campaigns bound to it).
  const quotaPasses = connections.quotaPasses(quotaDeps);
  const quotaGuardOf = (name?: string) =>
    (connections.parts.get(name ?? DEFAULT_CONNECTION) ?? connections.parts.get(DEFAULT_CONNECTION)!).quota;
  const onReconcilePass = (r: ReconcileResult) => {
    metrics.reenqueued.inc({ kind: 'email' }, r.enqueued);
    metrics.reenqueued.inc({ kind: 'import' }, r.importsEnqueued);
    metrics.reenqueued.inc({ kind: 'campaign' }, r.campaignsEnqueued);
    metrics.reenqueued.inc({ kind: 'webhook' }, r.webhooksEnqueued);
    metrics.reenqueued.inc({ kind: 'workflow' }, r.executionsEnqueued);
  };
  const maintenanceTasks: MaintenanceTask[] = [
    reconcileTask({ config, database, queues, logger, onPass: onReconcilePass }),
    segmentsTask({ config, database, logger }),
    domainsTask({ config, database, identities, logger }),
    quotaTask(quotaDeps, [...quotaPasses.values()]),
    testMessagesTask({ config, database, logger }),
    retentionTask({ config, database, logger }),
    countersTask({ database }),
    snoozesTask({ config, database, webhookQueue, logger }),
    partitionsTask({ config, database, logger }),
    doubleOptInTask({ config, database, logger }),
  ];
  // One processor per catalog queue, keyed like the catalog: a queue without one does not compile.
  const workers: Workers = createWorkers(
    config,
    connection,
    {
      send: createSendProcessor({
        config,
        database,
        claimDatabase: sendDatabase,
        redis: sendRedis,
        transport,
        logger,
        webhookQueue,
        worker: () => workers.send,
        sendQueue,
        onThrottled: () => metrics.emails.inc({ outcome: 'throttled' }),
        campaignQuota: {
          admit: (name) => quotaGuardOf(name).admit(),
          reached: (name) => checkQuotaOnce(quotaPasses.get(name ?? DEFAULT_CONNECTION) ?? quotaDeps),
        },
        route: async (m) => (await connections.router.route(m)).name,
      }),
      import: createImportProcessor({ config, database, logger, webhookQueue }),
      campaign: createCampaignProcessor({
        config,
        database,
        sendQueue,
        webhookQueue,
        logger,
        sendRate: () => connections.totalRate(),
      }),
      webhook: createWebhookProcessor({ config, database, logger }),
      workflow: createWorkflowProcessor({
        config,
        database,
        sendQueue,
        webhookQueue,
        workflowQueue,
        logger,
        redis: connection,
        connectionOf: laneConnectionResolver(database.db, config.sesConnections),
      }),
      // Plus the pass run when Redis has lost its data (added by `watchRedisLoss`, not by a timer).
      maintenance: maintenanceProcessor({ config, redis: connection, logger }, [
        ...maintenanceTasks,
        reconcileNowTask({ config, database, queues, logger, onPass: onReconcilePass }),
      ]),
    },
    connections.totalRate(),
  );
  const worker = workers.send;
  // The send worker's limiter paces job starts at the connections' rates together (each gate keeps its own).
  connections.onRateChange((total) => setSendWorkerRate(worker, total));
  worker.on('completed', (_job, result: SendJobResult | SendBatchResult) => {
    if (result.outcome !== 'batch') return metrics.emails.inc({ outcome: result.outcome });
    for (const [outcome, n] of Object.entries(result.outcomes)) metrics.emails.inc({ outcome }, n);
  });
  workers.workflow.on('completed', (_job, r: WorkflowJobResult) =>
    metrics.workflowJobs.inc({ status: r.outcome === 'ran' ? r.status : 'skipped' }),
  );
  for (const key of Object.keys(workers) as QueueKey[]) {
    // The webhook processor records each failed attempt on its delivery row, and a failed maintenance pass is
    // logged by its processor: only the others log a failed attempt here.
    if (key !== 'webhook' && key !== 'maintenance') {
      workers[key].on('failed', (job, err) =>
        logger.warn({ jobId: job?.id, err: err.message }, `${key === 'send' ? 'job' : key} attempt failed`),
      );
    }
    workers[key].on('error', (err) => logger.error({ err }, `${key === 'send' ? '' : `${key} `}worker error`));
  }
  const inbox = startWorkflowInbox({ config, database, workflowQueue, webhookQueue, logger });
  const maintenance = startMaintenanceTimers({ queue: queues.maintenance, logger }, maintenanceTasks);
  for (const w of Object.values(workers)) void w.run();
  await Promise.all(Object.values(workers).map((w) => w.waitUntilReady()));
  const redisLoss = config.reconcileOnRedisLoss
    ? watchRedisLoss({ redis: connection, queue: queues.maintenance, queuePrefix: config.queuePrefix, logger })
    : undefined;
  void redisLoss?.check();

  let server: http.Server | undefined;
  let healthPort = 0;
  let stopping: Promise<void> | undefined;
  const stopAll = (): Promise<void> => (stopping ??= shutdown());
  if (options.healthPort !== null) {
    const health = healthListener({
      worker,
      database,
      redis: connection,
      metrics,
      eviction,
      metricsToken: config.metricsToken,
    });
    const port = options.healthPort ?? config.workerHealthPort;
    try {
      server = await listenOn(health, port, 'worker health and metrics');
    } catch (err) {
      // Nothing may keep running behind a port that is not served: stop the workers just started, then fail.
      await stopAll();
      throw err;
    }
    healthPort = (server.address() as { port: number }).port;
  }
  logger.info(
    {
      concurrency: config.sendConcurrency,
      ratePerSecond: connections.totalRate(),
      connections: connections.router.names,
      capPerSecond: config.sesMaxSendRate ?? null,
      healthPort,
    },
    'worker started',
  );
  return { worker, workers, healthPort, metrics, connections, stop: stopAll };

  /** Stop taking jobs, let active ones finish, close the timers, queues, Redis and Postgres. */
  async function shutdown(): Promise<void> {
    logger.info('worker shutting down');
    connections.stop();
    await inbox.stop();
    maintenance.stop();
    redisLoss?.stop();
    await Promise.all(Object.values(workers).map((w) => w.close()));
    await queues.closeAll();
    server?.close();
    transport.close();
    connection.disconnect();
    sendRedis.disconnect();
    await Promise.all([database.close(), sendDatabase.close()]);
    logger.info('worker stopped');
  }
}

if (require.main === module) runService('worker', loadConfig, (config: Config) => startWorker(config), 60_000);
