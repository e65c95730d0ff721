/**
 * The worker's delivery connections (`SES_CONNECTIONS`, the implicit `default` first): for each, its SES account
 * reading ({@link AccountWatcher}: its own `GetAccount`, or the local figures), its send-rate gate in Redis
 * (`<QUEUE_PREFIX>:ses-rate-gate` for `default`, `<QUEUE_PREFIX>:ses-rate-gate:<name>` for the others, each with its
 * own priority order), its transport and its campaign-quota guard; the router over them
 * (`@mailroom/sending/ses/connections`), the health they share in Redis, the probe of unhealthy ones every
 * `SES_FAILOVER_PROBE_MS`, and their metrics (label `connection`). With several, a send waits at most
 * {@link GATE_WAIT_MS} at its gate holding a worker slot, so a saturated connection never holds the others' mail.
 *
 * @module
 */
import { Gauge, type Registry } from 'prom-client';
import type { Redis } from 'ioredis';
import {
  createAccountProvider,
  LocalAccountProvider,
  SesAccountProvider,
  type AccountProvider,
} from '@mailroom/mail/ses-account';
import {
  connectionClientConfig,
  connectionNamed,
  DEFAULT_CONNECTION,
  type SesConnection,
} from '@mailroom/mail/connections';
import { loadCampaign } from '@mailroom/campaigns/queries/campaigns';
import type { QuotaDeps } from '@mailroom/sending/quota';
import { createSesClient, identityVerifiedForSending, probeAccount } from '@mailroom/mail/ses-client';
import type { Config } from '@mailroom/config/config';
import type { Database } from '@mailroom/db/client';
import { boundConnection } from '@mailroom/projects/queries/delivery-connections';
import { sentInLast24Hours, sentSinceHour } from '@mailroom/db/queries/send-quota';
import type { Logger } from '@mailroom/platform/logger';
import { AccountWatcher } from '@mailroom/sending/ses/account';
import { registerAccountMetrics } from '@mailroom/sending/ses/account-metrics';
import { ConnectionHealth } from '@mailroom/sending/ses/connection-health';
import { ConnectionRouter, domainOf, type DeliveryConnection } from '@mailroom/sending/ses/connections';
import { CampaignQuotaGuard } from '@mailroom/sending/ses/quota-guard';
import { SendRateGate } from '@mailroom/sending/ses/rate-gate';
import { SesTransport, type MailTransport } from '@mailroom/sending/ses/transport';
import type { WorkerMetrics } from './metrics';

/**
 * With several connections, the longest a send waits (ms) at its connection's rate gate while holding a worker
 * slot; beyond it the job gives the slot back and waits in the queue (`GateBusyError`, the send job's `yield`).
 * With one connection a send waits as long as its gate makes it (as before: nothing else needs the slot).
 */
export const GATE_WAIT_MS = 500;

/** One connection's parts. */
export interface ConnectionParts {
  connection: SesConnection;
  account: AccountWatcher;
  gate: SendRateGate;
  quota: CampaignQuotaGuard;
}

/** The worker's connections, started. */
export interface DeliveryConnections {
  router: ConnectionRouter;
  health: ConnectionHealth;
  parts: ReadonlyMap<string, ConnectionParts>;
  /** The `default` connection's account (the quota watcher's, the campaign pacing's fallback). */
  defaultAccount: AccountWatcher;
  /** The sum of the connections' send rates (emails/s): the send worker's limiter. */
  totalRate(): number;
  /**
   * The quota passes (`@mailroom/sending/quota`): `base` alone with one connection; else one per connection, with
   * its account, over the campaigns bound to it.
   */
  quotaPasses(base: QuotaDeps): Map<string, QuotaDeps>;
  /** Calls `fn` with {@link totalRate} whenever a connection's rate changes. */
  onRateChange(fn: (total: number) => void): void;
  stop(): void;
}

/** Options of {@link startDeliveryConnections}. */
export interface DeliveryConnectionOptions {
  config: Config;
  database: Database;
  redis: Redis;
  logger: Logger;
  metrics: WorkerMetrics;
  /** Replaces every connection's transport (tests); the router then still routes and records health. */
  transport?: MailTransport;
  /** The `default` connection's account provider; default: the one `SES_ACCOUNT_PROVIDER` selects. */
  account?: AccountProvider;
  /** Account providers of other connections by name (tests); default: the one `SES_ACCOUNT_PROVIDER` selects. */
  accounts?: ReadonlyMap<string, AccountProvider>;
}

/**
 * Builds and starts every delivery connection (the first account readings are waited for together, each at most
 * `FIRST_READ_WAIT_MS`), registers their metrics, and starts the probe timer.
 */
export async function startDeliveryConnections(o: DeliveryConnectionOptions): Promise<DeliveryConnections> {
  const { config, database, redis, logger, metrics } = o;
  const health = new ConnectionHealth(redis, config.queuePrefix, config.sesFailoverWindowMs);
  const parts = new Map<string, ConnectionParts>();
  const connections: DeliveryConnection[] = [];
  const several = config.sesConnections.length > 1;
  /** Sends this process made through each connection (with several: each quota's count between two readings). */
  const sentHere = new Map<string, number>(config.sesConnections.map((c) => [c.name, 0]));
  for (const connection of config.sesConnections) {
    const { name } = connection;
    const clientConfig = { ...connectionClientConfig(connection), sesTimeoutMs: config.sesTimeoutMs };
    const isDefault = name === DEFAULT_CONNECTION;
    const provider: AccountProvider = isDefault
      ? (o.account ?? createAccountProvider(config, () => sentInLast24Hours(database.db)))
      : (o.accounts?.get(name) ??
        (config.sesAccountProvider === 'ses'
          ? new SesAccountProvider(clientConfig)
          : // The emulator has no account: the local figures, and the deployment's count (not this connection's).
            new LocalAccountProvider(
              {
                maxSendRate: connection.maxSendRate ?? config.sesLocalMaxSendRate,
                max24HourSend: config.sesLocalMax24HourSend,
              },
              () => sentInLast24Hours(database.db),
            )));
    const account = new AccountWatcher({
      provider,
      config: { sesMaxSendRate: connection.maxSendRate, sesAccountRefreshMs: config.sesAccountRefreshMs },
      logger: logger.child({ connection: name }),
      // Between two readings the sends since are added. The hourly counts are the deployment's, of every connection:
      // with one connection they are its own; with several each adds what this process sent through it.
      sentSinceHour: several
        ? () => Promise.resolve({ hour: new Date(0), sent: sentHere.get(name) ?? 0 })
        : (hour?: Date) => sentSinceHour(database.db, hour),
    });
    const gateKey = isDefault ? `${config.queuePrefix}:ses-rate-gate` : `${config.queuePrefix}:ses-rate-gate:${name}`;
    const gate = new SendRateGate(redis, gateKey, account.rate, config.sesRateSafetyMs);
    account.onRateChange((rate) => gate.setRate(rate));
    const timedGate = {
      acquire: async (priority?: number, count?: number) => {
        const waitedMs = await gate.acquire(priority, several ? GATE_WAIT_MS : undefined, count);
        metrics.gateWait.observe({ connection: name }, waitedMs / 1000);
        return waitedMs;
      },
      // A bulk call's grants are decided together: no more than a second holds, and with several connections no
      // more than half of what the gate grants within GATE_WAIT_MS, so the calls after it wait within the bound.
      get maxBulk() {
        return Math.max(1, Math.floor(several ? (gate.rate * GATE_WAIT_MS) / 2000 : gate.rate));
      },
      get rate() {
        return gate.rate;
      },
    };
    const transport =
      o.transport ??
      new SesTransport(clientConfig, timedGate, (ms, ok) =>
        metrics.sesSend.observe({ connection: name, outcome: ok ? 'ok' : 'error' }, ms / 1000),
      );
    const control = createSesClient(clientConfig, { maxAttempts: 1, timeoutMs: config.sesTimeoutMs });
    connections.push({
      name,
      transport,
      // With the local identity provider (the emulator) identities are checked through DNS, once for every
      // connection: a domain verified here is verified in each.
      verifies: async (domain) =>
        config.domainIdentityProvider === 'local' || (await identityVerifiedForSending(control, domain)),
      probe: () => probeAccount(control),
    });
    parts.set(name, {
      connection,
      account,
      gate,
      quota: new CampaignQuotaGuard(account, config.sesQuotaReserve, config.sendLeaseMs),
    });
  }
  await Promise.all([...parts.values()].map((p) => p.account.start()));
  const router = new ConnectionRouter({
    connections,
    health,
    binding: (projectId, domain) => boundConnection(database.db, projectId, domain),
    redis,
    prefix: config.queuePrefix,
    logger,
    onSent: (name) => sentHere.set(name, (sentHere.get(name) ?? 0) + 1),
  });
  registerConnectionMetrics(metrics.registry, router, health, parts, config.sesQuotaReserve);

  const probing = { running: false };
  const probe = setInterval(() => {
    if (probing.running) return;
    probing.running = true;
    router
      .probeUnhealthy(config.sesFailoverProbeMs)
      .catch((err: unknown) => logger.warn({ err }, 'delivery connection probe failed'))
      .finally(() => (probing.running = false));
  }, config.sesFailoverProbeMs);
  probe.unref();

  /** The connection a campaign's mail is bound to (its From domain's binding, else its project's, else default). */
  const campaignConnection = async (c: { id: string; projectId: string }): Promise<string> => {
    const row = await loadCampaign(database.db, c.id);
    const bound = row ? await boundConnection(database.db, c.projectId, domainOf(row.fromEmail)) : null;
    return connectionNamed(config.sesConnections, bound).name;
  };
  const totalRate = () => [...parts.values()].reduce((sum, p) => sum + p.account.rate, 0);
  return {
    router,
    health,
    parts,
    defaultAccount: parts.get(DEFAULT_CONNECTION)!.account,
    totalRate,
    quotaPasses: (base) => {
      if (parts.size === 1) return new Map([[DEFAULT_CONNECTION, base]]);
      return new Map(
        [...parts].map(([name, p]) => [
          name,
          {
            ...base,
            account: p.account,
            belongs: async (c: { id: string; projectId: string }) => (await campaignConnection(c)) === name,
          },
        ]),
      );
    },
    onRateChange: (fn) => {
      for (const p of parts.values()) p.account.onRateChange(() => fn(totalRate()));
    },
    stop: () => {
      clearInterval(probe);
      for (const p of parts.values()) p.account.stop();
    },
  };
}

/** The account gauges per connection, and `mailroom_ses_connection_healthy{connection}`. */
function registerConnectionMetrics(
  registry: Registry,
  router: ConnectionRouter,
  health: ConnectionHealth,
  parts: ReadonlyMap<string, ConnectionParts>,
  reserve: number,
): void {
  registerAccountMetrics(registry, new Map([...parts].map(([name, p]) => [name, p.account])), reserve);
  new Gauge({
    name: 'mailroom_ses_connection_healthy',
    help: '1 while a delivery connection is healthy, 0 while it is marked unhealthy (its domains failed over)',
    labelNames: ['connection'] as const,
    registers: [registry],
    async collect() {
      for (const name of router.names) this.set({ connection: name }, (await health.healthy(name)) ? 1 : 0);
    },
  });
}
