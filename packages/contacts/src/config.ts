/**
 * The contacts slice of the runtime configuration: the sizes of contact imports, and how long a double opt-in
 * waits for its confirmation.
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
  /**
   * `DOUBLE_OPT_IN_EXPIRY_HOURS`: how long a double opt-in confirmation link stays valid (hours, 1–8760, default
   * 168, one week). After it the worker's expiry pass marks the confirmation expired and deletes the contact when
   * the double opt-in created it and it never confirmed (erased as `DELETE /contacts/{id}` erases).
   *
   * @process api, worker
   * @group shared
   */
  readonly doubleOptInExpiryHours: number;
  /**
   * `DOUBLE_OPT_IN_SWEEP_INTERVAL_MS`: how often the worker's expiry pass runs (ms, 100–86400000, default 600000);
   * an unconfirmed contact outlives its expiry by at most about this long.
   *
   * @process worker
   * @group worker
   */
  readonly doubleOptInSweepIntervalMs: number;
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
    doubleOptInExpiryHours: int(env, 'DOUBLE_OPT_IN_EXPIRY_HOURS', 168, 1, 8760),
    doubleOptInSweepIntervalMs: int(env, 'DOUBLE_OPT_IN_SWEEP_INTERVAL_MS', 600_000, 100, 86_400_000),
  });
}
