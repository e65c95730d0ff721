/**
 * After an accepted send is written (`./accept-write`): its answer (`SendResult`) and, for after the commit, its
 * webhook deliveries and send jobs (delayed jobs for scheduled emails).
 *
 * @module
 */
import { SendPriority, type SendJobPayload, type WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries, enqueueSendJobs } from '@mailroom/queues/enqueue';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger } from '@mailroom/platform/logger';
import type { SuppressionCause } from '@mailroom/db/queries/suppression-rule';
import type { WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { enqueueSends, type SendEnqueuer } from './enqueue-batcher';

/**
 * The spec's Send result, plus each email's `status` (`queued`, or `suppressed`: stored, never sent, with the
 * `reason`: the address is on the suppression list, or a marketing email's contact is unsubscribed) and the
 * list of `suppressed` addresses.
 */
export interface SendResult {
  emails: {
    contact: { id: string; email: string };
    email: string;
    status: 'queued' | 'scheduled' | 'suppressed';
    reason?: SuppressionCause;
    scheduledAt?: string;
  }[];
  suppressed: string[];
  timestamp: string;
}

/** What `writeAccepted` (`./accept-write`) wrote: one row per recipient, and the webhook deliveries to announce. */
export interface WrittenEmails {
  /** `suppressed`: why the email is stored but never sent (undefined: queued). */
  rows: {
    id: string;
    toEmail: string;
    suppressed: SuppressionCause | undefined;
    contact: { id: string; email: string };
  }[];
  deliveries: WebhookDeliveryRef[];
  /** `input.idempotency`'s key was already held (committed within 24 h, see `./relay/replay`): nothing was written. */
  keyHeld?: true;
  /** When the emails are due (they are `scheduled`), or null (`queued`). */
  scheduledAt: Date | null;
}

/**
 * Registers, for after the commit, the webhook deliveries and the send jobs of what `writeAccepted`
 * (`./accept-write`) wrote (suppressed emails get no job). Enqueueing never throws: on failure (Redis down) it
 * logs, and the reconciler enqueues the committed rows later.
 */
export function enqueueAccepted(
  deps: {
    config: QueueConfig & Pick<PlatformConfig, 'queuePrefix'>;
    sendQueue: Queue<SendJobPayload>;
    webhookQueue: Queue<WebhookJobPayload>;
    log: Logger;
    redis?: Redis;
    enqueuer?: SendEnqueuer;
  },
  projectId: string,
  written: WrittenEmails,
  afterCommit: (fn: () => Promise<void>) => void,
  from?: string,
): void {
  const queued = written.rows.filter((row) => !row.suppressed);
  afterCommit(async () => {
    await relayWebhookDeliveries(deps.webhookQueue, deps.config, written.deliveries, deps.log);
    if (queued.length === 0) return;
    const emailIds = queued.map((row) => row.id);
    if (written.scheduledAt) return enqueueScheduled(deps, projectId, emailIds, written.scheduledAt);
    const request = { projectId, emailIds, from, log: deps.log };
    await (deps.enqueuer ? deps.enqueuer(request) : enqueueSends(deps, [request]));
  });
}

/**
 * Adds the delayed send jobs of scheduled emails (no lane count: the fair share counts the minute an email is sent
 * in, not the one it was accepted in). Never throws: the reconciler schedules what is due before its next pass.
 */
async function enqueueScheduled(
  deps: { config: QueueConfig; sendQueue: Queue<SendJobPayload>; log: Logger },
  projectId: string,
  emailIds: string[],
  at: Date,
): Promise<void> {
  const delayMs = Math.max(at.getTime() - Date.now(), 1);
  const jobs = emailIds.map((emailId) => ({ emailId, projectId, priority: SendPriority.transactional, delayMs }));
  await enqueueSendJobs(deps.sendQueue, deps.config, jobs).catch((err: unknown) =>
    deps.log.warn({ err, emails: emailIds.length }, 'enqueue failed; the reconciler will schedule these emails'),
  );
}

/** The spec's Send result of what `writeAccepted` (`./accept-write`) wrote. */
export function sendResult(written: WrittenEmails): SendResult {
  return {
    emails: written.rows.map((row) => ({
      contact: { id: row.contact.id, email: row.contact.email },
      email: row.id,
      ...(row.suppressed
        ? { status: 'suppressed' as const, reason: row.suppressed }
        : written.scheduledAt
          ? { status: 'scheduled' as const, scheduledAt: written.scheduledAt.toISOString() }
          : { status: 'queued' as const }),
    })),
    suppressed: written.rows.filter((row) => row.suppressed).map((row) => row.toEmail),
    timestamp: new Date().toISOString(),
  };
}
