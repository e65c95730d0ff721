/**
 * A `send` job carrying several emails of one campaign (`SendJobPayload.emailIds`, decision 0171): its emails are
 * sent one after the other in the job's worker slot, each through the same sender as a one-email job (claimed,
 * checked, sent and finished on its own row), so a batch changes what the queue pays per email, never what happens
 * to an email. The claims are taken {@link CLAIM_AHEAD} at a time, in one statement per group.
 *
 * An email the sender cannot finish now (its row is held by another worker's claim, its campaign paused, SES
 * throttled or unreachable, its delivery connection at its rate, a transient failure) is given a `send` job of its
 * own, delayed as a one-email job would have been (`jobId` = email id, as every other path that wakes or reconciles
 * an email expects). Throttling, an unreachable SES, a paused campaign and a saturated connection concern the emails
 * after it too: the job stops there, gives back the claims it took ahead (the rows queued again, unsent), and its
 * remaining emails get their own delayed jobs alike.
 * Those jobs are added before the batch job completes; if that fails (Redis), the batch job's attempt fails and it
 * runs again: the emails already final are skipped by their claims.
 *
 * A job carries about 50 ms of sending at the configured rate, but a worker slower than that rate (a busy host)
 * holds its slot longer. So between two emails the job asks whether more urgent mail (transactional, workflow) waits
 * in the queue while every slot of this process is busy ({@link urgentMailWaiting}, asked of Redis at most every
 * {@link URGENT_CHECK_MS}); then it hands its remaining emails back as one job (same lane) and ends, so the slot goes
 * to the urgent job (measured: a transactional email waited 3.6 s behind 104 campaign sends at 400/s on a loaded
 * host without this).
 *
 * A worker that dies mid-job leaves the job stalled; BullMQ gives it to another worker, which skips the emails
 * already final and waits out the claims the dead one held (`claim.ts`, `SEND_LEASE_MS`): each email is sent once,
 * as with one-email jobs. Only the one email of the job on its way to SES at the kill may reach SES twice (with the
 * same Message-ID); the others it had claimed ahead were never sent.
 *
 * @module
 */
import type { Job, Queue } from 'bullmq';
import { SendPriority, type SendJobPayload } from '@mailroom/queues/catalog';
import type { QueueConfig } from '@mailroom/queues/config';
import { enqueueSendJobs, promoteDelayedJobs, type SendJobRef } from '@mailroom/queues/enqueue';
import { type Logger, logged } from '@mailroom/platform/logger';
import { errorMessage } from '@mailroom/platform/errors';
import type { EmailSender, SendJobResult, SendStep } from '@mailroom/sending/job';
import { BULK_MAX_ENTRIES } from '@mailroom/sending/ses/bulk-send';

/** What a job carrying several emails reports: how many ended each way, and how many went to jobs of their own. */
export interface SendBatchResult {
  outcome: 'batch';
  emails: number;
  /** Emails finished by this job, by outcome (`SendJobResult.outcome`). */
  outcomes: Partial<Record<SendJobResult['outcome'], number>>;
  /** Emails handed to jobs of their own (delayed): held by another claim, paused, throttled, retried. */
  deferred: number;
  /** Emails handed back in one job (not tried) so that more urgent mail could have the slot. */
  handedBack?: number;
}

/**
 * Emails of a job claimed together, ahead of their sends (one statement for the group: `claim-ahead.ts`). A group
 * is claimed just before its first send, so a claim waits at most the group's other sends (lease: `SEND_LEASE_MS`).
 */
export const CLAIM_AHEAD = 8;

/** Why the emails after a stop go back to `queued` unsent (their timeline says so). */
const STOP_REASON: Record<'back-off' | 'campaign-paused' | 'yield', string> = {
  'back-off': 'not sent yet: SES throttled or unreachable',
  'campaign-paused': 'not sent yet: campaign paused',
  yield: 'not sent yet: delivery connection at its send rate',
};

/** How often (ms) a process asks Redis whether more urgent mail than campaigns waits in the send queue. */
export const URGENT_CHECK_MS = 50;

/** Priorities of the send queue's lanes ahead of campaigns (transactional 1–4, workflow 5–8 and whatever else). */
const URGENT_PRIORITIES = Array.from({ length: SendPriority.campaign - 1 }, (_, i) => i + 1);

/**
 * Whether mail of a lane ahead of campaigns waits in the send queue: one `getCountsPerPriority` call at most every
 * `everyMs` (ms) for the whole process, the answers in between reused. A Redis error answers false (the job goes on).
 */
export function urgentMailWaiting(
  queue: Pick<Queue, 'getCountsPerPriority'>,
  everyMs = URGENT_CHECK_MS,
): () => Promise<boolean> {
  let last: { at: number; answer: Promise<boolean> } | undefined;
  return () => {
    const now = Date.now();
    if (!last || now - last.at >= everyMs) {
      const answer = queue.getCountsPerPriority(URGENT_PRIORITIES).then(
        (counts) => Object.values(counts).some((n) => n > 0),
        () => false,
      );
      last = { at: now, answer };
    }
    return last.answer;
  };
}

/** What the batch needs besides the sender. */
export interface SendBatchDeps {
  config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>;
  /** The send queue, where the emails not finished here get jobs of their own. */
  sendQueue: Queue<SendJobPayload>;
  /** Pauses the whole send queue (every worker) for `ms` (SES throttled or unreachable). */
  rateLimit: (ms: number) => Promise<void>;
  /** Told of each SES throttle (metrics). */
  onThrottled?: () => void;
  /**
   * Whether the job should give its slot up now: more urgent mail waits and every slot of the process is busy
   * (asked between two emails). Omitted: never.
   */
  yieldSlot?: () => Promise<boolean>;
}

/**
 * Runs the emails of `job` (see the module notes).
 *
 * @returns the tally of the job's emails.
 * @throws Redis's error when the emails left over could not be given their jobs (the job runs again).
 */
export async function runSendBatch(
  send: EmailSender,
  deps: SendBatchDeps,
  job: Pick<Job, 'attemptsMade' | 'opts'>,
  payload: SendJobPayload & { emailIds: string[] },
  log: Logger,
): Promise<SendBatchResult> {
  const ids = [...new Set([payload.emailId, ...payload.emailIds])];
  const max = job.opts.attempts ?? 1;
  const priority = job.opts.priority ?? SendPriority.campaign;
  const made = job.attemptsMade;
  const outcomes: SendBatchResult['outcomes'] = {};
  const own: SendJobRef[] = [];
  const ownJob = (emailId: string, at: number, attempts?: number): void => {
    own.push({
      emailId,
      projectId: payload.projectId,
      priority,
      delayMs: Math.max(0, at - Date.now()),
      ...(attempts ? { attempts } : {}),
    });
  };
  /** The step that stopped the job (the emails after it were not tried), if any. */
  let stop: Extract<SendStep, { kind: 'back-off' | 'campaign-paused' | 'yield' }> | undefined;
  let stopAt = 0;

  /** Does what `step` asks for `emailId`; the steps that stop the job set the time of the emails after it (the latest). */
  const handle = (emailId: string, step: SendStep): void => {
    let at = 0;
    switch (step.kind) {
      case 'done':
        outcomes[step.result.outcome] = (outcomes[step.result.outcome] ?? 0) + 1;
        return;
      case 'leased':
        return ownJob(emailId, step.until);
      case 'retry':
        // The queue's backoff for the next attempt, and the attempts this email has left.
        return ownJob(emailId, Date.now() + deps.config.sendBackoffMs * 2 ** made, Math.max(1, max - made - 1));
      case 'yield':
        at = step.until;
        break;
      case 'back-off':
        at = Date.now() + step.forMs;
        break;
      case 'campaign-paused':
        at = Date.now() + step.recheckInMs;
        break;
    }
    // A throttle or an unreachable SES pauses the queue whatever else stopped the job (a bulk call's emails all
    // have their steps at once): it stands over another stop, the longest pause over a shorter one.
    if (!stop || (step.kind === 'back-off' && (stop.kind !== 'back-off' || step.forMs > stop.forMs))) stop = step;
    stopAt = Math.max(stopAt, at);
    ownJob(emailId, at);
  };

  let i = 0;
  let handedBack: string[] = [];
  /** The emails before this index were claimed ahead (a group at a time, one statement each). */
  let claimedTo = 0;
  /** Emails claimed together: a bulk call's worth (`SendBulkEmail`), else {@link CLAIM_AHEAD}. */
  const group = send.sendMany ? BULK_MAX_ENTRIES : CLAIM_AHEAD;
  while (i < ids.length && !stop) {
    if (i > 0 && deps.yieldSlot && (await deps.yieldSlot())) {
      handedBack = ids.slice(i);
      break;
    }
    claimedTo = Math.min(ids.length, i + group);
    send.claimAhead(ids.slice(i, claimedTo));
    if (send.sendMany) {
      const groupIds = ids.slice(i, claimedTo);
      const steps = await send.sendMany(
        groupIds.map((emailId) => ({ emailId, attempt: { made, max }, priority, log: log.child({ emailId }) })),
      );
      groupIds.forEach((emailId, k) => handle(emailId, steps[k]));
      i = claimedTo;
      continue;
    }
    for (; i < claimedTo && !stop; i++) {
      const emailId = ids[i];
      const elog = log.child({ emailId });
      let step: SendStep;
      try {
        step = await send({ emailId, attempt: { made, max }, priority, log: elog });
      } catch (err) {
        // The database failed mid-way (claim or finish): this email's attempt failed, as a one-email job's would.
        elog.warn({ err: errorMessage(err) }, 'send attempt failed; retried in a job of its own');
        step = { kind: 'retry', error: err instanceof Error ? err : new Error(String(err)) };
      }
      handle(emailId, step);
    }
  }
  if (stop) {
    // The emails after a stop are not tried: the claims taken ahead go back (their rows queued again), and each
    // waits as a job of its own until the same time.
    await send.release(ids.slice(i, claimedTo), STOP_REASON[stop.kind], log);
    for (; i < ids.length; i++) ownJob(ids[i], stopAt);
  }
  // Handed back: one job again, behind the urgent mail in the queue.
  if (handedBack.length > 0)
    own.push({ emailId: handedBack[0], emailIds: handedBack, projectId: payload.projectId, priority });

  if (stop?.kind === 'back-off') {
    if (stop.cause === 'throttled') deps.onThrottled?.();
    await deps.rateLimit(stop.forMs);
  }
  await enqueueSendJobs(deps.sendQueue, deps.config, own);
  if (stop?.kind === 'campaign-paused' && (await stop.resumed())) {
    // Resumed while these jobs were being added: the resume's wake-up may have missed them.
    await logged(
      promoteDelayedJobs(
        deps.sendQueue,
        own.map((e) => e.emailId),
      ),
      log,
      'paused send jobs promotion',
      'debug',
    );
  }
  const deferred = own.length - (handedBack.length > 0 ? 1 : 0);
  if (own.length > 0)
    log.debug({ deferred, handedBack: handedBack.length, stop: stop?.kind }, 'batch emails given jobs of their own');
  return {
    outcome: 'batch',
    emails: ids.length,
    outcomes,
    deferred,
    ...(handedBack.length > 0 ? { handedBack: handedBack.length } : {}),
  };
}
