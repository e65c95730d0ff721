/**
 * The `campaign` job: one per started or scheduled campaign, re-delayed by itself between rounds. What a round
 * does is `@mailroom/campaigns/fanout` (`runCampaignJob`); this module checks the payload and maps the
 * round's waits onto BullMQ (a delayed job, `DelayedError`, lock extension).
 *
 * @module
 */
import { DelayedError, UnrecoverableError, type Job, type Queue } from 'bullmq';
import { CampaignJobPayload, type SendJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { dataValidator } from '@mailroom/platform/validation';
import { type Config } from '@mailroom/config/config';
import { type Logger, logged } from '@mailroom/platform/logger';
import { runCampaignJob, type CampaignJobControl, type CampaignJobResult } from '@mailroom/campaigns/fanout';
import { type Database } from '@mailroom/db/client';

const validatePayload = dataValidator(CampaignJobPayload);

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

/** Creates the BullMQ processor function of the `campaign` queue. */
export function createCampaignProcessor(deps: CampaignProcessorDeps) {
  return async (job: Job, token?: string): Promise<CampaignJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid campaign payload: ${JSON.stringify(checked.errors)}`);
    const { campaignId, projectId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, campaignId, projectId });
    const control: CampaignJobControl = {
      delay: (at) => job.moveToDelayed(at, token),
      promote: () => logged(job.promote(), log, 'campaign job promotion', 'debug'),
      stop: () => {
        throw new DelayedError();
      },
      keepAlive: () =>
        job.extendLock(token!, deps.config.workerLockMs).then(
          () => undefined,
          () => undefined,
        ),
    };
    return runCampaignJob(deps, control, { campaignId, projectId }, log);
  };
}
