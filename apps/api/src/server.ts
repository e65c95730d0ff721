/**
 * API process entry point: load config once, connect, listen on `PORT`, shut down gracefully on SIGTERM/SIGINT
 * (stop accepting, let in-flight requests finish, close the queues, Redis and Postgres; forced exit after 15 s).
 *
 * @module
 */
import type { Server } from 'node:http';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { listenOn, runService } from '@mailroom/platform/process';
import { loadConfig, type Config } from '@mailroom/config/config';
import { createDatabase } from '@mailroom/db/client';
import { createReadReplicas } from '@mailroom/db/replicas';
import { createApp } from './app';
import { expressServerOptions } from './http/server-classes';

/** Starts the API; resolves once it listens. @returns a `stop()` that shuts it down gracefully. */
export async function startApi(config: Config): Promise<{ server: Server; stop: () => Promise<void> }> {
  const logger = createLogger(config, 'api');
  const database = createDatabase({
    url: config.databaseUrl,
    poolSize: config.dbPoolSize,
    applicationName: 'mailroom-api',
    onConnectionError: (err) => logger.warn({ err: err.message }, 'postgres connection lost; the pool reconnects'),
  });
  const replicas = createReadReplicas({
    primary: database,
    urls: config.databaseReplicaUrls,
    poolSize: config.dbPoolSize,
    applicationName: 'mailroom-api-replica',
    maxLagMs: config.databaseReplicaMaxLagMs,
    checkIntervalMs: config.databaseReplicaCheckIntervalMs,
    onStateChange: (status, previous, reason) =>
      logger[status.state === 'ok' ? 'info' : 'warn'](
        { replica: status.name, state: status.state, previous, lagMs: status.lagMs, reason },
        'read replica state changed',
      ),
  });
  const redis = createRedis(config, 'producer');
  const queues = createQueues(config, redis);
  const { app } = createApp({ config, database, replicas, redis, queues, logger });
  let server: Server;
  try {
    server = await listenOn(app, config.port, 'api', expressServerOptions(app));
  } catch (err) {
    await queues.closeAll();
    redis.disconnect();
    await replicas.close();
    await database.close();
    throw err;
  }
  server.keepAliveTimeout = 65_000;
  logger.info({ port: config.port, publicUrl: config.publicUrl }, 'api listening');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('api shutting down');
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      });
      await queues.closeAll();
      redis.disconnect();
      await replicas.close();
      await database.close();
      logger.info('api stopped');
    })());
  return { server, stop };
}

if (require.main === module) runService('api', loadConfig, startApi, 15_000);
