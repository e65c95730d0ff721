/**
 * The contacts slice of the runtime configuration: the sizes of contact imports.
 *
 * @module
 */
import { int, type Env } from '@mailroom/platform/config-env';

/**
 * Contact import sizes.
 *
 * @process worker
 * @group tuning
 */
export interface ContactsConfig {
  /**
   * `IMPORT_MAX_BYTES`: largest contact import file (bytes, default 256 MiB); larger uploads get 413.
   *
   * @process api
   * @group api
   */
  readonly importMaxBytes: number;
  /** `IMPORT_BATCH_SIZE`: contacts per import statement (rows, 1–50000, default 5000). */
  readonly importBatchSize: number;
  /**
   * `IMPORT_PARALLEL`: batches of one import applied at once, each in its own transaction on its own connection
   * (1–4, default 2; 1 applies them one after the other). They still commit in file order.
   */
  readonly importParallel: number;
}

/**
 * Parses and validates the contacts slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link ContactsConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadContactsConfig(env: Env): ContactsConfig {
  return Object.freeze({
    importMaxBytes: int(env, 'IMPORT_MAX_BYTES', 256 * 1024 * 1024, 1, 16 * 1024 * 1024 * 1024),
    importBatchSize: int(env, 'IMPORT_BATCH_SIZE', 5_000, 1, 50_000),
    importParallel: int(env, 'IMPORT_PARALLEL', 2, 1, 4),
  });
}
