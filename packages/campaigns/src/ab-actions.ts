/**
 * `POST /campaigns/{id}/winner`: choosing an A/B test's winner by hand (docs/guides/campaigns.md, A/B tests), now by
 * the metric or a specific variant, instead of waiting for `ab_decide_at`.
 *
 * @module
 */
import type { Logger } from '@mailroom/platform/logger';
import { AppError, ErrorCode, notFound, validationError } from '@mailroom/platform/errors';
import { relayWebhookDeliveries, scheduleCampaignJob } from '@mailroom/queues/enqueue';
import { getCampaign, type CampaignRow } from './queries/campaigns';
import type { CampaignActionDeps } from './lifecycle';
import { refuseTestKeyOnLive } from './rules';
import { decideWinner } from './ab-decide';
import type { Caller } from './recovery';

/**
 * Records the winner of a campaign's A/B test now: `variant` (0-based) when given, else the highest metric rate so
 * far (the figures and p-value are in `abDecision`), announces `campaign.winner`, and wakes the campaign's job, which sends the winner to the
 * rest of the audience once the test group is fanned out. A Redis failure is logged: the reconciler gives a
 * SENDING campaign its job.
 *
 * @throws {@link AppError} 404; 403 for a test key on a live campaign; 422 naming `variant` when there is no such
 *   variant; 409 `INVALID_STATE` for a campaign without an A/B test, one not SENDING or PAUSED in its test, or one
 *   whose winner is already chosen.
 */
export async function pickWinnerNow(
  deps: CampaignActionDeps,
  log: Logger,
  caller: Caller,
  projectId: string,
  id: string,
  variant?: number,
): Promise<CampaignRow> {
  const { db } = deps.database;
  const before = await getCampaign(db, projectId, id);
  if (!before) throw notFound('Campaign');
  refuseTestKeyOnLive(caller, before, 'pick the winner of');
  const count = before.abTest?.variants.length ?? 0;
  if (before.abTest && variant !== undefined && variant >= count) {
    throw validationError([
      { field: 'variant', message: `must be a variant of the campaign: 0 to ${count - 1}`, code: 'too_big' },
    ]);
  }
  const r = await decideWinner(db, projectId, id, { variant, by: 'manual' });
  if (!('campaign' in r)) {
    if (r.reason === 'missing') throw notFound('Campaign');
    if (r.reason === 'no_test') {
      throw new AppError(ErrorCode.INVALID_STATE, 'This campaign has no A/B test: there is no winner to pick', {
        suggestion: 'Give a DRAFT campaign variants and abTest (PATCH /campaigns/{id}) before sending it.',
      });
    }
    const c = r.reason === 'state' ? r.current : before;
    const why =
      c.abWinner !== null
        ? `its winner is already variant ${c.abWinner}`
        : `it is ${c.status}${c.abPhase ? ` (${c.abPhase})` : ''}`;
    throw new AppError(ErrorCode.INVALID_STATE, `Cannot pick the winner of this campaign: ${why}`, {
      suggestion:
        'A winner can be picked once, while the campaign is SENDING or PAUSED in its test (abTest.phase TESTING or WAITING).',
    });
  }
  await relayWebhookDeliveries(deps.queues.webhook, deps.config, r.deliveries, log);
  try {
    await scheduleCampaignJob(deps.queues.campaign, r.campaign, new Date());
  } catch (err) {
    log.warn({ err, campaignId: id }, 'campaign job not woken after the winner was picked; the reconciler will');
  }
  log.info({ campaignId: id, winner: r.campaign.abWinner }, 'campaign A/B winner picked');
  return r.campaign;
}
