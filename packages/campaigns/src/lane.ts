/**
 * Fair share of the campaign lane between projects.
 *
 * The send queue takes campaign jobs first come, first served within the campaign priority. If each campaign kept
 * thousands of its emails there, a campaign started a second after another would wait behind all of them, and a
 * million-recipient campaign would hold the lane for hours. So the lane is kept shallow and shared:
 *
 * - its depth is a few seconds of sending at the current send rate ({@link campaignLaneDepth}:
 *   `CAMPAIGN_LANE_SECONDS`, at least two `CAMPAIGN_TICK_MS` so it never runs dry between two top-ups, at least
 *   {@link MIN_LANE_DEPTH} jobs);
 * - it is divided equally between the projects that have a campaign still feeding the lane, and within a project
 *   between its campaigns ({@link campaignWindow}); each campaign tops up only its share every tick (never more
 *   than `CAMPAIGN_QUEUE_WINDOW`). Live and test campaigns are counted apart (`campaignLaneShare`): test traffic
 *   has a share of its own and never takes a part of the live projects' share.
 *
 * The queue then holds about the same number of jobs of each project, and as they are replaced in the order they
 * are taken, each project gets an equal share of the rate (within a few seconds' granularity), whatever the
 * sizes: a small campaign finishes in about `2 × its size / rate` beside a large one, instead of after it. A
 * project that needs less than its share (its last emails) leaves the rest of the lane to the others at their next
 * top-up. Transactional and workflow mail keep their own lanes ahead of all this.
 *
 * @module
 */
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { LaneShare } from '@mailroom/db/queries/send-quota';

/** The smallest campaign lane (jobs), whatever the rate. */
export const MIN_LANE_DEPTH = 20;

/**
 * How many campaign jobs the send queue should hold, all campaigns together.
 *
 * @param emailsPerSecond - the send rate in force.
 * @param config - `campaignLaneSeconds` (s) and `campaignTickMs` (ms).
 * @returns jobs: `ceil(rate × max(CAMPAIGN_LANE_SECONDS, 2 × CAMPAIGN_TICK_MS))`, at least {@link MIN_LANE_DEPTH}.
 */
export function campaignLaneDepth(
  emailsPerSecond: number,
  config: Pick<AudienceConfig, 'campaignLaneSeconds' | 'campaignTickMs'>,
): number {
  const seconds = Math.max(config.campaignLaneSeconds, (2 * config.campaignTickMs) / 1000);
  return Math.max(MIN_LANE_DEPTH, Math.ceil(emailsPerSecond * seconds));
}

/**
 * One campaign's window: its share of the lane, `depth / projects / campaigns of its project`, rounded down,
 * at least 1 and at most `maxWindow` (`CAMPAIGN_QUEUE_WINDOW`).
 */
export function campaignWindow(depth: number, share: LaneShare, maxWindow: number): number {
  return Math.max(
    1,
    Math.min(maxWindow, Math.floor(depth / Math.max(1, share.projects) / Math.max(1, share.campaignsOfProject))),
  );
}

/** Sending (ms at the current send rate) one campaign send job carries at most. */
export const CAMPAIGN_JOB_SENDING_MS = 50;

/**
 * How many emails one campaign send job carries: {@link CAMPAIGN_JOB_SENDING_MS} of sending at `emailsPerSecond`,
 * at least 1 and at most `maxEmails` (`CAMPAIGN_JOB_EMAILS`). A worker runs a job's emails one after the other in
 * one slot, so a slot held by a campaign job frees about every 50 ms however many emails the job carries, and a
 * transactional job waiting for a slot is not held back longer than behind one-email jobs (decision 0171).
 *
 * @returns emails per job: `clamp(floor(rate × 0.05), 1, maxEmails)`; 1 below 40 emails/s.
 */
export function campaignJobSize(emailsPerSecond: number, maxEmails: number): number {
  return Math.max(1, Math.min(maxEmails, Math.floor((emailsPerSecond * CAMPAIGN_JOB_SENDING_MS) / 1000)));
}
