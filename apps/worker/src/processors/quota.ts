/**
 * The quota watcher as a maintenance task: every `SES_QUOTA_CHECK_MS`, one pass of the sending domain's quota
 * check (`@mailroom/sending/quota`) per interval across all processes.
 *
 * @module
 */
import { checkQuotaOnce, type QuotaDeps } from '@mailroom/sending/quota';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/** The watcher as a maintenance task: every `SES_QUOTA_CHECK_MS`, one pass per interval across all processes. */
export function quotaTask(deps: QuotaDeps): MaintenanceTask {
  return oncePerInterval('quota', deps.config.sesQuotaCheckMs, () => checkQuotaOnce(deps));
}
