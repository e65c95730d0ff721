/**
 * The contacts slice of the runtime configuration: the sizes of contact imports.
 *
 * @module
 */
import { int, type Env } from '@mailroom/platform/config-env';

/** Contact import sizes. */
export interface ContactsConfig {
  /** `IMPORT_MAX_BYTES`: largest contact import file (bytes, default 256 MiB); larger uploads get 413. */
  readonly importMaxBytes: number;
  /** `IMPORT_BATCH_SIZE`: contacts per import statement (rows, 1–50000, default 5000). */
  readonly importBatchSize: number;
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
  });
}
