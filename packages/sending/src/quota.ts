/**
 * The quota check: on each pass (the worker runs one every `SES_QUOTA_CHECK_MS`), compares the SES account's 24-hour count (the last reading plus
 * this deployment's sends since, see `ses/account.ts`) with its quota. With several delivery connections there is
 * one pass per connection, each over the campaigns bound to it (`QuotaDeps.belongs`).
 *
 * - At `max24HourSend × (1 − SES_QUOTA_RESERVE)` sent, every SENDING live campaign pauses with the reason `quota`
 *   (its timeline entry and `campaign.paused` webhook carry the figures). Its queued emails stay queued; the
 *   last `SES_QUOTA_RESERVE` of the quota is left to transactional and workflow mail, which never pause.
 * - Once the count is below `max24HourSend × (1 − 2 × SES_QUOTA_RESERVE)` (hysteresis: the 24-hour window frees
 *   a few emails at a time), campaigns paused for `quota` resume where they stopped: their job is scheduled and
 *   their emails waiting in the queue are woken. A campaign paused for its bounce or complaint rate is never
 *   resumed here.
 *
 * The line is also held at the send: a live campaign email goes out only while there is room before the reserve
 * (`ses/quota-guard.ts`); the first one refused runs this pass at once ({@link checkQuotaOnce}), so a campaign
 * pauses at the line, not at the next check (with one worker process not one email past it; with several, at most
 * what the others have in flight). Test campaigns do not use SES and are left alone. The worker runs {@link checkQuotaOnce} as its
 * `quota` maintenance task: one pass per interval across all processes.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import { type CampaignJobPayload, type SendJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries, promoteDelayedJobs, scheduleCampaignJob } from '@mailroom/queues/enqueue';
import { quotaState } from '@mailroom/mail/ses-account';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { SendingConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';
import {
  campaignEmailsInQueue,
  pauseCampaign,
  pausedCampaigns,
  resumeCampaign,
} from '@mailroom/campaigns/queries/campaign-pause';
import { sendingLiveCampaigns } from '@mailroom/db/queries/send-quota';
import { type Database } from '@mailroom/db/client';
import type { AccountWatcher } from './ses/account';

/** Campaigns paused or resumed per pass at most (the next pass takes the rest). */
const PER_PASS = 500;

/** Dependencies of the watcher. */
export interface QuotaDeps {
  config: Pick<SendingConfig, 'sesQuotaReserve' | 'sesQuotaCheckMs'> &
    Pick<AudienceConfig, 'campaignQueueWindow'> &
    Pick<QueueConfig, 'webhookRetryScheduleMs'>;
  database: Database;
  account: AccountWatcher;
  /**
   * With several delivery connections, one pass per connection reads that connection's account: whether a
   * campaign's mail goes through it (its binding). Omitted: every campaign is the pass's.
   */
  belongs?: (campaign: { id: string; projectId: string }) => Promise<boolean>;
  sendQueue: Queue<SendJobPayload>;
  campaignQueue: Queue<CampaignJobPayload>;
  webhookQueue: Queue<WebhookJobPayload>;
  logger: Logger;
}

/** What one pass saw and did. */
export interface QuotaPass {
  sentLast24Hours?: number;
  max24HourSend?: number | 'unlimited';
  pauseAt?: number;
  paused: number;
  resumed: number;
  skipped?: string;
}

/**
 * One pass (see the module notes): pauses every SENDING live campaign when the quota is nearly spent, or resumes
 * the campaigns paused for `quota` once it is free again, at most 500 of each per pass (the next pass takes the rest).
 *
 * @returns what the pass saw (the figures) and did; `skipped` before the account's first reading.
 * @throws the database's error (the maintenance job fails and the next tick retries); a resumed campaign that
 *   cannot be woken (Redis) is only logged.
 */
export async function checkQuotaOnce(deps: QuotaDeps): Promise<QuotaPass> {
  const { config, logger } = deps;
  const { db } = deps.database;
  const account = await deps.account.estimate();
  if (!account) return { paused: 0, resumed: 0, skipped: 'SES account not read yet' };
  const state = quotaState(account, config.sesQuotaReserve);
  const figures = {
    max24HourSend: Number.isFinite(account.max24HourSend) ? account.max24HourSend : ('unlimited' as const),
    sentLast24Hours: account.sentLast24Hours,
    pauseAt: state.pauseAt,
  };
  let paused = 0;
  let resumed = 0;
  if (state.spent) {
    const details = {
      ...figures,
      reserve: config.sesQuotaReserve,
      sentSinceRead: account.sentSinceRead,
      readAt: account.readAt.toISOString(),
    };
    for (const c of await sendingLiveCampaigns(db, PER_PASS)) {
      if (deps.belongs && !(await deps.belongs(c))) continue;
      const { moved, deliveries } = await db.transaction((tx) => pauseCampaign(tx, c.id, 'quota', details));
      if (!moved) continue;
      paused++;
      await relayWebhookDeliveries(deps.webhookQueue, config, deliveries, logger);
      logger.warn(
        { campaignId: c.id, projectId: c.projectId, ...figures },
        'campaign paused: SES 24-hour quota nearly spent',
      );
    }
  } else if (state.free) {
    for (const c of await pausedCampaigns(db, 'quota', PER_PASS)) {
      if (deps.belongs && !(await deps.belongs(c))) continue;
      const { campaign, deliveries } = await db.transaction((tx) =>
        resumeCampaign(tx, c.projectId, c.id, { onlyReason: 'quota', by: 'quota' }),
      );
      if (!campaign) continue;
      resumed++;
      await relayWebhookDeliveries(deps.webhookQueue, config, deliveries, logger);
      try {
        await scheduleCampaignJob(deps.campaignQueue, campaign, new Date());
        await promoteDelayedJobs(
          deps.sendQueue,
          await campaignEmailsInQueue(db, campaign.id, config.campaignQueueWindow),
        );
      } catch (err) {
        // Committed: the reconciler gives a SENDING campaign its job, and waiting emails recheck on their own.
        logger.warn(
          { err, campaignId: campaign.id },
          'resumed campaign not woken; it continues within CAMPAIGN_PAUSE_RECHECK_MS',
        );
      }
      logger.info(
        { campaignId: c.id, projectId: c.projectId, ...figures },
        'campaign resumed: SES 24-hour quota free again',
      );
    }
  }
  return { ...figures, paused, resumed };
}
