/**
 * The statistics of a campaign's A/B test: each variant's conversion rate, the two-proportion z-test between the
 * two best, and the choice of the winner. Pure functions, no I/O.
 *
 * The test is the pooled two-proportion z-test: with conversions `x₁, x₂` out of `n₁, n₂` emails sent,
 * `p̂ = (x₁ + x₂) / (n₁ + n₂)`, `z = (x₁/n₁ − x₂/n₂) / √(p̂ (1 − p̂) (1/n₁ + 1/n₂))`, and the two-sided p-value is
 * `2 (1 − Φ(|z|)) = erfc(|z| / √2)`.
 *
 * @module
 */

/** The significance level under which a difference is reported as beyond noise. */
export const SIGNIFICANCE = 0.05;

/** One variant's figures: emails sent and conversions (opens, clicks or events, per the metric). */
export interface VariantCount {
  variant: number;
  sent: number;
  conversions: number;
}

/** The result of a z-test. */
export interface ZTest {
  z: number;
  /** Two-sided p-value, 0–1. */
  pValue: number;
}

/**
 * The complementary error function, erfc(x), by the Chebyshev fit of Numerical Recipes (`erfcc`): fractional error
 * below 1.2 × 10⁻⁷ everywhere.
 */
export function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t *
                      (-0.18628806 +
                        t *
                          (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

/** The standard normal cumulative distribution function Φ(x). */
export function normalCdf(x: number): number {
  return 0.5 * erfc(-x / Math.SQRT2);
}

/**
 * The pooled two-proportion z-test of `a` against `b`.
 *
 * @returns `z` (positive when `a`'s rate is higher) and the two-sided p-value; `null` when it is undefined: a group
 *   with nothing sent, or no variance at all (both rates 0 or both 1).
 */
export function twoProportionZTest(
  a: Pick<VariantCount, 'sent' | 'conversions'>,
  b: Pick<VariantCount, 'sent' | 'conversions'>,
): ZTest | null {
  if (a.sent <= 0 || b.sent <= 0) return null;
  const pooled = (a.conversions + b.conversions) / (a.sent + b.sent);
  const se = Math.sqrt(pooled * (1 - pooled) * (1 / a.sent + 1 / b.sent));
  if (!(se > 0)) return null;
  const z = (a.conversions / a.sent - b.conversions / b.sent) / se;
  return { z, pValue: Math.min(1, erfc(Math.abs(z) / Math.SQRT2)) };
}

/** A variant's rate: conversions per email sent (0–1), 0 before any is sent. */
export function conversionRate(v: Pick<VariantCount, 'sent' | 'conversions'>): number {
  return v.sent > 0 ? v.conversions / v.sent : 0;
}

/** What {@link chooseWinner} decides. */
export interface WinnerChoice {
  winner: number;
  /** The variants with their rates, in variant order. */
  variants: (VariantCount & { rate: number })[];
  /** The z-test between the best and the runner-up (`null` when undefined or with one variant). */
  test: ZTest | null;
  /** True when the p-value is ≥ {@link SIGNIFICANCE} or unknown: the higher rate was picked, but it may be noise. */
  withinNoise: boolean;
  /** A sentence for people, set when the difference is within noise. */
  note: string | null;
}

/**
 * Picks the variant with the highest rate (ties go to the lowest variant index) and tests it against the
 * runner-up.
 *
 * @param counts - every variant's figures (at least one).
 * @throws `Error` when `counts` is empty.
 */
export function chooseWinner(counts: readonly VariantCount[]): WinnerChoice {
  if (counts.length === 0) throw new Error('chooseWinner needs at least one variant');
  const variants = [...counts].sort((a, b) => a.variant - b.variant).map((v) => ({ ...v, rate: conversionRate(v) }));
  const ranked = [...variants].sort((a, b) => b.rate - a.rate || a.variant - b.variant);
  const [best, second] = ranked;
  const test = second ? twoProportionZTest(best, second) : null;
  const withinNoise = !test || test.pValue >= SIGNIFICANCE;
  const note = !withinNoise
    ? null
    : !test
      ? 'Not enough data for a significance test; the variant with the higher rate (or the first, on a tie) was picked.'
      : `The difference between the top two is within noise (p = ${test.pValue.toFixed(3)} ≥ ${SIGNIFICANCE}); the variant with the higher rate (or the first, on a tie) was picked.`;
  return { winner: best.variant, variants, test, withinNoise, note };
}
