/**
 * The `send` job: deliver one email row to SES, at most once per successful claim.
 *
 * 1. Validate the payload (an invalid one is unrecoverable, never retried).
 * 2. Claim the row atomically (`queued → sending`, with a fresh claim token). A row already final is skipped;
 *    a row held by a live claim is delayed until its lease ends.
 * 3. Re-check the project (disabled → `cancelled`), the campaign (cancelled → `cancelled`) and the suppression
 *    list (the address bounced or complained since → `suppressed`), render subject and
 *    body (a campaign email's from the campaign) against the contact's data, the request's variables and
 *    `unsubscribeUrl`, build the MIME message (marketing mail with List-Unsubscribe, RFC 8058), hand it to SES.
 * 4. Finish the row with the claim token: `sent` (SES message id), back to `queued` for a retry (throttling or
 *    SES unreachable: no attempt spent, the queue paused; a 5xx: backoff), or `failed` with the reason
 *    (permanent, or attempts exhausted). A
 *    final status writes its webhook deliveries (`email.sent`, `email.failed`, …) in the same transaction.
 *
 * Once SES has accepted a message, its outcome is never thrown away. The `sent` write may take only what is left
 * of the claim's lease (`SEND_LEASE_MS` less 2 s) and is retried while Postgres is unreachable (backoff from
 * 100 ms to 2 s). As soon as one attempt fails, or before one that has less than 1 s of lease left, the outcome
 * is kept in Redis (`<prefix>:ses-accepted:<email id>`, 7 days; removed once the write succeeds). Whoever claims
 * the row again after the lease finds it there and records `sent` without calling SES. What remains: a process
 * hard-killed between SES's answer and the first write, or Postgres and Redis both unreachable then, re-sends
 * that one message, with the same Message-ID, after the lease (README, "Reliability").
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import { DelayedError, UnrecoverableError, type Job, type Queue, type Worker } from 'bullmq';
import type { Redis, Cluster } from 'ioredis';
import { buildMime } from '@mailroom/mail/mail';
import { createUnsubscribeToken, listUnsubscribeHeaders, unsubscribeUrl } from '@mailroom/mail/unsubscribe';
import { dataValidator } from '@mailroom/platform/validation';
import { emailDomain } from '@mailroom/platform/address';
import { renderContent, TemplateSyntaxError } from '@mailroom/mail/templates';
import { SendJobPayload, announceWebhookDeliveries, type WebhookJobPayload } from '@mailroom/queues/queues';
import { isUnavailableError } from '@mailroom/platform/errors';
import { type Config } from '@mailroom/platform/config';
import { type Logger } from '@mailroom/platform/logger';
import { claimEmail, finishEmail, loadAttachments } from '@mailroom/db/queries/emails';
import { loadCampaign } from '@mailroom/db/queries/campaigns';
import { storeTestMessage } from '@mailroom/db/queries/test-messages';
import { type Database } from '@mailroom/db/client';
import { classifySendError, type MailTransport } from '../ses/transport';
import type { QuotaAdmission } from '../ses/quota-guard';

const validatePayload = dataValidator(SendJobPayload);

/** What a finished job reports (shown in the dashboard). */
export type SendJobResult =
  | { outcome: 'sent'; messageId: string }
  | { outcome: 'skipped'; reason: string }
  | { outcome: 'failed' | 'cancelled' | 'suppressed'; reason: string };

/** The webhook event each final outcome announces. */
const WEBHOOK_TYPE: Partial<Record<Parameters<typeof finishEmail>[3]['status'], string>> = {
  sent: 'email.sent',
  failed: 'email.failed',
  suppressed: 'email.suppressed',
};

/** Dependencies of the processor. */
export interface SendProcessorDeps {
  config: Config;
  database: Database;
  transport: MailTransport;
  logger: Logger;
  /** Producer of webhook deliveries (email.sent, email.failed, email.suppressed). */
  webhookQueue: Queue<WebhookJobPayload>;
  /** The worker running this processor (for queue-wide throttling pauses). */
  worker: () => Worker;
  /** Told of each SES throttle (metrics). */
  onThrottled?: () => void;
  /** Where an SES outcome that Postgres could not take is kept until the row is claimed again. */
  redis: Redis | Cluster;
  /**
   * The SES quota at the send (ses/quota-guard.ts): `admit` says whether a live campaign email may go out now;
   * `reached` runs the quota watcher's pass (pauses the live campaigns when the quota is spent). Omitted: only the
   * watcher's periodic check applies.
   */
  campaignQuota?: { admit(): Promise<QuotaAdmission>; reached(): Promise<unknown> };
}

/** Longest pause (ms) of the send queue while SES is unreachable. */
const UNREACHABLE_MAX_DELAY_MS = 30_000;

/** How long (s) an SES outcome waits in Redis for its row to be claimed again. */
const ACCEPTED_TTL_S = 7 * 86_400;
/** Time (ms) left on the lease when the `sent` write stops retrying, so no other worker can claim meanwhile. */
const LEASE_MARGIN_MS = 2_000;

/** What SES answered for a message whose `sent` write failed. */
interface AcceptedBySes {
  messageId: string;
  renderedSubject: string;
}

/** Creates the BullMQ processor function of the `send` queue. */
export function createSendProcessor(deps: SendProcessorDeps) {
  const { config, transport } = deps;
  const { db } = deps.database;
  /** SES calls in a row that found it unreachable (this process); sets the pause before the next try. */
  let unreachableStreak = 0;

  return async (job: Job, token?: string): Promise<SendJobResult> => {
    const checked = validatePayload(job.data);
    if (!checked.ok) throw new UnrecoverableError(`invalid send payload: ${JSON.stringify(checked.errors)}`);
    const { emailId } = checked.value;
    const log = deps.logger.child({ jobId: job.id, emailId, projectId: checked.value.projectId });

    const claimToken = randomUUID();
    const claimedAt = Date.now();
    const claim = await claimEmail(db, emailId, claimToken, config.sendLeaseMs);
    if (!claim.ok) {
      if (claim.kind === 'leased') {
        // Another worker holds the row (or died holding it): look again when its lease ends.
        await job.moveToDelayed(claim.until.getTime() + 50, token);
        throw new DelayedError();
      }
      if (claim.kind === 'paused') {
        // The campaign paused (a guardrail or the quota): the row stays queued and the job waits, without
        // spending an attempt. Resuming promotes the campaign's waiting jobs; this recheck is the fallback.
        await job.moveToDelayed(Date.now() + config.campaignPauseRecheckMs, token);
        // A resume committed after the claim looked may have promoted the campaign's jobs before this one was
        // delayed (measured: a few emails waited the whole recheck): look once more and wake it if so.
        if ((await loadCampaign(db, claim.campaignId))?.status !== 'PAUSED') await job.promote().catch(() => undefined);
        throw new DelayedError();
      }
      log.debug({ reason: claim.kind }, 'send skipped');
      return { outcome: 'skipped', reason: claim.kind === 'final' ? `already ${claim.status}` : 'email no longer exists' };
    }
    const email = claim.email;
    const acceptedKey = `${config.queuePrefix}:ses-accepted:${emailId}`;

    /** Frees this email's place in the campaign quota guard once its outcome is written (counted when sent). */
    let releaseQuota: (() => void) | undefined;
    // Finishing a row and writing its webhook deliveries (email.sent, email.failed, email.suppressed) is one
    // statement: the event is announced if and only if the status it announces committed.
    const finish = async (outcome: Parameters<typeof finishEmail>[3]) => {
      const type = WEBHOOK_TYPE[outcome.status];
      const data = {
        emailId: email.id,
        contactId: email.contactId,
        campaignId: email.campaignId,
        messageId: 'messageId' in outcome ? outcome.messageId : null,
        to: email.toEmail,
        from: email.fromEmail,
        status: outcome.status,
        ...('reason' in outcome ? { reason: outcome.reason } : {}),
        ...(email.test ? { test: true } : {}),
      };
      const { finished, deliveries } = await finishEmail(db, emailId, claimToken, outcome, type ? { type, data } : undefined);
      releaseQuota?.();
      await announceWebhookDeliveries(deps.webhookQueue, config, deliveries, log);
      return finished;
    };

    /**
     * No room left before the quota's reserve: pause the live campaigns now (the quota watcher's pass), put this
     * email back to `queued` and let its job wait without spending an attempt: until the resume wakes it when its
     * campaign paused, else (the room is held by sends not yet counted) a second.
     */
    const quotaReached = async (campaignId: string): Promise<never> => {
      await deps.campaignQuota!.reached().catch((err: unknown) => log.warn({ err }, 'quota pass failed; the next check pauses the campaigns'));
      const paused = (await loadCampaign(db, campaignId))?.status === 'PAUSED';
      const retryInMs = paused ? config.campaignPauseRecheckMs : Math.min(1_000, config.campaignPauseRecheckMs);
      await finish({ status: 'queued', reason: 'SES 24-hour quota: campaigns stop at its reserve (SES_QUOTA_RESERVE)', retryInMs });
      log.info({ campaignId, paused }, 'campaign email held: SES 24-hour quota reserve reached');
      await job.moveToDelayed(Date.now() + retryInMs, token);
      // A resume committed meanwhile may have woken the campaign's jobs before this one was delayed.
      if (paused && (await loadCampaign(db, campaignId))?.status !== 'PAUSED') await job.promote().catch(() => undefined);
      throw new DelayedError();
    };

    if (email.previousStatus === 'sending') {
      // A claim that outlived its lease: SES may already have this message. Only a `sent` write that failed
      // leaves its outcome behind; without one, the earlier worker died before or during the SES call.
      const accepted = parseAccepted(await deps.redis.get(acceptedKey));
      if (accepted) {
        await finish({ status: 'sent', ...accepted });
        await deps.redis.del(acceptedKey).catch(() => undefined);
        log.warn({ messageId: accepted.messageId }, 'recorded a send that SES accepted before Postgres was lost; not sent again');
        return { outcome: 'sent', messageId: accepted.messageId };
      }
      log.warn('re-sending an email whose worker died mid-send (same Message-ID)');
    }

    if (email.projectDisabled) {
      await finish({ status: 'cancelled', reason: 'project disabled' });
      log.info('send cancelled: project disabled');
      return { outcome: 'cancelled', reason: 'project disabled' };
    }

    if (email.campaign?.status === 'CANCELLED') {
      await finish({ status: 'cancelled', reason: 'campaign cancelled' });
      return { outcome: 'cancelled', reason: 'campaign cancelled' };
    }

    if (email.unsubscribed) {
      await finish({ status: 'cancelled', reason: 'contact unsubscribed' });
      log.info('send cancelled: contact unsubscribed since the email was written');
      return { outcome: 'cancelled', reason: 'contact unsubscribed' };
    }

    // The address may have bounced or complained since this email was accepted.
    if (email.suppressed) {
      await finish({ status: 'suppressed', reason: 'address is on the suppression list' });
      log.info('send skipped: recipient suppressed');
      return { outcome: 'suppressed', reason: 'address is on the suppression list' };
    }

    // The SES quota's reserve is for transactional and workflow mail: a live campaign email goes out only while
    // there is room before it (ses/quota-guard.ts), so campaigns stop at the line, not at the next quota check.
    if (deps.campaignQuota && email.campaignId && !email.test) {
      const admission = await deps.campaignQuota.admit();
      if (!admission.ok) return quotaReached(email.campaignId);
      releaseQuota = admission.done;
    }

    let raw: Buffer;
    let subject: string;
    try {
      // Marketing mail links to the one-click unsubscribe page of this very email (signed token, RFC 8058).
      const unsubscribeToken = createUnsubscribeToken(email.id, email.signingKey);
      const unsubscribe = unsubscribeUrl(config.publicUrl, unsubscribeToken);
      const context = { email: email.toEmail, ...(email.contactData ?? {}), ...email.variables, unsubscribeUrl: unsubscribe };
      const source = email.campaign
        ? { subject: email.campaign.subject, body: email.campaign.body, format: 'html' as const }
        : { subject: email.subject!, body: email.body!, format: email.bodyFormat! };
      const content = renderContent(source, context);
      subject = content.subject;
      const files = await loadAttachments(db, email.projectId, email.attachmentIds);
      raw = await buildMime({
        from: { email: email.fromEmail, ...(email.fromName ? { name: email.fromName } : {}) },
        to: { email: email.toEmail, ...(email.toName ? { name: email.toName } : {}) },
        replyTo: email.replyTo,
        subject: content.subject,
        html: content.html,
        text: content.text,
        headers: email.marketing ? { ...email.headers, ...listUnsubscribeHeaders(unsubscribe) } : email.headers,
        attachments: files.map((f) => ({ filename: f.filename, content: f.content, contentType: f.contentType })),
        messageId: `${email.id}@${emailDomain(email.fromEmail)}`,
        // The token names this email (attribution, and a test email's link records a test event), so it differs
        // per email; left out of the boundaries, identical content still gives identical bytes.
        perMessage: [unsubscribeToken],
      });
    } catch (err) {
      if (err instanceof TemplateSyntaxError) {
        await finish({ status: 'failed', reason: `template error: ${err.message}`, failureKind: 'permanent' });
        return { outcome: 'failed', reason: err.message };
      }
      return retryOrFail(job, log, finish, `internal: ${(err as Error).message}`, err);
    }

    // Test mode: the very message built above goes to the sink instead of SES (no SES call, no rate-gate slot).
    if (email.test) {
      const testMessageId = `test-${email.id}`;
      await storeTestMessage(db, email.id, email.projectId, raw);
      await finish({ status: 'sent', messageId: testMessageId, renderedSubject: subject });
      log.info({ messageId: testMessageId }, 'test email delivered to the sink');
      return { outcome: 'sent', messageId: testMessageId };
    }

    let messageId: string;
    try {
      ({ messageId } = await transport.send({
        raw,
        from: email.fromEmail,
        to: [email.toEmail],
        tags: { email_id: email.id, project_id: email.projectId },
        // Transactional mail claimed mid-campaign takes the next slot of the rate gate, not the last of the claimed.
        priority: job.opts.priority,
      }));
    } catch (err) {
      const c = classifySendError(err);
      if (c.kind === 'throttled') {
        await finish({ status: 'queued', reason: c.reason, retryInMs: c.retryInMs });
        log.warn({ reason: c.reason, retryInMs: c.retryInMs }, 'SES throttled; queue paused');
        deps.onThrottled?.();
        // Pause the whole queue (every worker) for the same time, and put this job back without spending an
        // attempt. A delayed job is promoted with a wake-up signal; `Worker.RateLimitError` returned prioritized
        // jobs to the wait set without one (measured: 5 s, the blocking timeout, instead of 1 s).
        await deps.worker().rateLimit(c.retryInMs);
        await job.moveToDelayed(Date.now() + c.retryInMs, token);
        throw new DelayedError();
      }
      if (c.kind === 'unreachable') {
        // An SES outage is weather: no attempt is spent, however long it lasts. The queue pauses with backoff
        // (SEND_BACKOFF_MS doubling per consecutive failure, at most 30 s) so a dead endpoint is not hammered.
        unreachableStreak++;
        const retryInMs = Math.min(config.sendBackoffMs * 2 ** Math.min(unreachableStreak - 1, 16), UNREACHABLE_MAX_DELAY_MS);
        await finish({ status: 'queued', reason: c.reason, retryInMs });
        log.warn({ reason: c.reason, retryInMs }, 'send deferred: SES unreachable; queue paused');
        await deps.worker().rateLimit(retryInMs);
        await job.moveToDelayed(Date.now() + retryInMs, token);
        throw new DelayedError();
      }
      if (c.kind === 'permanent') {
        await finish({ status: 'failed', reason: c.reason, failureKind: 'permanent' });
        log.warn({ reason: c.reason }, 'send failed permanently');
        return { outcome: 'failed', reason: c.reason };
      }
      return retryOrFail(job, log, finish, c.reason, err);
    }

    unreachableStreak = 0;
    const accepted: AcceptedBySes = { messageId, renderedSubject: subject };
    // Kept in Redis before any write that could outlive the lease, and as soon as one write fails: whoever
    // claims the row after the lease then records it instead of sending again.
    let kept = false;
    const keep = async (why: string): Promise<void> => {
      if (kept) return;
      try {
        await withTimeout(deps.redis.set(acceptedKey, JSON.stringify(accepted), 'EX', ACCEPTED_TTL_S), KEEP_TIMEOUT_MS);
        kept = true;
        log.warn({ messageId, why }, 'SES outcome kept in Redis until the sent write succeeds');
      } catch (err) {
        log.error({ messageId, why, err: (err as Error).message }, 'SES accepted the message but Redis did not take its outcome either; it may be sent again after the lease');
      }
    };
    const recorded = await recordAccepted(() => finish({ status: 'sent', ...accepted }), claimedAt + config.sendLeaseMs - LEASE_MARGIN_MS, keep).catch((err) => {
      log.error({ messageId, err: (err as Error).message }, 'SES accepted the message but the sent write failed; the job retries');
      throw err;
    });
    if (kept) await deps.redis.del(acceptedKey).catch(() => undefined);
    if (!recorded) log.error({ messageId }, 'sent, but the claim was lost before recording it');
    log.info({ messageId }, 'email sent');
    return { outcome: 'sent', messageId };
  };
}

/** How long (ms) keeping an SES outcome in Redis may take before it is given up (Redis may be down too). */
const KEEP_TIMEOUT_MS = 2_000;

/** Rejects with `Error('timed out after N ms')` when `p` has not settled within `ms`; `p` itself runs on. */
async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** A kept SES outcome, or undefined when there is none (or it cannot be read: then the message is re-sent). */
function parseAccepted(kept: string | null): AcceptedBySes | undefined {
  if (!kept) return undefined;
  try {
    const v = JSON.parse(kept) as Partial<AcceptedBySes>;
    return typeof v.messageId === 'string' && typeof v.renderedSubject === 'string' ? { messageId: v.messageId, renderedSubject: v.renderedSubject } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Runs the write that records an SES outcome until it succeeds or the lease runs out (`deadline`, epoch ms):
 * each attempt may take only the time left (a write on a silently dropped connection would otherwise hang past
 * the lease, when another worker may claim the row), and is tried again while Postgres is unreachable
 * ({@link isUnavailableError}) or did not answer in time, with backoff from 100 ms doubling to 2 s.
 *
 * @param keep - called (once is enough; it is idempotent) before an attempt that has less than 1 s of lease left
 *   and after any failed attempt, so the outcome survives the lease.
 * @throws the last error when the deadline passes, or at once for an error that is not a lost connection.
 */
async function recordAccepted<T>(write: () => Promise<T>, deadline: number, keep: (why: string) => Promise<void>): Promise<T> {
  for (let delay = 100; ; delay = Math.min(delay * 2, 2_000)) {
    const left = deadline - Date.now();
    if (left < 1_000) await keep('little of the lease left');
    try {
      return await withTimeout(write(), Math.max(left, 1_000));
    } catch (err) {
      await keep((err as Error).message);
      const timedOut = /^timed out after/.test((err as Error).message);
      if ((!timedOut && !isUnavailableError(err)) || Date.now() + delay > deadline) throw err;
      await new Promise((r) => setTimeout(r, delay));
    }
  }
}

/** Transient failure: put the row back for the next attempt, or fail it when this was the last one. */
async function retryOrFail(
  job: Job,
  log: Logger,
  finish: (o: Parameters<typeof finishEmail>[3]) => Promise<boolean>,
  reason: string,
  err: unknown,
): Promise<SendJobResult> {
  const attempts = job.opts.attempts ?? 1;
  if (job.attemptsMade + 1 >= attempts) {
    await finish({ status: 'failed', reason: `gave up after ${attempts} attempts: ${reason}`, failureKind: 'transient' });
    log.error({ reason, attempts }, 'send failed: attempts exhausted');
    return { outcome: 'failed', reason };
  }
  await finish({ status: 'queued', reason });
  log.warn({ reason, attempt: job.attemptsMade + 1 }, 'send deferred: transient failure');
  throw err instanceof Error ? err : new Error(reason);
}
