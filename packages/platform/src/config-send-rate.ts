/**
 * The send-rate and quota part of `Config` (declared here to keep config.ts short; parsed by `loadConfig`):
 * the SES account's figures and how the send rate is shared between projects.
 *
 * @module
 */

/** Send rate, SES account quota and fair share settings. */
export interface SendRateConfig {
  /**
   * `SES_MAX_SEND_RATE`: optional cap of the send rate (emails/s across all workers), below the SES account's
   * maximum send rate (read with `GetAccount`). The workers send at `min(account rate, cap)`, never more in any
   * one-second window. Unset: the account's rate (or 14/s until the account has been read).
   */
  readonly sesMaxSendRate: number | undefined;
  /**
   * `SES_ACCOUNT_PROVIDER`: where the account's send rate and 24-hour quota come from: `ses` (SES v2 `GetAccount`)
   * or `local` (the `SES_LOCAL_*` figures and this service's own count: the emulator has no account). Default
   * `local` when `SES_ENDPOINT` is set, else `ses`.
   */
  readonly sesAccountProvider: 'ses' | 'local';
  /** `SES_ACCOUNT_REFRESH_MS`: how often each worker re-reads the SES account (send rate, quota) (ms). */
  readonly sesAccountRefreshMs: number;
  /**
   * `SES_QUOTA_CHECK_MS`: how often the 24-hour quota is checked (campaigns paused or resumed) (ms). Between two
   * account reads the deployment's own sends since the last read are added, so a check sees them at once.
   */
  readonly sesQuotaCheckMs: number;
  /**
   * `SES_QUOTA_RESERVE`: share of the 24-hour quota kept for transactional and workflow mail (fraction, 0–0.5):
   * campaigns pause at `max24HourSend × (1 − reserve)` sent and resume below `max24HourSend × (1 − 2 × reserve)`.
   */
  readonly sesQuotaReserve: number;
  /** `SES_LOCAL_MAX_SEND_RATE`: the local provider's maximum send rate (emails/s); default `SES_MAX_SEND_RATE`, else 14. */
  readonly sesLocalMaxSendRate: number;
  /** `SES_LOCAL_MAX_24H_SEND`: the local provider's 24-hour quota (emails). */
  readonly sesLocalMax24HourSend: number;
  /**
   * `SES_RATE_SAFETY_MS`: margin (ms) added to the send-rate gate's one-second window. Sends are recorded when
   * their request has been written, so the margin covers only the way from the socket to SES (and the clock of
   * whoever counts there): at most `rate` requests leave in any `1000 + margin` ms (`rate`: the send rate in use,
   * see `SES_MAX_SEND_RATE`), spaced by at least `(1000 + margin) / rate` ms. 50 ms held 14/s in every run of the scale test beside two CPU burners
   * (25 ms let a 15th send in once in ten); it costs 2.4% of the rate.
   */
  readonly sesRateSafetyMs: number;
  /**
   * `CAMPAIGN_LANE_SECONDS`: how much sending the campaign lane keeps in the send queue (s at the current send rate,
   * at least two `CAMPAIGN_TICK_MS`, at least 20 jobs), divided equally between the projects with a campaign
   * sending and within a project between its campaigns; each campaign tops up only its share (at most
   * `CAMPAIGN_QUEUE_WINDOW`). Projects' campaigns thus share the rate instead of queueing one behind the other.
   */
  readonly campaignLaneSeconds: number;
  /**
   * `SEND_FAIR_SHARE_PER_MINUTE`: emails one project may enqueue per minute in the transactional (or workflow)
   * lane at the lane's own priority; beyond it its mail moves one priority step down per tenfold (three steps at
   * most, still ahead of the next lane), so another project's mail overtakes a burst.
   */
  readonly sendFairSharePerMinute: number;
}
