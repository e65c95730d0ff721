/**
 * The thresholds campaigns are judged by and their service defaults (the `GUARDRAIL_*` settings).
 *
 * @module
 */

/** The thresholds a campaign is judged by. Rates are fractions (0.02 = 2 %). */
export interface Guardrails {
  /** Outcomes (deliveries plus hard and soft bounces) a campaign needs before its rates are judged (≥ 1). */
  minSample: number;
  /** Hard bounces per outcome above which the campaign pauses (0–1). */
  maxHardBounceRate: number;
  /** Complaints per outcome above which the campaign pauses (0–1). */
  maxComplaintRate: number;
}

/**
 * The service defaults (`GUARDRAIL_MIN_SAMPLE`, `GUARDRAIL_MAX_HARD_BOUNCE_RATE`, `GUARDRAIL_MAX_COMPLAINT_RATE`):
 * 200 outcomes, 2 % hard bounces, 0.05 % complaints. SES reviews an account at 5 % bounces and 0.1 % complaints
 * (and warns at half of that); the defaults stop a campaign at well under half of each, so one tenant's bad list
 * is stopped before it moves the shared account's rates noticeably.
 */
export const DEFAULT_GUARDRAILS: Readonly<Guardrails> = Object.freeze({
  minSample: 200,
  maxHardBounceRate: 0.02,
  maxComplaintRate: 0.0005,
});
