/**
 * Retention of the test-mode sink: test messages (`test_messages`, up to ~14 MB each) are kept
 * `TEST_MESSAGE_RETENTION_HOURS` after they were stored, so a CI job sending with a test key cannot fill the
 * database. Older ones are deleted oldest first, 1,000 rows per statement, at most {@link PASS_BUDGET_MS} of
 * statements per pass (a backlog is worked off over the following passes, and the one-at-a-time maintenance worker
 * of the process is not held up for long).
 *
 * The worker runs {@link pruneTestMessagesOnce} as its `test-messages` maintenance task (every 10 minutes, one pass
 * per interval across all processes).
 *
 * @module
 */
import type { SendingConfig } from './config';
import type { Logger } from '@mailroom/platform/logger';
import { pruneTestMessages } from './queries/test-messages';
import { type Database } from '@mailroom/db/client';

/** No further delete statement starts after this long in one pass (ms). */
export const PASS_BUDGET_MS = 30_000;

/** Dependencies of the retention pass. */
export interface TestMessagePruneDeps {
  config: Pick<SendingConfig, 'testMessageRetentionHours'>;
  database: Database;
  logger: Logger;
}

/**
 * One pass: deletes the test messages stored more than `TEST_MESSAGE_RETENTION_HOURS` ago.
 *
 * @returns rows deleted, and `more` when the pass's budget ran out with old messages left (the next pass goes on).
 * @throws the database's error (the maintenance job fails and the next tick retries).
 */
export async function pruneTestMessagesOnce(deps: TestMessagePruneDeps): Promise<{ deleted: number; more: boolean }> {
  const r = await pruneTestMessages(deps.database.db, deps.config.testMessageRetentionHours, PASS_BUDGET_MS);
  if (r.deleted > 0)
    deps.logger.info(
      { deleted: r.deleted, more: r.more, retentionHours: deps.config.testMessageRetentionHours },
      'expired test messages deleted',
    );
  return r;
}
