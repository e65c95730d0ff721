/**
 * The `send` job in BullMQ terms: the work is the sending domain's (`@mailroom/sending/job`); this processor
 * validates the payload (an invalid one is unrecoverable, never retried), passes the job's attempt count, and
 * does what the domain's answer asks of the queue: complete, fail the attempt, or put the job back (delayed)
 * without spending an attempt, pausing the whole queue while SES throttles or is unreachable. A job carrying
 * several emails (campaign mail) runs them through `send-batch.ts`.
 *
 * @module
 */
import { DelayedError, UnrecoverableError, type Job, type Queue, type Worker } from 'bullmq';
import { dataValidator } from '@mailroom/platform/validation';
import { SendJobPayload } from '@mailroom/queues/catalog';
import { type Logger, logged } from '@mailroom/platform/logger';
import { createEmailSender, type EmailSenderDeps, type SendJobResult } from '@mailroom/sending/job';
import { runSendBatch, urgentMailWaiting, type SendBatchDeps, type SendBatchResult } from './send-batch';

const validatePayload = dataValidator(SendJobPayload);

/** Dependencies of the processor. */
export interface SendProcessorDeps extends EmailSenderDeps {
  logger: Logger;
  /** The worker running this processor (for queue-wide throttling pauses). */
  worker: () => Worker;
  /** Told of each SES throttle (metrics). */
  onThrottled?: () => void;
  /** The send queue: the emails a job carrying several could not finish get jobs of their own there. */
  sendQueue: Queue<SendJobPayload>;
}

/** Creates the BullMQ processor function of the `send` queue. */
export function createSendProcessor(deps: SendProcessorDeps) {
  const send = createEmailSender(deps);

  /** Send jobs this process runs now (its slots in use: `SEND_CONCURRENCY`). */
  let running = 0;
  const urgent = urgentMailWaiting(deps.sendQueue);
  const batchDeps: SendBatchDeps = {
    config: deps.config,
    sendQueue: deps.sendQueue,
    rateLimit: (ms: number) => deps.worker().rateLimit(ms),
    onThrottled: deps.onThrottled,
    // A free slot takes the urgent job anyway: only a process with all its slots busy hands a campaign job back.
    yieldSlot: async () => running >= deps.config.sendConcurrency && (await urgent()),
  };

  const processor = async (job: Job, token?: string): Promise<SendJobResult | SendBatchResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid send payload: ${JSON.stringify(checked.errors)}`);
    const { emailId, emailIds } = checked.value;
    if (emailIds && emailIds.length > 0) {
      const log = deps.logger.child({ jobId: job.id, projectId: checked.value.projectId });
      return runSendBatch(send, batchDeps, job, { ...checked.value, emailIds }, log);
    }
    const log = deps.logger.child({ jobId: job.id, emailId, projectId: checked.value.projectId });

    const step = await send({
      emailId,
      attempt: { made: job.attemptsMade, max: job.opts.attempts ?? 1 },
      priority: job.opts.priority,
      log,
    });
    switch (step.kind) {
      case 'done':
        return step.result;
      case 'retry':
        throw step.error;
      case 'leased':
      case 'yield':
        await job.moveToDelayed(step.until, token);
        throw new DelayedError();
      case 'campaign-paused':
        // Delayed first, then asked: a resume that promoted the campaign's jobs just before would miss this one.
        await job.moveToDelayed(Date.now() + step.recheckInMs, token);
        if (await step.resumed()) await logged(job.promote(), log, 'paused send job promotion', 'debug');
        throw new DelayedError();
      case 'back-off':
        if (step.cause === 'throttled') deps.onThrottled?.();
        // Pause the whole queue (every worker) for the same time, and put this job back without spending an
        // attempt. A delayed job is promoted with a wake-up signal; `Worker.RateLimitError` returned prioritized
        // jobs to the wait set without one (measured: 5 s, the blocking timeout, instead of 1 s).
        await deps.worker().rateLimit(step.forMs);
        await job.moveToDelayed(Date.now() + step.forMs, token);
        throw new DelayedError();
    }
  };

  return async (job: Job, token?: string): Promise<SendJobResult | SendBatchResult> => {
    running++;
    try {
      return await processor(job, token);
    } finally {
      running--;
    }
  };
}
