/**
 * Ownership of one email row while it is being sent: the claim (`queued → sending` with a fresh claim token and a
 * lease of `SEND_LEASE_MS`) and the finish (`sending →` the outcome, only with that token), with the webhook
 * deliveries a final outcome announces written in the same statement.
 *
 * The SQL is the data layer's ({@link claimEmail}, {@link finishEmail}); this module decides the token, what is
 * announced and how, so the send job and its tests share one way of doing it.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { NormalizedEmail } from '@mailroom/platform/address';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger } from '@mailroom/platform/logger';
import { type WebhookJobPayload } from '@mailroom/queues/catalog';
import { announceWebhookDeliveries } from '@mailroom/queues/enqueue';
import { claimEmail, finishEmail, type ClaimedEmail, type ClaimMiss } from '@mailroom/db/queries/emails';
import { type DbOrTx } from '@mailroom/db/client';

/**
 * A claimed email as the send path reads it: the recipient is the address stored when the email was accepted,
 * which every writer of `emails.to_email` normalised (`/v1/send`, campaigns and workflows from `contacts.email`,
 * the Plunk import), so it goes to the MIME builder and SES without being normalised again.
 */
export interface SendingEmail extends ClaimedEmail {
  toEmail: NormalizedEmail;
}

/** The claim on one email: the row, the token that finishes it, and when the lease began (epoch ms). */
export interface Claim {
  email: SendingEmail;
  token: string;
  claimedAt: number;
}

/** How a claimed email leaves `sending` (the data layer's outcomes). */
export type SendOutcome = Parameters<typeof finishEmail>[3];

/** The webhook event each final outcome announces. */
const WEBHOOK_TYPE: Partial<Record<SendOutcome['status'], string>> = {
  sent: 'email.sent',
  failed: 'email.failed',
  suppressed: 'email.suppressed',
};

/**
 * Claims an email for sending with a fresh token: a `queued` row, or a `sending` row whose lease (`leaseMs`) has
 * run out because its worker died (then `email.previousStatus` is `sending`).
 *
 * @returns the claim, or why there is none: `missing`, `final` (already sent, failed, …), `leased` (held by a
 *   live claim until `until`), `paused` (its campaign is paused; the row stays queued). A row found `queued` but
 *   not claimed (its campaign resumed between the claim and the look) is claimed once more.
 * @throws the database's error.
 */
export async function claimForSending(db: DbOrTx, emailId: string, leaseMs: number): Promise<{ ok: true; claim: Claim } | ({ ok: false } & ClaimMiss)> {
  const token = randomUUID();
  let claimedAt = Date.now();
  let claim = await claimEmail(db, emailId, token, leaseMs);
  if (!claim.ok && claim.kind === 'final' && claim.status === 'queued') {
    // The claim and the look at why it failed are two statements: a campaign resumed between them leaves a
    // queued row that is neither paused nor claimed. Claiming it once more settles it (skipping it would leave
    // the email without a job until the reconciler's next pass).
    claimedAt = Date.now();
    claim = await claimEmail(db, emailId, token, leaseMs);
  }
  if (!claim.ok) return claim;
  return { ok: true, claim: { email: claim.email as SendingEmail, token, claimedAt } };
}

/** What finishing a claim needs. */
export interface FinishDeps {
  config: Pick<QueueConfig, 'webhookRetryScheduleMs'>;
  db: DbOrTx;
  /** Producer of webhook deliveries (email.sent, email.failed, email.suppressed). */
  webhookQueue: Queue<WebhookJobPayload>;
}

/**
 * Moves a claimed email on to `outcome` with the claim's token, records the timeline entry and, for a final
 * outcome that announces one (`sent`, `failed`, `suppressed`), writes its webhook deliveries in the same
 * statement (the event is announced if and only if the status it announces committed), then enqueues them
 * (an enqueue failure is only logged: the reconciler enqueues them).
 *
 * @returns whether the row moved; `false` when the claim was lost (another worker re-claimed it after the lease,
 *   or the row is no longer `sending`).
 * @throws the database's error.
 */
export async function finishClaim(deps: FinishDeps, claim: Claim, outcome: SendOutcome, log: Logger): Promise<boolean> {
  const { email } = claim;
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
  const { finished, deliveries } = await finishEmail(deps.db, email.id, claim.token, outcome, type ? { type, data } : undefined);
  await announceWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, log);
  return finished;
}
