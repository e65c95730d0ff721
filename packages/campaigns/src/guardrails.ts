/**
 * Deliverability guardrails of campaigns and the reputation figures behind them (docs/architecture.md#guardrails), as
 * pure functions: which thresholds apply to a project, whether a campaign's outcomes so far cross them, and the rates
 * SES itself reports.
 *
 * Two denominators, on purpose:
 * - A campaign is judged on its *outcomes* (deliveries plus hard and soft bounces reported by SES), not on its
 *   sends: while a campaign runs, sends run minutes ahead of their feedback, so a rate per send would understate a
 *   bad list exactly when it matters. `hardBounceRate = hardBounces / outcomes`,
 *   `complaintRate = complaints / outcomes`, judged only once `outcomes >= minSample`.
 * - `GET /reputation` and `/metrics` report the rates as SES computes them for its account review: per email
 *   sent (`hardBounces / sent`, `complaints / sent`), to compare with {@link SES_REVIEW_LEVELS}.
 *
 * @module
 */
import type { Guardrails } from '@mailroom/audiences/guardrail-defaults';

/** The names of the guardrail settings, in the order they are shown. */
export const GUARDRAIL_FIELDS = ['minSample', 'maxHardBounceRate', 'maxComplaintRate'] as const;
export type GuardrailField = (typeof GUARDRAIL_FIELDS)[number];

/** A project's overrides as stored (`projects.guardrails`): a field left out (or null) takes the service default. */
export type GuardrailOverrides = { [K in GuardrailField]?: number | null };

/** The rates at which SES puts an account under review (bounces and complaints per email sent). */
export const SES_REVIEW_LEVELS = Object.freeze({ hardBounceRate: 0.05, complaintRate: 0.001 });

/** Outcomes SES reported for a campaign (or any set of emails). */
export interface OutcomeCounts {
  delivered: number;
  hardBounces: number;
  softBounces: number;
  complaints: number;
}

/** Why a campaign pauses, and the figures that made it (the `pause_details`, timeline entry and webhook data). */
export interface GuardrailDetails {
  /** Hard bounces per outcome (0–1). */
  hardBounceRate: number;
  /** Complaints per outcome (0–1). */
  complaintRate: number;
  outcomes: number;
  hardBounces: number;
  complaints: number;
  delivered: number;
  /** The threshold the rate crossed (the one of the reason). */
  threshold: number;
  minSample: number;
}

/** The verdict on a campaign. */
export type GuardrailVerdict =
  { pause: false } | { pause: true; reason: 'bounce_rate' | 'complaint_rate'; details: GuardrailDetails };

/** Whether `v` is a valid value of setting `field` (an integer ≥ 1 for `minSample`, a fraction 0–1 for the rates). */
export function validGuardrailValue(field: GuardrailField, v: unknown): v is number {
  if (typeof v !== 'number' || !Number.isFinite(v)) return false;
  return field === 'minSample' ? Number.isInteger(v) && v >= 1 : v >= 0 && v <= 1;
}

/**
 * The thresholds that apply: each override that is set and valid, else the default. An invalid stored value (a
 * hand-edited row) falls back to the default rather than disabling the guardrail.
 */
export function effectiveGuardrails(defaults: Readonly<Guardrails>, overrides?: GuardrailOverrides | null): Guardrails {
  const pick = (field: GuardrailField): number => {
    const v = overrides?.[field];
    return validGuardrailValue(field, v) ? v : defaults[field];
  };
  return {
    minSample: pick('minSample'),
    maxHardBounceRate: pick('maxHardBounceRate'),
    maxComplaintRate: pick('maxComplaintRate'),
  };
}

/**
 * The outcomes since a baseline (the counts when the campaign was last resumed from a guardrail pause), never
 * negative. No baseline: the counts as they are.
 */
export function outcomesSince(counts: OutcomeCounts, baseline?: Partial<OutcomeCounts> | null): OutcomeCounts {
  const less = (k: keyof OutcomeCounts) => Math.max(0, counts[k] - (Number(baseline?.[k]) || 0));
  return {
    delivered: less('delivered'),
    hardBounces: less('hardBounces'),
    softBounces: less('softBounces'),
    complaints: less('complaints'),
  };
}

/**
 * Judges a campaign's outcomes. `outcomes = delivered + hardBounces + softBounces`; nothing is judged below
 * `minSample` outcomes. A rate *above* its threshold pauses (equal does not). When both rates are over, the
 * reason is `complaint_rate`: SES's complaint level is the stricter one and the harder to recover from.
 */
export function judgeCampaign(counts: OutcomeCounts, g: Guardrails): GuardrailVerdict {
  const outcomes = counts.delivered + counts.hardBounces + counts.softBounces;
  if (outcomes < g.minSample || outcomes <= 0) return { pause: false };
  const hardBounceRate = counts.hardBounces / outcomes;
  const complaintRate = counts.complaints / outcomes;
  const base = {
    hardBounceRate,
    complaintRate,
    outcomes,
    hardBounces: counts.hardBounces,
    complaints: counts.complaints,
    delivered: counts.delivered,
    minSample: g.minSample,
  };
  if (complaintRate > g.maxComplaintRate)
    return { pause: true, reason: 'complaint_rate', details: { ...base, threshold: g.maxComplaintRate } };
  if (hardBounceRate > g.maxHardBounceRate)
    return { pause: true, reason: 'bounce_rate', details: { ...base, threshold: g.maxHardBounceRate } };
  return { pause: false };
}

/**
 * The rates as SES computes them for its review: per email sent. Null when nothing was sent (a rate of nothing
 * is not 0).
 */
export function sesRates(f: { sent: number; hardBounces: number; complaints: number }): {
  hardBounceRate: number | null;
  complaintRate: number | null;
} {
  if (f.sent <= 0) return { hardBounceRate: null, complaintRate: null };
  return { hardBounceRate: f.hardBounces / f.sent, complaintRate: f.complaints / f.sent };
}
