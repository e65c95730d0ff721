/**
 * The entry-point routine shared by the API and worker processes: parse configuration once (exit 1 naming the
 * bad variable), start, and on SIGTERM/SIGINT stop gracefully, forcing an exit after `graceMs`.
 *
 * @module
 */
import http, { type RequestListener, type Server, type ServerOptions } from 'node:http';
import type { PlatformConfig } from './config';
import type { Env } from './config-env';
import { isUnavailableError, errorMessage } from './errors';
import { createLogger } from './logger';

/** Why a server could not bind its port, in words an operator acts on. */
const LISTEN_HINTS: Record<string, string> = {
  EADDRINUSE: 'the port is already in use by another process',
  EACCES: 'permission denied (ports below 1024 need privileges)',
  EADDRNOTAVAIL: 'the address is not available on this machine',
};

/**
 * Starts an HTTP server and resolves once it is listening. Express 5's `app.listen(port, cb)` hands a bind
 * failure to the callback, so a second process on a taken port would log "listening" and serve nothing; this
 * rejects instead.
 *
 * @param handler - the request listener (an Express app is one).
 * @param port - TCP port; `0` picks a free one.
 * @param what - names the server in the error (`api`, `worker health`).
 * @param options - `http.createServer`'s options (the API's request and response classes).
 * @throws Error `<what> cannot listen on port <port>: <code> (<hint>)` when the port cannot be bound.
 */
export function listenOn(
  handler: RequestListener,
  port: number,
  what = 'server',
  options: ServerOptions = {},
): Promise<Server> {
  const server = http.createServer(options, handler);
  return new Promise<Server>((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException) => {
      server.close();
      const code = err.code ?? 'error';
      reject(new Error(`${what} cannot listen on port ${port}: ${code} (${LISTEN_HINTS[code] ?? err.message})`));
    };
    server.once('error', onError);
    server.listen(port, () => {
      server.off('error', onError);
      // Later server errors (EMFILE when out of file descriptors) fail connections, not the process.
      server.on('error', (err) => process.emitWarning(`${what} server error: ${err.message}`));
      resolve(server);
    });
  });
}

/**
 * Runs a service until it is signalled.
 *
 * @param name - used in the start-up failure message.
 * @param load - parses the configuration from `process.env` (the entry point's `loadConfig`, which knows every
 *   slice); a `ConfigError` it throws ends the process with exit code 1 and the message naming the variable.
 * @param start - starts the service; resolves to its graceful `stop()`.
 * @param graceMs - how long `stop()` may take before the process exits anyway (ms).
 */
export function runService<C extends Pick<PlatformConfig, 'logLevel' | 'logPretty'>>(
  name: string,
  load: (env: Env) => C,
  start: (config: C) => Promise<{ stop: () => Promise<void> }>,
  graceMs: number,
): void {
  let config: C;
  try {
    config = load(process.env);
  } catch (err) {
    console.error(errorMessage(err));
    process.exit(1);
  }
  // Last line of defence: a connection error that some client emits with no listener (a dropped Postgres or
  // Redis socket) is weather, not a bug, and must not end the process; the work it interrupted is retried.
  // Anything else is a bug: log it and exit, as Node would.
  const log = createLogger(config, name);
  const guard = (kind: string) => (err: unknown) => {
    if (isUnavailableError(err)) {
      log.warn({ err }, `${kind}: a backing service connection was lost; continuing`);
      return;
    }
    log.fatal({ err }, kind);
    console.error(`${name}: ${kind}`, err);
    process.exit(1);
  };
  process.on('uncaughtException', guard('uncaught exception'));
  process.on('unhandledRejection', guard('unhandled rejection'));
  start(config)
    .then(({ stop }) => {
      for (const signal of ['SIGTERM', 'SIGINT'] as const) {
        process.once(signal, () => {
          setTimeout(() => process.exit(1), graceMs).unref();
          void stop().then(() => process.exit(0));
        });
      }
    })
    .catch((err: Error) => {
      console.error(`${name} failed to start: ${err.message}`);
      process.exit(1);
    });
}
