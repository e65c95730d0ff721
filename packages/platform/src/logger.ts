/**
 * pino logging. Log with fields, not interpolation: `log.info({ emailId }, 'email sent')`.
 * Child loggers carry `requestId` (API) or `jobId` (worker) on every line.
 *
 * @module
 */
import pino, { type Logger } from 'pino';
import type { PlatformConfig } from './config';

export type { Logger } from 'pino';

/**
 * Creates the process logger.
 *
 * @param config - `logLevel` and `logPretty` are used; pretty output needs the optional `pino-pretty` package.
 * @param name - the process role (`api`, `worker`, `cli`), added to every line as `service`.
 */
export function createLogger(config: Pick<PlatformConfig, 'logLevel' | 'logPretty'>, name: string): Logger {
  let transport: pino.TransportSingleOptions | undefined;
  if (config.logPretty) {
    try {
      require.resolve('pino-pretty');
      transport = { target: 'pino-pretty', options: { colorize: true, translateTime: 'HH:MM:ss.l' } };
    } catch {
      transport = undefined;
    }
  }
  return pino({
    level: config.logLevel,
    base: { service: name },
    redact: { paths: ['req.headers.authorization', '*.secretKey', '*.password'], censor: '[redacted]' },
    transport,
  });
}

/** The levels {@link logged} reports a failure at: `debug` where it is expected and harmless, `warn` otherwise. */
export type FailureLevel = 'debug' | 'warn';

/**
 * Best-effort work: waits for `work` and never rejects. A failure is logged at `level` as
 * `{ err }, '<what> failed'` and yields undefined, where `.catch(() => undefined)` would have dropped it unseen.
 *
 * @param log - the logger (or child logger) of the caller, whose bound fields the line carries.
 * @param what - the work that failed, in a few words (`'stale send job removal'`).
 * @returns what `work` resolved to, or undefined when it rejected.
 */
export async function logged<T>(
  work: PromiseLike<T>,
  log: Pick<Logger, FailureLevel>,
  what: string,
  level: FailureLevel = 'warn',
): Promise<T | undefined> {
  try {
    return await work;
  } catch (err) {
    log[level]({ err }, `${what} failed`);
    return undefined;
  }
}
