/**
 * Ownership of one email row while it is being sent: the claim (`queued → sending` with a fresh claim token and a
 * lease of `SEND_LEASE_MS`) and the finish (`sending →` the outcome, only with that token), with the webhook
 * deliveries a final outcome announces written in the same statement.
 *
 * The SQL is the data layer's ({@link claimEmail}, {@link finishEmail}, and their batched forms); this module decides
 * the token, what is announced and how, so the send job and its tests share one way of doing it.
 * {@link createSendBatching} folds the claims and finishes of a process's concurrent jobs into one statement each
 * (`batcher.ts`).
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Queue } from 'bullmq';
import type { NormalizedEmail } from '@mailroom/platform/address';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger } from '@mailroom/platform/logger';
import { type WebhookJobPayload } from '@mailroom/queues/catalog';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { type ClaimedEmail, type ClaimMiss } from './queries/email-claim';
import { claimEmail, claimEmails, finishEmail, finishEmails, type FinishRequest } from './queries/email-batches';
import { type DbOrTx } from '@mailroom/db/client';
import { Batcher } from '@mailroom/platform/batcher';

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
 * Claims an email for sending with a fresh token: a `queued` row, a `scheduled` one whose time has come, or a `sending` row whose lease (`leaseMs`) has
 * run out because its worker died (then `email.previousStatus` is `sending`).
 *
 * @returns the claim, or why there is none: `missing`, `final` (already sent, failed, cancelled, …), `leased` (held by a
 *   live claim until `until`), `scheduled` (not due until `until`), `paused` (its campaign is paused; the row stays queued). A row found `queued` but
 *   not claimed (its campaign resumed between the claim and the look) is claimed once more.
 * @throws the database's error.
 */
export async function claimForSending(db: DbOrTx, emailId: string, leaseMs: number): Promise<ClaimResult> {
  const token = randomUUID();
  let claimedAt = Date.now();
  let claim = await claimEmail(db, emailId, token, leaseMs);
  // A scheduled row found due by the look but not by the claim (its time came between the two) is claimed again too.
  const dueSince = !claim.ok && claim.kind === 'scheduled' && claim.until.getTime() <= Date.now();
  if (dueSince || (!claim.ok && claim.kind === 'final' && claim.status === 'queued')) {
    // The claim and the look at why it failed are two statements: a campaign resumed between them leaves a
    // queued row that is neither paused nor claimed. Claiming it once more settles it (skipping it would leave
    // the email without a job until the reconciler's next pass).
    claimedAt = Date.now();
    claim = await claimEmail(db, emailId, token, leaseMs);
  }
  if (!claim.ok) return claim;
  return { ok: true, claim: { email: claim.email as SendingEmail, token, claimedAt } };
}

/** What {@link claimForSending} answers. */
export type ClaimResult = { ok: true; claim: Claim } | ({ ok: false } & ClaimMiss);

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
  const r = finishRequest(claim, outcome);
  const { finished, deliveries } = await finishEmail(deps.db, r.emailId, r.token, r.outcome, r.announce);
  await relayWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, log);
  return finished;
}

/** The data layer's finish of `claim` with `outcome`, with the webhook event it announces. */
function finishRequest(claim: Claim, outcome: SendOutcome): FinishRequest {
  const { email } = claim;
  const type = WEBHOOK_TYPE[outcome.status];
  const data = {
    emailId: email.id,
    contactId: email.contactId,
    campaignId: email.campaignId,
    ...(email.variant !== null && email.variant !== undefined ? { variant: email.variant } : {}),
    messageId: 'messageId' in outcome ? outcome.messageId : null,
    to: email.toEmail,
    from: email.fromEmail,
    status: outcome.status,
    tags: email.tags ?? [],
    ...('reason' in outcome ? { reason: outcome.reason } : {}),
    ...('cause' in outcome ? { cause: outcome.cause } : {}),
    ...(email.test ? { test: true } : {}),
  };
  return { emailId: email.id, token: claim.token, outcome, ...(type ? { announce: { type, data } } : {}) };
}

/** Statements of each kind (claims, finishes; batched or on their own) that the batcher runs at once in one process. */
export const SEND_BATCHES_IN_FLIGHT = 2;

/** The claims and finishes of one worker process, each batched across its concurrent send jobs. */
export interface SendBatching {
  /** {@link claimForSending}, batched. */
  claim(emailId: string): Promise<ClaimResult>;
  /** {@link finishClaim}, batched: the batch's webhook deliveries are enqueued together, once it committed. */
  finish(claim: Claim, outcome: SendOutcome, log: Logger): Promise<boolean>;
  /** Whether a finish given now would wait behind a running batch rather than start at once. */
  finishWouldWait(): boolean;
}

/**
 * Batches claims and finishes ({@link Batcher}): up to `batchSize` of each in one statement, at most two
 * statements of each kind at once. The claims and finishes given in one turn of the event loop go together even
 * while a slot is free (`sameTurn`): the jobs BullMQ starts together, and the SES answers read in one poll, are
 * one statement, not one alone and the rest after it (measured with `npm run bench -- worker`: 0.76–0.92 Postgres
 * commits per email before, 0.52–0.64 after). A claim the batch did not take (missing, final, leased, paused) is asked again
 * on its own through {@link claimForSending}, which says why (or claims it, if it can by then). `batchSize` 1
 * runs every claim and finish on its own. `observe` is told the size of each statement's batch as it starts.
 */
export function createSendBatching(
  deps: FinishDeps & {
    /**
     * Where the claims and finishes the batcher runs go, batched or on their own (default `db`): the worker's pool
     * with generic plans (`createDatabase`'s `genericPlans`). Postgres's own choice re-planned them at every call:
     * always for the batched ones, and for the lone ones once `emails` has a year of month partitions
     * (docs/decisions/0004-generic-plan-send-pool.md). A claim the batcher could not take is asked about again on `db`
     * (`claimForSending`, outside the batcher's bound on statements at once).
     */
    claimDb?: DbOrTx;
  },
  leaseMs: number,
  batchSize: number,
  observe?: (kind: 'claim' | 'finish', size: number) => void,
): SendBatching {
  const options = { maxBatch: batchSize, maxInFlight: SEND_BATCHES_IN_FLIGHT, sameTurn: true };
  const claimDb = deps.claimDb ?? deps.db;
  const claims = new Batcher<string, ClaimResult | undefined>(
    async (emailIds) => {
      const requests = emailIds.map((emailId) => ({ emailId, token: randomUUID() }));
      const claimedAt = Date.now();
      const claimed = await claimEmails(claimDb, requests, leaseMs);
      return requests.map(({ token }) => {
        const email = claimed.get(token);
        return email ? { ok: true as const, claim: { email: email as SendingEmail, token, claimedAt } } : undefined;
      });
    },
    (emailId) => claimForSending(claimDb, emailId, leaseMs),
    { ...options, observe: observe && ((n) => observe('claim', n)) },
  );
  type Finish = { request: FinishRequest; log: Logger };
  const finishes = new Batcher<Finish, boolean>(
    async (items) => {
      const { finished, deliveries } = await finishEmails(
        claimDb,
        items.map((i) => i.request),
      );
      await relayWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, items[0].log);
      return finished;
    },
    async ({ request: r, log }) => {
      const { finished, deliveries } = await finishEmail(claimDb, r.emailId, r.token, r.outcome, r.announce);
      await relayWebhookDeliveries(deps.webhookQueue, deps.config, deliveries, log);
      return finished;
    },
    { ...options, observe: observe && ((n) => observe('finish', n)) },
  );
  return {
    claim: async (emailId) => (await claims.run(emailId)) ?? claimForSending(deps.db, emailId, leaseMs),
    finish: (claim, outcome, log) => finishes.run({ request: finishRequest(claim, outcome), log }),
    finishWouldWait: () => finishes.busy,
  };
}
