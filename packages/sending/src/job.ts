/**
 * The send job's work: deliver one email row to SES, at most once per successful claim. Queue-neutral: it says
 * what the queue must do next ({@link SendStep}) and the worker's processor does it.
 *
 * 1. Claim the row atomically (`queued → sending`, or `scheduled → sending` once due, with a fresh claim token;
 *    `claim.ts`). A row already final (a cancelled one too) is skipped; a scheduled row not yet due waits for its
 *    time; a row held by a live claim waits until its lease ends; a paused campaign's row waits for the resume.
 * 2. Re-check the project (disabled → `cancelled`), the campaign (cancelled → `cancelled`) and the suppression
 *    rule (`@mailroom/db/queries/suppression-rule`: the address bounced or complained since, or a marketing
 *    email's contact unsubscribed since → `suppressed` with the cause); compose the message (`compose.ts`), hand
 *    it to SES, or to the test sink for a test email.
 * 3. Finish the row with the claim token: `sent` (SES message id), back to `queued` for a retry (throttling or
 *    SES unreachable: no attempt spent, the queue paused; a 5xx: backoff), or `failed` with the reason
 *    (permanent: SES refused it, or its content cannot be composed; or attempts exhausted). A final status writes its webhook deliveries (`email.sent`,
 *    `email.failed`, …) in the same transaction.
 *
 * Once SES has accepted a message, its outcome is never thrown away (`ses-accepted.ts`).
 *
 * @module
 */
import type { Queue } from 'bullmq';
import type { Redis, Cluster } from 'ioredis';
import { TemplateSyntaxError } from '@mailroom/mail/templates';
import { type WebhookJobPayload } from '@mailroom/queues/catalog';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { SendingConfig } from './config';
import { type Logger, logged } from '@mailroom/platform/logger';
import { loadCampaign } from '@mailroom/campaigns/queries/campaigns';
import { storeTestMessage } from './queries/test-messages';
import { ERASED_ADDRESS } from '@mailroom/contacts/queries/erase';
import { SUPPRESSION_REASONS } from '@mailroom/db/queries/suppression-rule';
import { type Database } from '@mailroom/db/client';
import { classifySendError, type MailTransport } from './ses/transport';
import { GateBusyError } from './ses/rate-gate';
import { createSendBatching, type SendOutcome } from './claim';
import { createClaimsAhead, type ClaimsAhead } from './claim-ahead';
import { ComposeError, composeMessage } from './compose';
import { acceptedKey, readAccepted, recordAccepted } from './ses-accepted';
import type { QuotaAdmission } from './ses/quota-guard';

/** What a finished job reports (shown in the dashboard). */
export type SendJobResult =
  | { outcome: 'sent'; messageId: string }
  | { outcome: 'skipped'; reason: string }
  | { outcome: 'failed' | 'cancelled' | 'suppressed'; reason: string };

/**
 * What the queue must do with the job after {@link EmailSender} ran it:
 * - `done`: complete it with `result`;
 * - `leased`: another worker holds the row (or died holding it), or the row is scheduled for later: look again at
 *   `until` (epoch ms);
 * - `campaign-paused`: the row stays queued, no attempt spent: look again in `recheckInMs`, and wake the job at
 *   once if `resumed()` (asked after the job was put back) says the campaign resumed meanwhile;
 * - `back-off`: SES throttled or unreachable, the row is queued again, no attempt spent: pause the whole queue
 *   for `forMs` and put the job back for as long;
 * - `retry`: a transient failure, the row is queued again: fail this attempt with `error` (the queue's backoff);
 * - `yield`: its delivery connection's rate gate is saturated (several connections: `GateBusyError`), nothing was
 *   sent and the row is queued again: put the job back until `until` (epoch ms) without spending an attempt or
 *   pausing the queue, so the worker slot goes to other connections' mail.
 */
export type SendStep =
  | { kind: 'done'; result: SendJobResult }
  | { kind: 'leased'; until: number }
  | { kind: 'campaign-paused'; recheckInMs: number; resumed: () => Promise<boolean> }
  | { kind: 'back-off'; forMs: number; cause: 'throttled' | 'unreachable' }
  | { kind: 'retry'; error: Error }
  | { kind: 'yield'; until: number; connection?: string };

/** One run of the job. */
export interface SendJobInput {
  emailId: string;
  /** Attempts of this job made before this one, and how many it may make in all. */
  attempt: { made: number; max: number };
  /** The job's lane priority: transactional mail claimed mid-campaign takes the rate gate's next slot. */
  priority?: number;
  log: Logger;
}

/** Dependencies of the sender. */
export interface EmailSenderDeps {
  config: SendingConfig &
    QueueConfig &
    Pick<AudienceConfig, 'campaignPauseRecheckMs'> &
    Pick<PlatformConfig, 'queuePrefix' | 'publicUrl'>;
  database: Database;
  /**
   * The pool of the claims and finishes (the worker's plans generically: `createDatabase`'s `genericPlans`; see
   * `createSendBatching`'s `claimDb`); default `database`.
   */
  claimDatabase?: Database;
  transport: MailTransport;
  /** Producer of webhook deliveries (email.sent, email.failed, email.suppressed). */
  webhookQueue: Queue<WebhookJobPayload>;
  /** Where an SES outcome that Postgres could not take is kept until the row is claimed again. */
  redis: Redis | Cluster;
  /**
   * The SES quota at the send (`ses/quota-guard.ts`): `admit` says whether a live campaign email may go out now
   * through the delivery connection named (its own quota); `reached` runs the quota watcher's pass of that connection
   * (pauses its live campaigns when its quota is spent). Omitted: only the
   * watcher's periodic check applies.
   */
  campaignQuota?: {
    admit(connection?: string): Promise<QuotaAdmission>;
    reached(connection?: string): Promise<unknown>;
  };
  /**
   * The delivery connection a message goes through now (`ses/connections.ts`: its binding, or a failover), asked
   * before the campaign quota's admission (each connection has its quota) and passed to the transport. Omitted:
   * the transport decides alone.
   */
  route?: (message: { from: string; projectId: string; key: string }) => Promise<string>;
}

/**
 * Runs the send job for one email (see the module notes). A job carrying several emails may claim its next ones
 * together and give back those it does not send after all (`claim-ahead.ts`).
 */
export type EmailSender = ((input: SendJobInput) => Promise<SendStep>) & Pick<ClaimsAhead, 'claimAhead' | 'release'>;

/** Longest pause (ms) of the send queue while SES is unreachable. */
const UNREACHABLE_MAX_DELAY_MS = 30_000;

/**
 * Creates the sender of one worker process. It keeps the count of SES calls in a row that found SES unreachable
 * (the pause before the next try doubles with it) and batches the claims and finishes of concurrent jobs, so one
 * sender serves every job of the process.
 *
 * The returned function throws the database's errors (the job's attempt fails and is retried), and the `sent`
 * write's error once SES has accepted the message (see `ses-accepted.ts`).
 */
export function createEmailSender(deps: EmailSenderDeps): EmailSender {
  const { config, transport } = deps;
  const { db } = deps.database;
  // Claims and finishes of this process's concurrent jobs go in batches (SEND_BATCH_SIZE; `batcher.ts`).
  const batching = createSendBatching(
    { config, db, claimDb: deps.claimDatabase?.db, webhookQueue: deps.webhookQueue },
    config.sendLeaseMs,
    config.sendBatchSize,
  );
  /** SES calls in a row that found it unreachable (this process); sets the pause before the next try. */
  let unreachableStreak = 0;

  const ahead = createClaimsAhead(batching);

  const send = async ({ emailId, attempt, priority, log }: SendJobInput): Promise<SendStep> => {
    const claimed = await (ahead.take(emailId) ?? batching.claim(emailId));
    if (!claimed.ok) {
      if (claimed.kind === 'leased') return { kind: 'leased', until: claimed.until.getTime() + 50 };
      // A scheduled email not yet due (the job of an earlier time, before a reschedule): the job waits for its time.
      if (claimed.kind === 'scheduled')
        return { kind: 'leased', until: Math.max(claimed.until.getTime(), Date.now()) + 20 };
      if (claimed.kind === 'paused') {
        // The campaign paused (a guardrail or the quota): resuming promotes the campaign's waiting jobs; the
        // recheck is the fallback. A resume committed after the claim looked may have promoted the campaign's
        // jobs before this one was put back (measured: a few emails waited the whole recheck), hence `resumed`.
        const { campaignId } = claimed;
        return {
          kind: 'campaign-paused',
          recheckInMs: config.campaignPauseRecheckMs,
          resumed: async () => (await loadCampaign(db, campaignId))?.status !== 'PAUSED',
        };
      }
      log.debug({ reason: claimed.kind }, 'send skipped');
      return {
        kind: 'done',
        result: {
          outcome: 'skipped',
          reason: claimed.kind === 'final' ? `already ${claimed.status}` : 'email no longer exists',
        },
      };
    }
    const { claim } = claimed;
    const email = claim.email;
    const key = acceptedKey(config, emailId);
    /** Frees this email's place in the campaign quota guard once its outcome is written (counted when sent). */
    let releaseQuota: (() => void) | undefined;
    const finish = async (outcome: SendOutcome) => {
      const finished = await batching.finish(claim, outcome, log);
      releaseQuota?.();
      return finished;
    };
    const done = (result: SendJobResult): SendStep => ({ kind: 'done', result });

    if (email.previousStatus === 'sending') {
      // A claim that outlived its lease: SES may already have this message. Only a `sent` write that failed
      // leaves its outcome behind; without one, the earlier worker died before or during the SES call.
      const accepted = await readAccepted(deps.redis, key);
      if (accepted) {
        await finish({ status: 'sent', ...accepted });
        await logged(deps.redis.del(key), log, 'kept SES outcome removal', 'debug');
        log.warn(
          { messageId: accepted.messageId },
          'recorded a send that SES accepted before Postgres was lost; not sent again',
        );
        return done({ outcome: 'sent', messageId: accepted.messageId });
      }
      log.warn('re-sending an email whose worker died mid-send (same Message-ID)');
    }

    // Its contact was erased while the email was in flight (a claim that outlived its lease): the address is gone.
    if (email.toEmail === ERASED_ADDRESS) {
      await finish({ status: 'cancelled', reason: 'contact erased' });
      log.info('send cancelled: contact erased');
      return done({ outcome: 'cancelled', reason: 'contact erased' });
    }

    if (email.projectDisabled) {
      await finish({ status: 'cancelled', reason: 'project disabled' });
      log.info('send cancelled: project disabled');
      return done({ outcome: 'cancelled', reason: 'project disabled' });
    }

    if (email.campaign?.status === 'CANCELLED') {
      await finish({ status: 'cancelled', reason: 'campaign cancelled' });
      return done({ outcome: 'cancelled', reason: 'campaign cancelled' });
    }

    // The suppression rule, again: the address may have bounced or complained, or a marketing email's contact
    // unsubscribed, since this email was accepted.
    if (email.suppression) {
      const reason = SUPPRESSION_REASONS[email.suppression];
      await finish({ status: 'suppressed', reason, cause: email.suppression });
      log.info({ cause: email.suppression }, 'send skipped: recipient suppressed');
      return done({ outcome: 'suppressed', reason });
    }

    // The SES quota's reserve is for transactional and workflow mail: a live campaign email goes out only while
    // there is room before it (ses/quota-guard.ts), so campaigns stop at the line, not at the next quota check.
    // The delivery connection now (bound, or failed over): its quota admits campaign mail, its transport sends.
    const connection =
      deps.route && !email.test
        ? await deps.route({ from: email.fromEmail, projectId: email.projectId, key: email.id })
        : undefined;
    if (deps.campaignQuota && email.campaignId && !email.test) {
      const admission = await deps.campaignQuota.admit(connection);
      if (!admission.ok) {
        // No room left before the reserve: pause the live campaigns now (the quota watcher's pass), put this email
        // back to `queued` and let its job wait without spending an attempt: until the resume wakes it when its
        // campaign paused, else (the room is held by sends not yet counted) a second.
        const campaignId = email.campaignId;
        await deps.campaignQuota
          .reached(connection)
          .catch((err: unknown) => log.warn({ err }, 'quota pass failed; the next check pauses the campaigns'));
        const paused = (await loadCampaign(db, campaignId))?.status === 'PAUSED';
        const retryInMs = paused ? config.campaignPauseRecheckMs : Math.min(1_000, config.campaignPauseRecheckMs);
        await finish({
          status: 'queued',
          reason: 'SES 24-hour quota: campaigns stop at its reserve (SES_QUOTA_RESERVE)',
          retryInMs,
        });
        log.info({ campaignId, paused }, 'campaign email held: SES 24-hour quota reserve reached');
        return {
          kind: 'campaign-paused',
          recheckInMs: retryInMs,
          resumed: async () => paused && (await loadCampaign(db, campaignId))?.status !== 'PAUSED',
        };
      }
      releaseQuota = admission.done;
    }

    let raw: Buffer;
    let subject: string;
    try {
      ({ raw, subject } = await composeMessage(db, config, email, log));
    } catch (err) {
      // Content that cannot be composed never will be: failed at once, never retried as transient.
      if (err instanceof ComposeError) {
        const reason =
          err.cause instanceof TemplateSyntaxError
            ? `template error: ${err.message}`
            : `cannot compose the message: ${err.message}`;
        await finish({ status: 'failed', reason, failureKind: 'permanent' });
        log.warn({ reason }, 'send failed permanently: the message cannot be composed');
        return done({ outcome: 'failed', reason });
      }
      return retryOrFail(attempt, log, finish, `internal: ${(err as Error).message}`, err);
    }

    // Test mode: the very message built above goes to the sink instead of SES (no SES call, no rate-gate slot).
    if (email.test) {
      const testMessageId = `test-${email.id}`;
      await storeTestMessage(db, email.id, email.projectId, raw);
      await finish({ status: 'sent', messageId: testMessageId, renderedSubject: subject });
      log.info({ messageId: testMessageId }, 'test email delivered to the sink');
      return done({ outcome: 'sent', messageId: testMessageId });
    }

    let messageId: string;
    let sentVia: string | undefined;
    try {
      ({ messageId, connection: sentVia } = await transport.send({
        raw,
        from: email.fromEmail,
        to: [email.toEmail],
        // The platform's own tags (feedback finds the email by them) and the sender's; no user tag takes a reserved name.
        tags: {
          ...Object.fromEntries((email.tags ?? []).map((t) => [t.name, t.value])),
          email_id: email.id,
          project_id: email.projectId,
        },
        // Transactional mail claimed mid-campaign takes the next slot of the rate gate, not the last of the claimed.
        priority,
        connection,
        projectId: email.projectId,
        key: email.id,
        // The stream and tracking pick the SES configuration set (decided at acceptance: a retry takes the same).
        stream: email.marketing ? 'marketing' : 'transactional',
        tracking: email.tracking,
        ...(email.trackingTarget ? { trackingDomain: email.trackingTarget } : {}),
      }));
    } catch (err) {
      if (err instanceof GateBusyError) {
        // Its connection's gate would keep this slot waiting: the claim is given back (nothing left for SES) and
        // the job waits in the queue instead, so other connections' mail takes the slot.
        await finish({ status: 'queued', reason: 'delivery connection at its send rate', retryInMs: err.retryInMs });
        log.debug(
          { connection, retryInMs: err.retryInMs },
          'send yielded: its delivery connection is at its send rate',
        );
        return { kind: 'yield', until: Date.now() + err.retryInMs, connection };
      }
      const c = classifySendError(err);
      if (c.kind === 'throttled') {
        await finish({ status: 'queued', reason: c.reason, retryInMs: c.retryInMs });
        log.warn({ reason: c.reason, retryInMs: c.retryInMs }, 'SES throttled; queue paused');
        return { kind: 'back-off', forMs: c.retryInMs, cause: 'throttled' };
      }
      if (c.kind === 'unreachable') {
        // An SES outage is weather: no attempt is spent, however long it lasts. The queue pauses with backoff
        // (SEND_BACKOFF_MS doubling per consecutive failure, at most 30 s) so a dead endpoint is not hammered.
        unreachableStreak++;
        const retryInMs = Math.min(
          config.sendBackoffMs * 2 ** Math.min(unreachableStreak - 1, 16),
          UNREACHABLE_MAX_DELAY_MS,
        );
        await finish({ status: 'queued', reason: c.reason, retryInMs });
        log.warn({ reason: c.reason, retryInMs }, 'send deferred: SES unreachable; queue paused');
        return { kind: 'back-off', forMs: retryInMs, cause: 'unreachable' };
      }
      if (c.kind === 'permanent') {
        await finish({ status: 'failed', reason: c.reason, failureKind: 'permanent' });
        log.warn({ reason: c.reason }, 'send failed permanently');
        return done({ outcome: 'failed', reason: c.reason });
      }
      return retryOrFail(attempt, log, finish, c.reason, err);
    }

    unreachableStreak = 0;
    const recorded = await recordAccepted(
      deps,
      key,
      { messageId, renderedSubject: subject, ...(sentVia ? { connection: sentVia } : {}) },
      claim.claimedAt,
      () =>
        finish({ status: 'sent', messageId, renderedSubject: subject, ...(sentVia ? { connection: sentVia } : {}) }),
      log,
      batching.finishWouldWait(),
    );
    if (!recorded) log.error({ messageId }, 'sent, but the claim was lost before recording it');
    log.info({ messageId, connection: sentVia }, 'email sent');
    return done({ outcome: 'sent', messageId });
  };

  return Object.assign(send, { claimAhead: ahead.claimAhead, release: ahead.release });
}

/** Transient failure: put the row back for the next attempt, or fail it when this was the last one. */
async function retryOrFail(
  attempt: SendJobInput['attempt'],
  log: Logger,
  finish: (o: SendOutcome) => Promise<boolean>,
  reason: string,
  err: unknown,
): Promise<SendStep> {
  if (attempt.made + 1 >= attempt.max) {
    await finish({
      status: 'failed',
      reason: `gave up after ${attempt.max} attempts: ${reason}`,
      failureKind: 'transient',
    });
    log.error({ reason, attempts: attempt.max }, 'send failed: attempts exhausted');
    return { kind: 'done', result: { outcome: 'failed', reason } };
  }
  await finish({ status: 'queued', reason });
  log.warn({ reason, attempt: attempt.made + 1 }, 'send deferred: transient failure');
  return { kind: 'retry', error: err instanceof Error ? err : new Error(reason) };
}
