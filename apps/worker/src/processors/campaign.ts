/**
 * The `campaign` job: one per started or scheduled campaign, re-delayed by itself between rounds.
 *
 * 1. SCHEDULED and not yet due: sleep until `scheduledAt` (a reschedule moves the job or is seen on waking).
 *    Due: check the audience still exists (a deleted segment fails the campaign with a reason), then SENDING.
 * 2. SENDING: fan out the audience in keyset batches (`fanoutBatch`: subscribed contacts only, bulk insert,
 *    unique per campaign and contact, cursor committed with the rows), and feed the send queue at the campaign
 *    lane, keeping only the campaign's fair share of that lane in Redis (campaign-lane.ts; at most
 *    `CAMPAIGN_QUEUE_WINDOW`).
 * 3. When the audience is exhausted and every email is final: SENT. Otherwise come back in `CAMPAIGN_TICK_MS`.
 * 4. CANCELLED: cancel the emails the API's cancel did not reach (rows never handed to the send queue).
 * 5. PAUSED (a guardrail or the SES quota): neither fan out nor feed; wait delayed until the resume wakes the job.
 *
 * A crash anywhere is safe: batches are atomic and idempotent, enqueueing is idempotent (`jobId` = email id),
 * and the reconciler re-creates a lost campaign job.
 *
 * @module
 */
import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import { sql, type SQL } from 'drizzle-orm';
import {
  CampaignJobPayload,
  sendJobOptions,
  SendPriority,
  type SendJobPayload,
  type WebhookJobPayload,
  announceWebhookDeliveries,
} from '@mailroom/queues/queues';
import { dataValidator } from '@mailroom/platform/validation';
import { effectiveSendRate } from '@mailroom/mail/ses-account';
import { parseSegmentFilter } from '@mailroom/audiences/segments';
import { type Config } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import {
  advanceEnqueueCursor,
  completeCampaign,
  failCampaign,
  fanoutBatch,
  loadCampaign,
  nextCampaignEmails,
  startScheduledCampaign,
  sweepCancelledCampaign,
  type CampaignRow,
} from '@mailroom/db/queries/campaigns';
import { campaignLaneShare } from '@mailroom/db/queries/send-quota';
import { compileFilter } from '@mailroom/audiences/queries/segment-filter';
import { getSegment, segmentPredicate } from '@mailroom/audiences/queries/segments';
import { withWebhookEvents } from '@mailroom/db/queries/webhooks';
import { type Database, type DbOrTx } from '@mailroom/db/client';
import { campaignLaneDepth, campaignWindow } from './campaign-lane';
import { freeRetriedJobIds } from './campaign-retry';

const validatePayload = dataValidator(CampaignJobPayload);

/** How long one run fans out before it yields (ms); the job comes back after `CAMPAIGN_TICK_MS`. */
const FANOUT_SLICE_MS = 10_000;

/** Emails cancelled per statement when sweeping a cancelled campaign. */
const SWEEP_BATCH = 10_000;

/** What a finished job reports. */
export type CampaignJobResult = { outcome: 'sent' | 'failed' | 'skipped'; reason?: string; recipients?: number };

/** Dependencies of the processor. */
export interface CampaignProcessorDeps {
  config: Config;
  database: Database;
  sendQueue: Queue<SendJobPayload>;
  /** Producer of campaign.sending / campaign.sent / campaign.failed webhook deliveries. */
  webhookQueue: Queue<WebhookJobPayload>;
  logger: Logger;
  /** The send rate in force (emails/s), which sizes the campaign lane; default `SES_MAX_SEND_RATE`, else 14. */
  sendRate?: () => number;
}

/** The audience predicate over `contacts c`, or the reason the campaign cannot have one. */
async function audienceOf(deps: CampaignProcessorDeps, c: CampaignRow): Promise<SQL | string> {
  const now = (c.startedAt ?? new Date()).getTime();
  if (c.audienceType === 'ALL') return sql`true`;
  if (c.audienceType === 'FILTERED') {
    return compileFilter(parseSegmentFilter(c.audienceFilter, 'audienceFilter'), { projectId: c.projectId, now, alias: 'c' });
  }
  const segment = c.segmentId ? await getSegment(deps.database.db, c.projectId, c.segmentId) : undefined;
  if (!segment) return 'the campaign\'s segment was deleted';
  return segmentPredicate(segment, now, 'c');
}

/** Creates the BullMQ processor function of the `campaign` queue. */
export function createCampaignProcessor(deps: CampaignProcessorDeps) {
  const { config } = deps;
  const { db } = deps.database;

  /**
   * Runs a campaign transition and announces it (`campaign.<event>`, with `test: true` for a test campaign, as
   * its emails' webhooks) in the same transaction when it happened (`move` returned something truthy).
   * @returns what `move` returned.
   */
  const transition = async <T>(c: Pick<CampaignRow, 'projectId' | 'id' | 'test'>, event: string, move: (tx: DbOrTx) => Promise<T>, log: Logger): Promise<T> => {
    const data = { campaignId: c.id, ...(c.test ? { test: true } : {}) };
    const { result, deliveries } = await withWebhookEvents(db, c.projectId, move, (moved) => (moved ? [{ type: `campaign.${event}`, data }] : []));
    await announceWebhookDeliveries(deps.webhookQueue, config, deliveries, log);
    return result;
  };

  const sendRate = deps.sendRate ?? (() => effectiveSendRate(undefined, config.sesMaxSendRate));

  /**
   * Tops up the campaign's window in the send queue: its fair share of the campaign lane (campaign-lane.ts).
   * @returns how many emails were enqueued.
   */
  const feed = async (campaignId: string, projectId: string): Promise<number> => {
    const window = campaignWindow(campaignLaneDepth(sendRate(), config), await campaignLaneShare(db, campaignId, projectId), config.campaignQueueWindow);
    const next = await nextCampaignEmails(db, { id: campaignId }, window);
    if (next.length === 0) return 0;
    for (let i = 0; i < next.length; i += 1000) {
      const chunk = next.slice(i, i + 1000);
      // Emails re-queued by retry-failed: their first try's finished job still holds the id.
      await freeRetriedJobIds(db, deps.sendQueue, campaignId, chunk.map((e) => e.id));
      await deps.sendQueue.addBulk(
        chunk.map((e) => ({ name: 'send', data: { emailId: e.id, projectId }, opts: sendJobOptions(config, e.id, SendPriority.campaign) })),
      );
      await advanceEnqueueCursor(db, campaignId, chunk[chunk.length - 1].contactId);
    }
    return next.length;
  };

  return async (job: Job, token?: string): Promise<CampaignJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid campaign payload: ${JSON.stringify(checked.errors)}`);
    const { campaignId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, campaignId, projectId });
    const later = async (at: number): Promise<never> => {
      await job.moveToDelayed(at, token);
      throw new DelayedError();
    };

    let c = await loadCampaign(db, campaignId);
    if (!c) return { outcome: 'skipped', reason: 'campaign deleted' };
    // The audience predicate, built once per run; a string says why there is none (the campaign then fails).
    let audience: SQL | string | undefined;
    if (c.status === 'SCHEDULED') {
      const due = c.scheduledAt?.getTime() ?? 0;
      if (due > Date.now() + 5) return later(due);
      // Checked before starting, so a campaign whose segment is gone fails from SCHEDULED, never half-sent.
      audience = await audienceOf(deps, c);
      if (typeof audience !== 'string') {
        c = (await transition(c, 'sending', (tx) => startScheduledCampaign(tx, campaignId), log)) ?? (await loadCampaign(db, campaignId));
        if (!c) return { outcome: 'skipped', reason: 'campaign deleted' };
        if (c.status === 'SENDING') log.info('scheduled campaign started');
      }
    }
    // Emails never handed to the send queue are still `queued` rows: close them in bounded batches.
    const sweep = async (): Promise<CampaignJobResult> => {
      let swept = 0;
      for (let n = -1; n !== 0; ) {
        n = await sweepCancelledCampaign(db, campaignId, SWEEP_BATCH);
        swept += n;
        await job.extendLock(token!, config.workerLockMs).catch(() => undefined);
      }
      if (swept > 0) log.info({ swept }, 'cancelled campaign swept');
      return { outcome: 'skipped', reason: 'campaign cancelled' };
    };
    // PAUSED: the job waits delayed (resume promotes it). A resume that committed before this job was delayed
    // found it active and left it alone: look once more and wake it if the campaign is no longer paused.
    const paused = async (): Promise<never> => {
      await job.moveToDelayed(Date.now() + config.campaignPauseRecheckMs, token);
      if ((await loadCampaign(db, campaignId))?.status !== 'PAUSED') await job.promote().catch(() => undefined);
      throw new DelayedError();
    };
    if (c.status === 'CANCELLED') return sweep();
    if (c.status === 'PAUSED') return paused();
    if (c.status !== 'SENDING' && typeof audience !== 'string') return { outcome: 'skipped', reason: `campaign is ${c.status}` };

    if (!c.fanoutDone) {
      audience ??= await audienceOf(deps, c);
      if (typeof audience === 'string') {
        const reason = audience;
        await transition(c, 'failed', (tx) => failCampaign(tx, campaignId, reason), log);
        log.warn({ reason: audience }, 'campaign failed: no audience');
        return { outcome: 'failed', reason: audience };
      }
      const until = Date.now() + FANOUT_SLICE_MS;
      let inserted = 0;
      for (;;) {
        const batch = await fanoutBatch(db, campaignId, audience, config.campaignBatchSize);
        inserted += batch.inserted;
        await feed(campaignId, projectId);
        if (!batch.applied || batch.done || Date.now() > until) break;
        await job.extendLock(token!, config.workerLockMs).catch(() => undefined);
      }
      log.debug({ inserted }, 'campaign fan-out round');
    }
    await feed(campaignId, projectId);
    if (await transition(c, 'sent', (tx) => completeCampaign(tx, campaignId), log)) {
      const done = await loadCampaign(db, campaignId);
      log.info({ recipients: done?.recipients }, 'campaign sent');
      return { outcome: 'sent', recipients: done?.recipients ?? 0 };
    }
    const current = await loadCampaign(db, campaignId);
    if (current?.status === 'CANCELLED') return sweep();
    if (current?.status === 'PAUSED') return paused();
    if (!current || current.status !== 'SENDING') return { outcome: 'skipped', reason: `campaign is ${current?.status ?? 'deleted'}` };
    return later(Date.now() + (current.fanoutDone ? config.campaignTickMs : 0));
  };
}
