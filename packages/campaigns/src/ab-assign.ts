/**
 * Which contacts of an A/B-tested campaign are in its test group, and which variant each gets: a pure function of
 * (campaign id, contact id), so a re-run, a retried batch or a recovered worker assigns every contact as before.
 *
 * The contact's bucket is the first 32 bits of `md5("<campaign id>:<contact id>")` modulo 10,000 (basis points).
 * A test share of `s` percent takes the buckets below `round(s × 100)`; variant `i` of `k` gets the buckets in
 * `[i × t / k, (i + 1) × t / k)` of that range, so the test group is split evenly and every variant's group is an
 * independent random sample of the audience (docs/decisions/0130-campaign-ab-tests.md). The fan-out computes the
 * same in SQL ({@link abBucketSql}), one statement per batch; this module is its reference and is unit-tested
 * against it.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { sql, type SQL } from 'drizzle-orm';

/** Buckets of the hash: a test share is counted in basis points of the audience. */
export const AB_BUCKETS = 10_000;

/** The contact's bucket (0–9,999) in campaign `campaignId`. */
export function abBucket(campaignId: string, contactId: string): number {
  const hex = createHash('md5').update(`${campaignId.toLowerCase()}:${contactId.toLowerCase()}`).digest('hex');
  return parseInt(hex.slice(0, 8), 16) % AB_BUCKETS;
}

/** The buckets (out of {@link AB_BUCKETS}) a test share of `percent` takes: `round(percent × 100)`. */
export function testBuckets(percent: number): number {
  return Math.max(0, Math.min(AB_BUCKETS, Math.round(percent * 100)));
}

/**
 * The variant a bucket gets, or `null` when the bucket is not in the test group.
 *
 * @param bucket - 0–9,999 ({@link abBucket}).
 * @param percent - the test share (1–100).
 * @param variants - how many variants (2–5).
 */
export function variantOfBucket(bucket: number, percent: number, variants: number): number | null {
  const t = testBuckets(percent);
  if (bucket >= t) return null;
  return Math.floor((bucket * variants) / t);
}

/** The variant contact `contactId` gets in campaign `campaignId`'s test, or `null` when it is in the rest. */
export function assignVariant(campaignId: string, contactId: string, percent: number, variants: number): number | null {
  return variantOfBucket(abBucket(campaignId, contactId), percent, variants);
}

/** {@link abBucket} in SQL, over a campaign id literal and a contact id column such as `c.id`. */
export function abBucketSql(campaignId: string, contactId: SQL): SQL {
  return sql`((('x' || left(md5(${campaignId.toLowerCase()} || ':' || ${contactId}::text), 8))::bit(32)::bigint) % ${AB_BUCKETS})`;
}

/**
 * The fan-out's selection and variant for one phase of the test, as SQL over `contacts` aliased `c`:
 * the test group with its assigned variants, or the rest of the audience with the winner.
 */
export function abFanoutSql(
  campaignId: string,
  percent: number,
  variants: number,
  phase: { winner: number } | 'test',
): { where: SQL; variant: SQL } {
  const bucket = abBucketSql(campaignId, sql.raw('c.id'));
  const t = testBuckets(percent);
  if (phase === 'test')
    return { where: sql`${bucket} < ${t}`, variant: sql`(${bucket} * ${variants} / ${t})::smallint` };
  return { where: sql`${bucket} >= ${t}`, variant: sql`${phase.winner}::smallint` };
}
