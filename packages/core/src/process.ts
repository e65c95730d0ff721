/**
 * The entry-point routine shared by the API and worker processes: parse configuration once (exit 1 naming the
 * bad variable), start, and on SIGTERM/SIGINT stop gracefully, forcing an exit after `graceMs`.
 *
 * @module
 */
import { loadConfig, type Config } from './config';

/**
 * Runs a service until it is signalled.
 *
 * @param name - used in the start-up failure message.
 * @param start - starts the service; resolves to its graceful `stop()`.
 * @param graceMs - how long `stop()` may take before the process exits anyway (ms).
 */
export function runService(name: string, start: (config: Config) => Promise<{ stop: () => Promise<void> }>, graceMs: number): void {
  let config: Config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    console.error((err as Error).message);
    process.exit(1);
  }
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
