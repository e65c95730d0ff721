/**
 * The campaign job's part in retry-failed (`POST /campaigns/{id}/retry-failed`): the re-queued emails are fed
 * through the campaign's bounded window like any others, but each one's send job of the first try may still be
 * in the send queue, finished (kept up to an hour, `sendJobOptions`), under the same job id (the email id). Adding
 * a job with that id would then be a no-op and the email would wait for the reconciler. This frees those ids just
 * before the feed adds the new jobs (a job that carried several emails is named after its first: freed too).
 *
 * @module
 */
import type { Queue } from 'bullmq';
import { sendBatchJobId } from '@mailroom/queues/catalog';
import { retriedEmailIds } from './queries/campaign-retry';
import { type DbOrTx } from '@mailroom/db/client';

/** Job states whose job is over: its id can be taken by a new job once it is removed. */
const FINISHED = new Set(['completed', 'failed']);

/**
 * Removes the finished send jobs of the retried emails among `emailIds` (a feed chunk of campaign `campaignId`).
 * A live job (waiting, delayed, active) is left alone: it claims the re-queued row itself, and the feed's add is
 * then a no-op. For a campaign never retried this is one short query and no Redis call.
 *
 * @returns how many finished jobs were removed.
 */
export async function freeRetriedJobIds(
  db: DbOrTx,
  sendQueue: Queue,
  campaignId: string,
  emailIds: readonly string[],
): Promise<number> {
  // An email's own job (its id), or a job that carried several emails with it first (`sendBatchJobId`).
  const retried = (await retriedEmailIds(db, campaignId, emailIds)).flatMap((id) => [id, sendBatchJobId([id])]);
  let removed = 0;
  for (let i = 0; i < retried.length; i += 100) {
    const slice = retried.slice(i, i + 100);
    const states = await Promise.all(slice.map((id) => sendQueue.getJobState(id)));
    const done = slice.filter((_, j) => FINISHED.has(states[j]));
    const results = await Promise.all(done.map((id) => sendQueue.remove(id).catch(() => 0)));
    removed += results.filter((n) => n > 0).length;
  }
  return removed;
}
