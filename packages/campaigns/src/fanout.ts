/**
 * One run of a campaign's job: one per started or scheduled campaign, re-delayed by itself between rounds.
 *
 * 1. SCHEDULED and not yet due: sleep until `scheduledAt` (a reschedule moves the job or is seen on waking).
 *    Due: check the audience still exists (a deleted segment fails the campaign with a reason), then SENDING.
 * 2. SENDING: fan out the audience in keyset batches (`fanoutBatch`: subscribed contacts only, bulk insert,
 *    unique per campaign and contact, cursor committed with the rows), and feed the send queue at the campaign
 *    lane, keeping only the campaign's fair share of that lane in Redis (lane.ts; at most `CAMPAIGN_QUEUE_WINDOW`).
 *    With an A/B test (ab-decide.ts), the fan-out first takes the test group only, each contact with its variant
 *    (TESTING); once those emails are final the job sleeps until `ab_decide_at` (WAITING), chooses the winner, and
 *    fans out the rest of the audience with it (WINNER), the cursors started again.
 * 3. When the audience is exhausted and every email is final (and an A/B test is in WINNER): SENT. Otherwise come
 *    back in `CAMPAIGN_TICK_MS`.
 * 4. CANCELLED: cancel the emails the API's cancel did not reach (rows never handed to the send queue).
 * 5. PAUSED (a guardrail or the SES quota): neither fan out nor feed; wait delayed until the resume wakes the job.
 *
 * A crash anywhere is safe: batches are atomic and idempotent, enqueueing is idempotent (`jobId` = email id),
 * and the reconciler re-creates a lost campaign job. How the job waits is the queue's business
 * ({@link CampaignJobControl}; the worker maps it onto BullMQ).
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { SQL } from 'drizzle-orm';
import { SendPriority, type SendJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries, enqueueSendJobs } from '@mailroom/queues/enqueue';
import { effectiveSendRate } from '@mailroom/mail/ses-account';
import type { MailConfig } from '@mailroom/mail/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { Logger } from '@mailroom/platform/logger';
import { campaignLaneShare } from '@mailroom/db/queries/send-quota';
import { withWebhookEvents } from '@mailroom/db/queries/webhooks';
import type { DbOrTx } from '@mailroom/db/client';
import {
  completeCampaign,
  failCampaign,
  loadCampaign,
  startScheduledCampaign,
  sweepCancelledCampaign,
  type CampaignRow,
} from './queries/campaigns';
import { advanceEnqueueCursor, fanoutBatch, nextCampaignEmails } from './queries/campaign-fanout';
import { audiencePredicate } from '@mailroom/audiences/queries/audience';
import { campaignAudience } from './rules';
import { campaignJobSize, campaignLaneDepth, campaignWindow } from './lane';
import { freeRetriedJobIds } from './retry-jobs';
import { abSelection, advanceAbTest } from './ab-decide';

/** How long one run fans out before it yields (ms); the job comes back after `CAMPAIGN_TICK_MS`. */
const FANOUT_SLICE_MS = 10_000;

/** Emails cancelled per statement when sweeping a cancelled campaign. */
const SWEEP_BATCH = 10_000;

/** What a finished run reports. */
export type CampaignJobResult = { outcome: 'sent' | 'failed' | 'skipped'; reason?: string; recipients?: number };

/** Dependencies of a run. */
export interface CampaignJobDeps {
  config: AudienceConfig & QueueConfig & Pick<MailConfig, 'sesMaxSendRate'>;
  database: { db: DbOrTx };
  sendQueue: Queue<SendJobPayload>;
  /** Producer of campaign.sending / campaign.sent / campaign.failed webhook deliveries. */
  webhookQueue: Queue<WebhookJobPayload>;
  /** The send rate in force (emails/s), which sizes the campaign lane; default `SES_MAX_SEND_RATE`, else 14. */
  sendRate?: () => number;
}

/** How a run waits, as the queue does it. */
export interface CampaignJobControl {
  /** Moves the job to run again at `at` (ms since epoch). */
  delay(at: number): Promise<void>;
  /** Runs a delayed job now (errors ignored). */
  promote(): Promise<void>;
  /** Ends this run after {@link delay}, leaving the job delayed; never returns. */
  stop(): never;
  /** Keeps the job's lock during a long fan-out (errors ignored). */
  keepAlive(): Promise<void>;
}

/**
 * The audience predicate of a campaign over `contacts c` (restricted to its topic's subscribers when it has one),
 * or the reason it has none (its segment was deleted).
 * "Now" for a filter's time windows is the campaign's start, so every batch of the fan-out reads one audience.
 */
export async function campaignAudiencePredicate(db: DbOrTx, c: CampaignRow): Promise<SQL | string> {
  const audience = campaignAudience(c);
  const scope = {
    now: (c.startedAt ?? new Date()).getTime(),
    alias: 'c',
    ...(c.topicId ? { topicId: c.topicId } : {}),
  };
  const predicate = audience && (await audiencePredicate(db, c.projectId, audience, scope));
  return predicate ?? "the campaign's segment was deleted";
}

/**
 * Runs one round of a campaign's job (see the module comment).
 *
 * @returns how the job ended; a run that comes back later ends by `control.stop()` instead.
 */
export async function runCampaignJob(
  deps: CampaignJobDeps,
  control: CampaignJobControl,
  job: { campaignId: string; projectId: string },
  log: Logger,
): Promise<CampaignJobResult> {
  const { config } = deps;
  const { db } = deps.database;
  const { campaignId, projectId } = job;
  const sendRate = deps.sendRate ?? (() => effectiveSendRate(undefined, config.sesMaxSendRate));

  /**
   * Runs a campaign transition and announces it (`campaign.<event>`, with `test: true` for a test campaign, as
   * its emails' webhooks) in the same transaction when it happened (`move` returned something truthy).
   * @returns what `move` returned.
   */
  const transition = async <T>(
    c: Pick<CampaignRow, 'test'>,
    event: string,
    move: (tx: DbOrTx) => Promise<T>,
  ): Promise<T> => {
    const data = { campaignId, ...(c.test ? { test: true } : {}) };
    const { result, deliveries } = await withWebhookEvents(db, projectId, move, (moved) =>
      moved ? [{ type: `campaign.${event}`, data }] : [],
    );
    await relayWebhookDeliveries(deps.webhookQueue, config, deliveries, log);
    return result;
  };

  /** Tops up the campaign's window in the send queue: its fair share of the campaign lane (lane.ts). */
  const feed = async (): Promise<number> => {
    const window = campaignWindow(
      campaignLaneDepth(sendRate(), config),
      await campaignLaneShare(db, campaignId, projectId),
      config.campaignQueueWindow,
    );
    const next = await nextCampaignEmails(db, { id: campaignId }, window);
    if (next.length === 0) return 0;
    // Several emails per send job at a high rate (lane.ts `campaignJobSize`; one per job below 40/s).
    const perJob = campaignJobSize(sendRate(), config.campaignJobEmails);
    const chunkSize = Math.max(perJob, Math.floor(1000 / perJob) * perJob);
    for (let i = 0; i < next.length; i += chunkSize) {
      const chunk = next.slice(i, i + chunkSize);
      const ids = chunk.map((e) => e.id);
      // Emails re-queued by retry-failed: their first try's finished job still holds the id.
      await freeRetriedJobIds(db, deps.sendQueue, campaignId, ids);
      const jobs = [];
      for (let j = 0; j < ids.length; j += perJob) {
        const emailIds = ids.slice(j, j + perJob);
        jobs.push({ emailId: emailIds[0], emailIds, projectId, priority: SendPriority.campaign });
      }
      await enqueueSendJobs(deps.sendQueue, config, jobs);
      await advanceEnqueueCursor(db, campaignId, chunk[chunk.length - 1].contactId);
    }
    return next.length;
  };

  const later = async (at: number): Promise<never> => {
    await control.delay(at);
    return control.stop();
  };

  let c = await loadCampaign(db, campaignId);
  if (!c) return { outcome: 'skipped', reason: 'campaign deleted' };
  // The audience predicate, built once per run; a string says why there is none (the campaign then fails).
  let audience: SQL | string | undefined;
  if (c.status === 'SCHEDULED') {
    const due = c.scheduledAt?.getTime() ?? 0;
    if (due > Date.now() + 5) return later(due);
    // Checked before starting, so a campaign whose segment is gone fails from SCHEDULED, never half-sent.
    audience = await campaignAudiencePredicate(db, c);
    if (typeof audience !== 'string') {
      c =
        (await transition(c, 'sending', (tx) => startScheduledCampaign(tx, campaignId))) ??
        (await loadCampaign(db, campaignId));
      if (!c) return { outcome: 'skipped', reason: 'campaign deleted' };
      if (c.status === 'SENDING') log.info('scheduled campaign started');
    }
  }
  // Emails never handed to the send queue are still `queued` rows: close them in bounded batches.
  const sweep = async (): Promise<CampaignJobResult> => {
    let swept = 0;
    for (let n = -1; n !== 0;) {
      n = await sweepCancelledCampaign(db, campaignId, SWEEP_BATCH);
      swept += n;
      await control.keepAlive();
    }
    if (swept > 0) log.info({ swept }, 'cancelled campaign swept');
    return { outcome: 'skipped', reason: 'campaign cancelled' };
  };
  // PAUSED: the job waits delayed (resume promotes it). A resume that committed before this job was delayed
  // found it active and left it alone: look once more and wake it if the campaign is no longer paused.
  const paused = async (): Promise<never> => {
    await control.delay(Date.now() + config.campaignPauseRecheckMs);
    if ((await loadCampaign(db, campaignId))?.status !== 'PAUSED') await control.promote();
    return control.stop();
  };
  if (c.status === 'CANCELLED') return sweep();
  if (c.status === 'PAUSED') return paused();
  if (c.status !== 'SENDING' && typeof audience !== 'string')
    return { outcome: 'skipped', reason: `campaign is ${c.status}` };

  if (!c.fanoutDone) {
    audience ??= await campaignAudiencePredicate(db, c);
    if (typeof audience === 'string') {
      const reason = audience;
      await transition(c, 'failed', (tx) => failCampaign(tx, campaignId, reason));
      log.warn({ reason: audience }, 'campaign failed: no audience');
      return { outcome: 'failed', reason: audience };
    }
    const until = Date.now() + FANOUT_SLICE_MS;
    const selection = abSelection(c);
    let inserted = 0;
    for (;;) {
      const batch = await fanoutBatch(db, campaignId, audience, config.campaignBatchSize, selection);
      inserted += batch.inserted;
      await feed();
      if (!batch.applied || batch.done || Date.now() > until) break;
      await control.keepAlive();
    }
    log.debug({ inserted }, 'campaign fan-out round');
  }
  await feed();
  if (c.abTest) {
    // The A/B test's moves (ab-decide.ts): waiting for the decision, deciding, starting the remainder.
    const next = await advanceAbTest(db, campaignId, (deliveries) =>
      relayWebhookDeliveries(deps.webhookQueue, config, deliveries, log),
    );
    if (next) {
      if (next.moved) log.info({ phase: next.moved, at: new Date(next.at).toISOString() }, 'campaign A/B test moved');
      return later(next.at);
    }
  }
  if (await transition(c, 'sent', (tx) => completeCampaign(tx, campaignId))) {
    const done = await loadCampaign(db, campaignId);
    log.info({ recipients: done?.recipients }, 'campaign sent');
    return { outcome: 'sent', recipients: done?.recipients ?? 0 };
  }
  const current = await loadCampaign(db, campaignId);
  if (current?.status === 'CANCELLED') return sweep();
  if (current?.status === 'PAUSED') return paused();
  if (!current || current.status !== 'SENDING')
    return { outcome: 'skipped', reason: `campaign is ${current?.status ?? 'deleted'}` };
  return later(Date.now() + (current.fanoutDone ? config.campaignTickMs : 0));
}
