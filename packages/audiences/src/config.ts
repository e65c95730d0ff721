/**
 * The audiences slice of the runtime configuration: campaign fan-out and feeding, the campaign lane, dynamic
 * segment refreshes and the service defaults of the campaign guardrails.
 *
 * @module
 */
import { fraction, int, type Env } from '@mailroom/platform/config-env';
import { DEFAULT_GUARDRAILS, type Guardrails } from './guardrail-defaults';

/**
 * Campaign, segment and guardrail settings.
 *
 * @process worker
 * @group tuning
 */
export interface AudienceConfig {
  /** `CAMPAIGN_BATCH_SIZE`: recipients turned into email rows per fan-out statement (rows, 1–50000, default 5000). */
  readonly campaignBatchSize: number;
  /**
   * `CAMPAIGN_QUEUE_WINDOW`: most emails of one campaign waiting in the send queue at once (jobs, default 5000);
   * the rest wait as rows, so Redis never holds a whole audience.
   */
  readonly campaignQueueWindow: number;
  /** `CAMPAIGN_TICK_MS`: how often a sending campaign tops up its window and checks for completion (ms, default 1000). */
  readonly campaignTickMs: number;
  /**
   * `CAMPAIGN_LANE_SECONDS`: how much sending the campaign lane keeps in the send queue (s at the current send rate,
   * at least two `CAMPAIGN_TICK_MS`, at least 20 jobs; default 3), divided equally between the projects with a
   * campaign sending and within a project between its campaigns; each campaign tops up only its share (at most
   * `CAMPAIGN_QUEUE_WINDOW`). Projects' campaigns thus share the rate instead of queueing one behind the other.
   */
  readonly campaignLaneSeconds: number;
  /**
   * `CAMPAIGN_JOB_EMAILS`: most emails of a campaign one send job carries (emails, 1–500, default 50; 1 gives each
   * email a job of its own). The feed puts in one job at most 50 ms of sending at the current send rate (one email
   * below 40/s), so a worker slot held by such a job frees as often as one-email jobs would free it.
   */
  readonly campaignJobEmails: number;
  /**
   * `CAMPAIGN_PAUSE_RECHECK_MS`: how long a send job of a PAUSED campaign waits before it looks again (ms, default
   * 60000). A resume wakes the campaign's jobs at once; this only bounds a wake-up that was missed.
   */
  readonly campaignPauseRecheckMs: number;
  /**
   * `CAMPAIGN_AB_MIN_WAIT_SECONDS`: the shortest wait an A/B test may set between its last test email and the
   * automatic choice of the winner (s, 1–86400, default 300). Fewer seconds than a few minutes leave too little time
   * for opens and clicks to arrive; tests set it low.
   *
   * @process api
   */
  readonly campaignAbMinWaitSeconds: number;
  /**
   * `SEGMENT_REFRESH_MS`: how often dynamic segments are recounted and tracked memberships re-evaluated (ms,
   * default 300000).
   */
  readonly segmentRefreshMs: number;
  /**
   * Service defaults of the campaign guardrails (a project's `guardrails` overrides each):
   * - `GUARDRAIL_MIN_SAMPLE`: outcomes before a campaign is judged (default 200).
   * - `GUARDRAIL_MAX_HARD_BOUNCE_RATE`: hard bounces per outcome above which a campaign pauses (fraction, default 0.02).
   * - `GUARDRAIL_MAX_COMPLAINT_RATE`: complaints per outcome above which a campaign pauses (fraction, default 0.0005).
   *
   * @process api, worker
   * @group worker
   */
  readonly guardrails: Readonly<Guardrails>;
}

/**
 * Parses and validates the audiences slice.
 *
 * @param env - the environment (normally `process.env`, passed by the entry point).
 * @returns a frozen {@link AudienceConfig}.
 * @throws `ConfigError` naming the first bad variable.
 */
export function loadAudienceConfig(env: Env): AudienceConfig {
  return Object.freeze({
    campaignBatchSize: int(env, 'CAMPAIGN_BATCH_SIZE', 5_000, 1, 50_000),
    campaignQueueWindow: int(env, 'CAMPAIGN_QUEUE_WINDOW', 5_000, 1, 1_000_000),
    campaignTickMs: int(env, 'CAMPAIGN_TICK_MS', 1_000, 10, 60_000),
    campaignLaneSeconds: int(env, 'CAMPAIGN_LANE_SECONDS', 3, 1, 3_600),
    campaignJobEmails: int(env, 'CAMPAIGN_JOB_EMAILS', 50, 1, 500),
    campaignPauseRecheckMs: int(env, 'CAMPAIGN_PAUSE_RECHECK_MS', 60_000, 100, 3_600_000),
    campaignAbMinWaitSeconds: int(env, 'CAMPAIGN_AB_MIN_WAIT_SECONDS', 300, 1, 86_400),
    segmentRefreshMs: int(env, 'SEGMENT_REFRESH_MS', 300_000, 100, 86_400_000),
    guardrails: Object.freeze({
      minSample: int(env, 'GUARDRAIL_MIN_SAMPLE', DEFAULT_GUARDRAILS.minSample, 1, 10_000_000),
      maxHardBounceRate: fraction(env, 'GUARDRAIL_MAX_HARD_BOUNCE_RATE', DEFAULT_GUARDRAILS.maxHardBounceRate),
      maxComplaintRate: fraction(env, 'GUARDRAIL_MAX_COMPLAINT_RATE', DEFAULT_GUARDRAILS.maxComplaintRate),
    }),
  });
}
