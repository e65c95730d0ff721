/**
 * The quota watcher as a maintenance task: every `SES_QUOTA_CHECK_MS`, one pass of the sending domain's quota
 * check (`@mailroom/sending/quota`) per interval across all processes.
 *
 * @module
 */
import { checkQuotaOnce, type QuotaDeps } from '@mailroom/sending/quota';
import { oncePerInterval, type MaintenanceTask } from './maintenance';

/**
 * The watcher as a maintenance task: every `SES_QUOTA_CHECK_MS`, one pass per interval across all processes; with
 * several delivery connections, one pass per connection (`passes`: each with its account and campaigns).
 */
export function quotaTask(deps: QuotaDeps, passes: QuotaDeps[] = [deps]): MaintenanceTask {
  return oncePerInterval('quota', deps.config.sesQuotaCheckMs, async () => {
    const results = [];
    for (const pass of passes) results.push(await checkQuotaOnce(pass));
    return results.length === 1 ? results[0] : results;
  });
}
