/**
 * The steps of a send job around its SES call, shared by the one-message path (`job.ts`: `SendEmail` with raw
 * content) and the bulk path (`job-bulk.ts`: `SendBulkEmail`): {@link SendSteps.prepare} takes a claimed email up
 * to the call (the kept SES outcome of a claim that outlived its lease, the erased contact, the disabled project,
 * the cancelled campaign, the suppression rule, the route and the campaign quota), and the outcome steps finish
 * its row after the call: {@link SendSteps.accepted} once SES accepted the message (its outcome never thrown away:
 * `ses-accepted.ts`), {@link SendSteps.sendFailed} with the error SES (or its gate) gave, classified.
 *
 * @module
 */
import { TemplateSyntaxError } from '@mailroom/mail/templates';
import { logged } from '@mailroom/platform/logger';
import { loadCampaign } from '@mailroom/campaigns/queries/campaigns';
import { ERASED_ADDRESS } from '@mailroom/contacts/queries/erase';
import { SUPPRESSION_REASONS } from '@mailroom/db/queries/suppression-rule';
import { classifySendError } from './ses/transport';
import { GateBusyError } from './ses/rate-gate';
import type { Claim, ClaimResult, SendBatching, SendingEmail, SendOutcome } from './claim';
import { ComposeError } from './compose';
import { acceptedKey, readAccepted, recordAccepted } from './ses-accepted';
import type { EmailSenderDeps, SendJobInput, SendJobResult, SendStep } from './job';

/**
 * The SES message tags of `email`: the platform's own (feedback finds the email by them) and the sender's; no user
 * tag takes a reserved name.
 */
export function sesTags(email: SendingEmail): Record<string, string> {
  return {
    ...Object.fromEntries((email.tags ?? []).map((t) => [t.name, t.value])),
    email_id: email.id,
    project_id: email.projectId,
  };
}

/** Longest pause (ms) of the send queue while SES is unreachable. */
const UNREACHABLE_MAX_DELAY_MS = 30_000;

/** A claimed email that passed every check: ready for its SES call. */
export interface PreparedSend {
  input: SendJobInput;
  claim: Claim;
  email: SendingEmail;
  /** The delivery connection it goes through now (undefined: the transport decides; test mail). */
  connection?: string;
  /** Finishes the row with the claim's token (and frees its place in the campaign quota guard). */
  finish: (outcome: SendOutcome) => Promise<boolean>;
}

/** The steps of one sender (see the module notes). */
export interface SendSteps {
  /**
   * Takes `claimed` (the claim of `input.emailId`) up to its SES call.
   * @returns the email ready for its call, or the step the job takes instead (its row finished or left as the step
   *   says).
   * @throws the database's or Redis's error.
   */
  prepare(input: SendJobInput, claimed: ClaimResult): Promise<{ ready: PreparedSend } | { step: SendStep }>;
  /** Finishes a message whose content cannot be composed: `failed` for a {@link ComposeError}, else retried. */
  composeFailed(p: PreparedSend, err: unknown): Promise<SendStep>;
  /** Records that SES accepted `p`'s message (see `recordAccepted`). @throws the `sent` write's last error. */
  accepted(p: PreparedSend, sent: { messageId: string; subject: string; connection?: string }): Promise<SendStep>;
  /**
   * Finishes `p` after its SES call failed with `err` (the call's, or its bulk entry's).
   * @param opts.sameCall - `err` is a bulk call's, already counted for another of its entries: an unreachable SES
   *   counts once per call in the pause before the next try.
   */
  sendFailed(p: PreparedSend, err: unknown, opts?: { sameCall?: boolean }): Promise<SendStep>;
}

/** Creates the steps of one sender over `batching` (its SES-unreachable streak is the sender's). */
export function createSendSteps(deps: EmailSenderDeps, batching: SendBatching): SendSteps {
  const { config } = deps;
  const { db } = deps.database;
  /** SES calls in a row that found it unreachable (this process); sets the pause before the next try. */
  let unreachableStreak = 0;
  const done = (result: SendJobResult): { step: SendStep } => ({ step: { kind: 'done', result } });

  const prepare: SendSteps['prepare'] = async (input, claimed) => {
    const { log } = input;
    if (!claimed.ok) {
      if (claimed.kind === 'leased') return { step: { kind: 'leased', until: claimed.until.getTime() + 50 } };
      // A scheduled email not yet due (the job of an earlier time, before a reschedule): the job waits for its time.
      if (claimed.kind === 'scheduled')
        return { step: { kind: 'leased', until: Math.max(claimed.until.getTime(), Date.now()) + 20 } };
      if (claimed.kind === 'paused') {
        // The campaign paused (a guardrail or the quota): resuming promotes the campaign's waiting jobs; the
        // recheck is the fallback. A resume committed after the claim looked may have promoted the campaign's
        // jobs before this one was put back (measured: a few emails waited the whole recheck), hence `resumed`.
        const { campaignId } = claimed;
        return {
          step: {
            kind: 'campaign-paused',
            recheckInMs: config.campaignPauseRecheckMs,
            resumed: async () => (await loadCampaign(db, campaignId))?.status !== 'PAUSED',
          },
        };
      }
      log.debug({ reason: claimed.kind }, 'send skipped');
      return done({
        outcome: 'skipped',
        reason: claimed.kind === 'final' ? `already ${claimed.status}` : 'email no longer exists',
      });
    }
    const { claim } = claimed;
    const email = claim.email;
    /** Frees this email's place in the campaign quota guard once its outcome is written (counted when sent). */
    let releaseQuota: (() => void) | undefined;
    const finish = async (outcome: SendOutcome) => {
      const finished = await batching.finish(claim, outcome, log);
      releaseQuota?.();
      return finished;
    };

    if (email.previousStatus === 'sending') {
      // A claim that outlived its lease: SES may already have this message. Only a `sent` write that failed
      // leaves its outcome behind; without one, the earlier worker died before or during the SES call.
      const key = acceptedKey(config, email.id);
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
      log.warn('re-sending an email whose worker died mid-send');
    }

    // Its contact was erased while the email was in flight (a claim that outlived its lease): the address is gone.
    const cancelled =
      email.toEmail === ERASED_ADDRESS
        ? 'contact erased'
        : email.projectDisabled
          ? 'project disabled'
          : email.campaign?.status === 'CANCELLED'
            ? 'campaign cancelled'
            : undefined;
    if (cancelled) {
      await finish({ status: 'cancelled', reason: cancelled });
      log.info(`send cancelled: ${cancelled}`);
      return done({ outcome: 'cancelled', reason: cancelled });
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
          step: {
            kind: 'campaign-paused',
            recheckInMs: retryInMs,
            resumed: async () => paused && (await loadCampaign(db, campaignId))?.status !== 'PAUSED',
          },
        };
      }
      releaseQuota = admission.done;
    }
    return { ready: { input, claim, email, connection, finish } };
  };

  const composeFailed: SendSteps['composeFailed'] = async (p, err) => {
    // Content that cannot be composed never will be: failed at once, never retried as transient.
    if (err instanceof ComposeError) {
      const reason =
        err.cause instanceof TemplateSyntaxError
          ? `template error: ${err.message}`
          : `cannot compose the message: ${err.message}`;
      await p.finish({ status: 'failed', reason, failureKind: 'permanent' });
      p.input.log.warn({ reason }, 'send failed permanently: the message cannot be composed');
      return { kind: 'done', result: { outcome: 'failed', reason } };
    }
    return retryOrFail(p, `internal: ${(err as Error).message}`, err);
  };

  const accepted: SendSteps['accepted'] = async (p, { messageId, subject, connection: sentVia }) => {
    unreachableStreak = 0;
    const { log } = p.input;
    const via = sentVia ? { connection: sentVia } : {};
    const recorded = await recordAccepted(
      deps,
      acceptedKey(config, p.email.id),
      { messageId, renderedSubject: subject, ...via },
      p.claim.claimedAt,
      () => p.finish({ status: 'sent', messageId, renderedSubject: subject, ...via }),
      log,
      batching.finishWouldWait(),
    );
    if (!recorded) log.error({ messageId }, 'sent, but the claim was lost before recording it');
    log.info({ messageId, connection: sentVia }, 'email sent');
    return { kind: 'done', result: { outcome: 'sent', messageId } };
  };

  const sendFailed: SendSteps['sendFailed'] = async (p, err, opts) => {
    const { log } = p.input;
    if (err instanceof GateBusyError) {
      // Its connection's gate would keep this slot waiting: the claim is given back (nothing left for SES) and
      // the job waits in the queue instead, so other connections' mail takes the slot.
      await p.finish({ status: 'queued', reason: 'delivery connection at its send rate', retryInMs: err.retryInMs });
      log.debug(
        { connection: p.connection, retryInMs: err.retryInMs },
        'send yielded: its delivery connection is at its send rate',
      );
      return { kind: 'yield', until: Date.now() + err.retryInMs, connection: p.connection };
    }
    const c = classifySendError(err);
    if (c.kind === 'throttled') {
      await p.finish({ status: 'queued', reason: c.reason, retryInMs: c.retryInMs });
      log.warn({ reason: c.reason, retryInMs: c.retryInMs }, 'SES throttled; queue paused');
      return { kind: 'back-off', forMs: c.retryInMs, cause: 'throttled' };
    }
    if (c.kind === 'unreachable') {
      // An SES outage is weather: no attempt is spent, however long it lasts. The queue pauses with backoff
      // (SEND_BACKOFF_MS doubling per consecutive failure, at most 30 s) so a dead endpoint is not hammered.
      if (!opts?.sameCall || unreachableStreak === 0) unreachableStreak++;
      const retryInMs = Math.min(
        config.sendBackoffMs * 2 ** Math.min(unreachableStreak - 1, 16),
        UNREACHABLE_MAX_DELAY_MS,
      );
      await p.finish({ status: 'queued', reason: c.reason, retryInMs });
      log.warn({ reason: c.reason, retryInMs }, 'send deferred: SES unreachable; queue paused');
      return { kind: 'back-off', forMs: retryInMs, cause: 'unreachable' };
    }
    if (c.kind === 'permanent') {
      await p.finish({ status: 'failed', reason: c.reason, failureKind: 'permanent' });
      log.warn({ reason: c.reason }, 'send failed permanently');
      return { kind: 'done', result: { outcome: 'failed', reason: c.reason } };
    }
    return retryOrFail(p, c.reason, err);
  };

  return { prepare, composeFailed, accepted, sendFailed };
}

/** Transient failure: put the row back for the next attempt, or fail it when this was the last one. */
async function retryOrFail(p: PreparedSend, reason: string, err: unknown): Promise<SendStep> {
  const { attempt, log } = p.input;
  if (attempt.made + 1 >= attempt.max) {
    await p.finish({
      status: 'failed',
      reason: `gave up after ${attempt.max} attempts: ${reason}`,
      failureKind: 'transient',
    });
    log.error({ reason, attempts: attempt.max }, 'send failed: attempts exhausted');
    return { kind: 'done', result: { outcome: 'failed', reason } };
  }
  await p.finish({ status: 'queued', reason });
  log.warn({ reason, attempt: attempt.made + 1 }, 'send deferred: transient failure');
  return { kind: 'retry', error: err instanceof Error ? err : new Error(reason) };
}
