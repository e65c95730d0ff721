/**
 * The A/B test of a campaign as it runs (docs/guides/campaigns.md, A/B tests): which contacts each phase of the
 * fan-out takes, the moves the campaign job makes between phases, the choice of the winner (automatic when
 * `ab_decide_at` has come, or by hand), and the per-variant figures.
 *
 * Everything the test needs to carry on is in Postgres (phase, decision time, winner, cursors), so a worker that
 * dies anywhere is replaced by one that reads where it was: the campaign job sleeps until `ab_decide_at`, and the
 * reconciler gives a SENDING campaign a job again if Redis lost it.
 *
 * @module
 */
import type { AbDecision, AbTestSettings } from '@mailroom/db/schema/campaigns';
import type { DbOrTx } from '@mailroom/db/client';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import {
  countByVariant,
  enterWaiting,
  lockForDecision,
  recordWinner,
  startRemainder,
  type VariantCounts,
} from './queries/campaign-ab';
import { loadCampaign, type CampaignRow } from './queries/campaigns';
import { type FanoutSelection } from './queries/campaign-fanout';
import { abFanoutSql } from './ab-assign';
import { chooseWinner } from './ab-stats';

/**
 * What a phase of the test fans out: the test group with its variants (TESTING), the rest with the winner (WINNER),
 * nothing else. `undefined` for a campaign without a test (the whole audience, no variant).
 */
export function abSelection(
  c: Pick<CampaignRow, 'id' | 'abTest' | 'abPhase' | 'abWinner'>,
): (FanoutSelection & { phase: string }) | undefined {
  const t = c.abTest;
  if (!t) return undefined;
  if (c.abPhase === 'WINNER' && c.abWinner !== null)
    return { ...abFanoutSql(c.id, t.testShare, t.variants.length, { winner: c.abWinner }), phase: 'WINNER' };
  return { ...abFanoutSql(c.id, t.testShare, t.variants.length, 'test'), phase: 'TESTING' };
}

/** Every variant's counts, zeros for a variant without emails. */
function allVariants(t: AbTestSettings, counts: VariantCounts[]): VariantCounts[] {
  return t.variants.map(
    (_, i) =>
      counts.find((c) => c.variant === i) ?? {
        variant: i,
        recipients: 0,
        sent: 0,
        delivered: 0,
        opened: 0,
        clicked: 0,
        conversions: 0,
      },
  );
}

/** Why a decision was not made. */
export type DecisionMiss =
  | { reason: 'missing' }
  | { reason: 'no_test' }
  | { reason: 'state'; current: CampaignRow }
  | { reason: 'not_due'; at: Date };

/**
 * Chooses and records the winner of a campaign's test: the variant with the highest metric rate among the emails
 * sent so far (ties to the first), with the z-test of the top two, or the `variant` given. Once only: the row is
 * locked, and a campaign that already has a winner, is not SENDING or PAUSED, or is past TESTING/WAITING is refused.
 *
 * @param choice - `variant` to pick a specific one (checked against the count by the caller); `by: 'auto'` decides
 *   only once `ab_decide_at` has come (in WAITING).
 * @returns the campaign with its decision and the `campaign.winner` webhook deliveries to enqueue, or why not.
 */
export async function decideWinner(
  db: DbOrTx,
  projectId: string,
  id: string,
  choice: { variant?: number; by: 'auto' | 'manual' },
): Promise<{ campaign: CampaignRow; deliveries: WebhookDeliveryRef[] } | DecisionMiss> {
  return db.transaction(async (tx) => {
    const c = await lockForDecision(tx, projectId, id);
    if (!c) return { reason: 'missing' as const };
    const t = c.abTest;
    if (!t) return { reason: 'no_test' as const };
    if (
      !['SENDING', 'PAUSED'].includes(c.status) ||
      !(c.abPhase === 'TESTING' || c.abPhase === 'WAITING') ||
      c.abWinner !== null
    )
      return { reason: 'state' as const, current: c };
    if (choice.by === 'auto' && (c.abPhase !== 'WAITING' || !c.abDecideAt || c.abDecideAt.getTime() > Date.now())) {
      return { reason: 'not_due' as const, at: c.abDecideAt ?? new Date() };
    }
    const now = new Date();
    const counts = allVariants(t, await countByVariant(tx, c, t.metric, t.event, now));
    const chosen = chooseWinner(counts.map((v) => ({ variant: v.variant, sent: v.sent, conversions: v.conversions })));
    const winner = choice.variant ?? chosen.winner;
    const decision: AbDecision = {
      winner,
      by: choice.by,
      basis: choice.variant === undefined ? 'metric' : 'choice',
      decidedAt: now.toISOString(),
      metric: t.metric,
      event: t.event,
      variants: chosen.variants.map((v) => ({
        variant: v.variant,
        sent: v.sent,
        conversions: v.conversions,
        rate: round(v.rate),
      })),
      pValue: chosen.test ? round(chosen.test.pValue) : null,
      z: chosen.test ? round(chosen.test.z) : null,
      withinNoise: chosen.withinNoise,
      note:
        choice.variant === undefined
          ? chosen.note
          : `Variant ${winner} was picked by hand.${chosen.note ? ` ${chosen.note.replace('was picked', 'would have been picked')}` : ''}`,
    };
    const done = await recordWinner(tx, id, decision);
    if (!done) return { reason: 'state' as const, current: c };
    // Announced in the same transaction: the event exists if and only if the decision committed.
    const data = {
      campaignId: id,
      winner,
      by: decision.by,
      basis: decision.basis,
      metric: t.metric,
      pValue: decision.pValue,
      withinNoise: decision.withinNoise,
      ...(c.test ? { test: true } : {}),
    };
    const deliveries = await recordWebhookEvents(tx, projectId, [{ type: 'campaign.winner', data }]);
    return { campaign: done, deliveries };
  });
}

const round = (n: number) => Math.round(n * 1e6) / 1e6;

/**
 * The campaign job's step of the test, after its fan-out and feed of this run: TESTING → WAITING when the test
 * group is out and final; the automatic decision once `ab_decide_at` has come; → WINNER once there is a winner and
 * the test group is fanned out and handed over.
 *
 * @param announce - enqueues the `campaign.winner` deliveries of an automatic decision.
 * @returns when the job should run next (ms since epoch; now to go straight on with the remainder), or
 *   `undefined` to carry on as a campaign without a test (its usual tick, or completion).
 */
export async function advanceAbTest(
  db: DbOrTx,
  id: string,
  announce: (deliveries: WebhookDeliveryRef[]) => Promise<void>,
): Promise<{ at: number; moved?: string } | undefined> {
  let c = await loadCampaign(db, id);
  if (!c?.abTest || c.status !== 'SENDING' || !(c.abPhase === 'TESTING' || c.abPhase === 'WAITING')) return undefined;
  if (c.abWinner === null) {
    if (c.abPhase === 'TESTING') {
      const waiting = await enterWaiting(db, id, c.abTest.waitSeconds);
      if (!waiting) return undefined;
      c = waiting;
    }
    const at = c.abDecideAt?.getTime() ?? Date.now();
    if (at > Date.now()) return { at, moved: c.abPhase === 'WAITING' ? 'waiting' : undefined };
    const decided = await decideWinner(db, c.projectId, id, { by: 'auto' });
    if (!('campaign' in decided)) return undefined;
    await announce(decided.deliveries);
  }
  return (await startRemainder(db, id)) ? { at: Date.now(), moved: 'winner' } : undefined;
}

/** One variant as `GET /campaigns/{id}/variants` shows it. */
export interface VariantStats extends VariantCounts {
  name: string;
  subject: string;
  templateId: string | null;
  /** The metric's conversions per email sent (0–1), over every email of the variant so far. */
  rate: number;
  winner: boolean;
}

/** Every variant's live figures (the decision's figures are in `abDecision`). */
export async function variantStats(db: DbOrTx, c: CampaignRow): Promise<VariantStats[]> {
  const t = c.abTest;
  if (!t) return [];
  const counts = allVariants(t, await countByVariant(db, c, t.metric, t.event, new Date()));
  return counts.map((v) => ({
    ...v,
    name: String.fromCharCode(65 + v.variant),
    subject: t.variants[v.variant].subject ?? c.subject,
    templateId: t.variants[v.variant].templateId,
    rate: v.sent > 0 ? round(v.conversions / v.sent) : 0,
    winner: c.abWinner === v.variant,
  }));
}
