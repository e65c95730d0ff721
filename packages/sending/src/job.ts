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
import { type WebhookJobPayload } from '@mailroom/queues/catalog';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { QueueConfig } from '@mailroom/queues/config';
import type { SendingConfig } from './config';
import { type Logger } from '@mailroom/platform/logger';
import { storeTestMessage } from './queries/test-messages';
import { type Database } from '@mailroom/db/client';
import { type MailTransport } from './ses/transport';
import { createSendBatching } from './claim';
import { createClaimsAhead, type ClaimsAhead } from './claim-ahead';
import { composeMessage, type RenderedEmail } from './compose';
import type { QuotaAdmission } from './ses/quota-guard';
import { createSendSteps, sesTags, type PreparedSend } from './job-steps';
import { createBulkSender, gatheredPerTurn } from './job-bulk';

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
export type EmailSender = ((input: SendJobInput) => Promise<SendStep>) &
  Pick<ClaimsAhead, 'claimAhead' | 'release'> & {
    /**
     * Sends the emails of `inputs` (of one campaign job, claimed ahead) together: those that can go in one SES
     * `SendBulkEmail` call do (`job-bulk.ts`), the others one at a time. Absent when the transport has no bulk
     * calls or `SES_BULK_SEND` is off.
     * @returns the step of each email, in order: one for every input.
     */
    sendMany?: (inputs: SendJobInput[]) => Promise<SendStep[]>;
  };

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
  const ahead = createClaimsAhead(batching);
  const steps = createSendSteps(deps, batching);

  /**
   * Composes the message of `p` (from `rendered`, when the bulk path rendered it already) and sends it on its own
   * (`SendEmail` with raw content), or to the test sink.
   */
  const deliver = async (p: PreparedSend, rendered?: RenderedEmail): Promise<SendStep> => {
    const { email, connection, input } = p;
    const { log } = input;

    let raw: Buffer;
    let subject: string;
    try {
      ({ raw, subject } = await composeMessage(db, config, email, log, undefined, rendered));
    } catch (err) {
      return steps.composeFailed(p, err);
    }

    // Test mode: the very message built above goes to the sink instead of SES (no SES call, no rate-gate slot).
    if (email.test) {
      const testMessageId = `test-${email.id}`;
      await storeTestMessage(db, email.id, email.projectId, raw);
      await p.finish({ status: 'sent', messageId: testMessageId, renderedSubject: subject });
      log.info({ messageId: testMessageId }, 'test email delivered to the sink');
      return { kind: 'done', result: { outcome: 'sent', messageId: testMessageId } };
    }

    let sent: { messageId: string; connection?: string };
    try {
      sent = await transport.send({
        raw,
        from: email.fromEmail,
        to: [email.toEmail],
        tags: sesTags(email),
        // Transactional mail claimed mid-campaign takes the next slot of the rate gate, not the last of the claimed.
        priority: input.priority,
        connection,
        projectId: email.projectId,
        key: email.id,
        // The stream and tracking pick the SES configuration set (decided at acceptance: a retry takes the same).
        stream: email.marketing ? 'marketing' : 'transactional',
        tracking: email.tracking,
        ...(email.trackingTarget ? { trackingDomain: email.trackingTarget } : {}),
      });
    } catch (err) {
      return steps.sendFailed(p, err);
    }
    return steps.accepted(p, { ...sent, subject });
  };

  const sendBulk = config.sesBulkSend ? transport.sendBulk?.bind(transport) : undefined;
  const bulk =
    sendBulk &&
    createBulkSender({
      config,
      transport: { sendBulk, sendRate: transport.sendRate?.bind(transport) },
      steps,
      claim: (id) => ahead.take(id) ?? batching.claim(id),
      deliver,
    });
  // One-email jobs whose SES calls are ready in the same turn share SendBulkEmail calls (SES_BULK_COALESCE).
  const together = bulk && config.sesBulkCoalesce ? gatheredPerTurn(bulk.sendTogether) : undefined;

  const send = async (input: SendJobInput): Promise<SendStep> => {
    const prepared = await steps.prepare(input, await (ahead.take(input.emailId) ?? batching.claim(input.emailId)));
    if ('step' in prepared) return prepared.step;
    return together && bulk?.mayCoalesce(prepared.ready) ? together(prepared.ready) : deliver(prepared.ready);
  };

  const sendMany = bulk?.sendMany;
  return Object.assign(send, {
    claimAhead: ahead.claimAhead,
    release: ahead.release,
    ...(sendMany ? { sendMany } : {}),
  });
}
