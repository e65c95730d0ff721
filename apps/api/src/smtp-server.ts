/**
 * SMTP relay process entry point (`npm run start:smtp`): load config once, connect, listen on the relay's ports
 * (`SMTP_PORT` STARTTLS, `SMTP_TLS_PORT` implicit TLS, `SMTP_PLAIN_PORT` local only), shut down gracefully on
 * SIGTERM/SIGINT (stop accepting, let transactions in flight finish, close the queues, Redis and Postgres; forced
 * exit after 15 s). The relay is its own process (docs/decisions/0100-smtp-relay-process.md) built from the API's
 * code: the same key authentication, limits and acceptance.
 *
 * @module
 */
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { runService } from '@mailroom/platform/process';
import { loadConfig, type Config } from '@mailroom/config/config';
import { createDatabase } from '@mailroom/db/client';
import { AuthCache } from './http/auth';
import { authFailureLimiter } from './http/rate-limit';
import { startSmtpRelay, type SmtpRelay } from './smtp/relay';

/** Starts the relay; resolves once every port listens. @returns the relay and a `stop()` that shuts it down. */
export async function startSmtp(config: Config): Promise<{ relay: SmtpRelay; stop: () => Promise<void> }> {
  const logger = createLogger(config, 'smtp');
  const database = createDatabase({
    url: config.databaseUrl,
    poolSize: config.dbPoolSize,
    applicationName: 'mailroom-smtp',
    onConnectionError: (err) => logger.warn({ err: err.message }, 'postgres connection lost; the pool reconnects'),
  });
  const redis = createRedis(config, 'producer');
  const queues = createQueues(config, redis);
  const closeDeps = async () => {
    await queues.closeAll();
    redis.disconnect();
    await database.close();
  };
  let relay: SmtpRelay;
  try {
    relay = await startSmtpRelay({
      config,
      database,
      redis,
      queues,
      logger,
      authCache: new AuthCache(config.authCacheTtlMs, config.authNegativeCacheTtlMs),
      authFailures: authFailureLimiter(redis, config),
    });
  } catch (err) {
    await closeDeps();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      logger.info('smtp relay shutting down');
      await relay.close();
      await closeDeps();
      logger.info('smtp relay stopped');
    })());
  return { relay, stop };
}

if (require.main === module) runService('smtp', loadConfig, startSmtp, 15_000);
