/**
 * The expiry of unconfirmed double opt-ins as a maintenance task (`@mailroom/contacts/double-opt-in-expiry`): every
 * `DOUBLE_OPT_IN_SWEEP_INTERVAL_MS`, one pass per interval across all processes (the lock expires rather than being
 * released).
 *
 * @module
 */
import { expireDoubleOptInsOnce } from '@mailroom/contacts/double-opt-in-expiry';
import type { ContactsConfig } from '@mailroom/contacts/config';
import type { DbOrTx } from '@mailroom/db/client';
import type { Logger } from '@mailroom/platform/logger';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** The expiry pass as a maintenance task. */
export function doubleOptInTask(deps: {
  config: Pick<ContactsConfig, 'doubleOptInExpiryHours' | 'doubleOptInSweepIntervalMs'>;
  database: { db: DbOrTx };
  logger: Logger;
}): MaintenanceTask {
  return oncePerInterval('double-opt-in-expiry', deps.config.doubleOptInSweepIntervalMs, () =>
    expireDoubleOptInsOnce(deps),
  );
}
