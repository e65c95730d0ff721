/**
 * What a client does to a campaign: create, edit, delete, send or schedule, cancel, and send a test. Each checks the
 * rules (rules.ts), moves state with one conditional UPDATE (`queries/campaigns.ts`), announces the move
 * (`campaign.sending`, `campaign.cancelled`) in the same transaction, and wakes or (re)schedules the campaign's
 * job; the worker's `campaign` job does the fan-out (fanout.ts).
 *
 * @module
 */
import { newId } from '@mailroom/platform/ids';
import { notFound, validationError } from '@mailroom/platform/errors';
import type { AudienceConfig } from '@mailroom/audiences/config';
import type { QueueConfig } from '@mailroom/queues/config';
import { type Logger, logged } from '@mailroom/platform/logger';
import { SendPriority } from '@mailroom/queues/catalog';
import { enqueueSendJobs, scheduleCampaignJob } from '@mailroom/queues/enqueue';
import { type Queues } from '@mailroom/queues/create';
import { senderError } from '@mailroom/mail/sender';
import { commitWithOutbox, type OutboxDeps } from '@mailroom/webhooks/outbox';
import { findContactByEmail } from '@mailroom/contacts/queries/contacts';
import { insertQueuedEmails } from '@mailroom/db/queries/queued-emails';
import type { DbOrTx } from '@mailroom/db/client';
import {
  cancelCampaign,
  createCampaign,
  deleteDraftCampaign,
  getCampaign,
  sendCampaign,
  updateCampaign,
  type CampaignRow,
  type NewCampaign,
} from './queries/campaigns';
import { campaignErrors, patchedCampaign, refused, requireEditable } from './rules';
import { abTestSettings, type AbTestInput, type AbVariantInput } from './ab-rules';

/** A create's or update's A/B test fields (`variants`, `abTest`), with `CAMPAIGN_AB_MIN_WAIT_SECONDS`. */
export interface AbGiven {
  variants?: AbVariantInput[] | null;
  abTest?: AbTestInput | null;
  minWaitSeconds: number;
}

/** What the campaign actions need: the database, the queues they wake, and the settings of the jobs they add. */
export interface CampaignActionDeps extends OutboxDeps {
  queues: Pick<Queues, 'webhook' | 'campaign' | 'send'>;
  config: Pick<QueueConfig, 'webhookRetryScheduleMs' | 'sendMaxAttempts' | 'sendBackoffMs'> &
    Pick<AudienceConfig, 'campaignQueueWindow'>;
}

/** The data of a `campaign.*` webhook: the campaign id, and `test: true` for a test campaign (as its emails' webhooks). */
export const campaignEventData = (c: { id: string; test: boolean }) => ({
  campaignId: c.id,
  ...(c.test ? { test: true } : {}),
});

/**
 * Gives a campaign its job: at `scheduledAt` when SCHEDULED, now otherwise. A Redis failure is logged, not thrown:
 * the transition is committed, and the reconciler gives a SENDING or due campaign its job once Redis is back.
 */
export async function scheduleCampaign(
  deps: { queues: Pick<Queues, 'campaign'> },
  c: CampaignRow,
  log: Pick<Logger, 'warn'>,
): Promise<void> {
  try {
    await scheduleCampaignJob(
      deps.queues.campaign,
      c,
      c.status === 'SCHEDULED' && c.scheduledAt ? c.scheduledAt : new Date(),
    );
  } catch (err) {
    log.warn({ err, campaignId: c.id }, 'campaign job not scheduled; the reconciler will');
  }
}

/** A campaign of the project. @throws {@link AppError} 404 when there is none. */
export async function requireCampaign(db: DbOrTx, projectId: string, id: string): Promise<CampaignRow> {
  const c = await getCampaign(db, projectId, id);
  if (!c) throw notFound('Campaign');
  return c;
}

/**
 * Creates a DRAFT campaign, with its A/B test when `ab` gives one. @throws {@link AppError} 422 listing every rule
 * it breaks ({@link campaignErrors}, `abTestSettings`).
 */
export async function createDraft(
  db: DbOrTx,
  projectId: string,
  input: NewCampaign & { fromEmail: string },
  ab?: AbGiven,
): Promise<CampaignRow> {
  const errors = await campaignErrors(db, projectId, input);
  const test = ab ? await abTestSettings(db, projectId, ab, null, ab.minWaitSeconds) : undefined;
  errors.push(...(test?.errors ?? []));
  if (errors.length > 0) throw validationError(errors);
  return createCampaign(db, projectId, { ...input, ...(test?.settings ? { abTest: test.settings } : {}) });
}

/**
 * Edits a DRAFT or SCHEDULED campaign; switching the audience type drops the other type's settings unless the
 * patch restates them; `ab` replaces the A/B test's variants or settings (null removes the test). @throws {@link AppError} 404, 409 `INVALID_STATE`, or 422 listing every rule the edited
 * campaign would break.
 */
export async function editCampaign(
  db: DbOrTx,
  projectId: string,
  id: string,
  patch: Partial<NewCampaign>,
  ab?: AbGiven,
): Promise<CampaignRow> {
  const current = await requireCampaign(db, projectId, id);
  requireEditable(current, 'update');
  const edited = patchedCampaign(current, patch);
  const errors = await campaignErrors(db, projectId, edited.merged);
  const test = ab ? await abTestSettings(db, projectId, ab, current.abTest, ab.minWaitSeconds) : undefined;
  errors.push(...(test?.errors ?? []));
  if (test?.settings !== undefined) edited.patch.abTest = test.settings;
  if (errors.length > 0) throw validationError(errors);
  const t = await updateCampaign(db, projectId, id, edited.patch);
  if (!t.ok) throw refused(t, 'update');
  return t.campaign;
}

/** Deletes a DRAFT campaign. @throws {@link AppError} 404, or 409 `INVALID_STATE` for any other state. */
export async function deleteDraft(db: DbOrTx, projectId: string, id: string): Promise<void> {
  const t = await deleteDraftCampaign(db, projectId, id);
  if (!t.ok) throw refused(t, 'delete');
}

/**
 * The campaign about to be sent or scheduled, with its audience and sender checked again.
 *
 * @throws {@link AppError} 404, 409 `INVALID_STATE` unless DRAFT or SCHEDULED, 422 listing the rules it breaks.
 */
export async function sendableCampaign(db: DbOrTx, projectId: string, id: string): Promise<CampaignRow> {
  const current = await requireCampaign(db, projectId, id);
  requireEditable(current, 'send');
  const errors = await campaignErrors(db, projectId, current);
  if (errors.length > 0) throw validationError(errors);
  return current;
}

/**
 * Sends a checked ({@link sendableCampaign}) campaign now (SENDING, announced as `campaign.sending`) or schedules
 * it for `at` when that is in the future (SCHEDULED; also reschedules), and gives it its job.
 *
 * @param test - sent with a test key: the campaign and its emails are test data (the sink, never SES).
 * @throws {@link AppError} 404 or 409 when the campaign moved meanwhile.
 */
export async function sendOrSchedule(
  deps: CampaignActionDeps,
  log: Logger,
  projectId: string,
  id: string,
  at: Date | null,
  test: boolean,
): Promise<CampaignRow> {
  const t = await commitWithOutbox(
    deps,
    log,
    projectId,
    (tx) => sendCampaign(tx, projectId, id, at && at.getTime() > Date.now() ? at : null, test),
    (r) =>
      r.ok && r.campaign.status === 'SENDING'
        ? [{ type: 'campaign.sending', data: campaignEventData(r.campaign) }]
        : [],
  );
  if (!t.ok) throw refused(t, 'send');
  await scheduleCampaign(deps, t.campaign, log);
  return t.campaign;
}

/**
 * Cancels a DRAFT, SCHEDULED, SENDING or PAUSED campaign (announced as `campaign.cancelled`) with its emails in the
 * send queue; its job is woken to sweep the rest of the audience (or removed when there are no recipients).
 *
 * @returns the campaign and how many queued emails were cancelled here.
 * @throws {@link AppError} 404, or 409 `INVALID_STATE` from SENT, CANCELLED or FAILED.
 */
export async function cancelNow(
  deps: CampaignActionDeps,
  log: Logger,
  projectId: string,
  id: string,
): Promise<{ campaign: CampaignRow; cancelledEmails: number }> {
  const t = await commitWithOutbox(
    deps,
    log,
    projectId,
    (tx) => cancelCampaign(tx, projectId, id),
    (r) => (r.ok ? [{ type: 'campaign.cancelled', data: campaignEventData(r.campaign) }] : []),
  );
  if (!t.ok) throw refused(t, 'cancel');
  // Wake the campaign's job now: it sweeps the emails the queue never received, then ends.
  if (t.campaign.recipients > 0) await scheduleCampaign(deps, t.campaign, log);
  else await logged(deps.queues.campaign.remove(id), log, 'cancelled campaign job removal', 'debug');
  return { campaign: t.campaign, cancelledEmails: t.cancelledEmails ?? 0 };
}

/**
 * The campaign about to be sent as a test, with its sender checked. @throws {@link AppError} 404, or 422 when the
 * sender is not on a verified domain.
 */
export async function testableCampaign(db: DbOrTx, projectId: string, id: string): Promise<CampaignRow> {
  const c = await requireCampaign(db, projectId, id);
  const sender = await senderError(db, projectId, c.fromEmail);
  if (sender) throw validationError([sender]);
  return c;
}

/**
 * Sends a campaign as it would be sent to each address of `to` (normalised, distinct; rendered with their contact
 * data when they are contacts), on the transactional lane, without touching the campaign or its statistics. A
 * Redis failure is logged: the reconciler enqueues the stored emails.
 *
 * @param test - a test key's request: the emails go to the sink.
 * @returns the email created for each address.
 */
export async function sendTestEmails(
  deps: CampaignActionDeps,
  log: Pick<Logger, 'warn'>,
  c: CampaignRow,
  to: string[],
  test: boolean,
): Promise<{ email: string; id: string }[]> {
  const db = deps.database.db;
  const rows = await Promise.all(
    to.map(async (email) => {
      const contact = await findContactByEmail(db, c.projectId, email);
      return {
        id: newId(),
        projectId: c.projectId,
        contactId: contact?.id ?? null,
        source: 'transactional' as const,
        marketing: true,
        tracking: c.tracking ?? null,
        toEmail: email,
        fromEmail: c.fromEmail,
        fromName: c.fromName,
        replyTo: c.replyTo,
        subject: c.subject,
        body: c.body,
        bodyFormat: 'html' as const,
        test,
        // As the campaign's own emails: its tags.
        tags: c.tags,
      };
    }),
  );
  await db.transaction((tx) => insertQueuedEmails(tx, rows));
  await enqueueSendJobs(
    deps.queues.send,
    deps.config,
    rows.map((r) => ({ emailId: r.id, projectId: c.projectId, priority: SendPriority.transactional })),
  ).catch((err) => log.warn({ err }, 'enqueue failed; the reconciler will enqueue these emails'));
  return rows.map((r) => ({ email: r.toEmail, id: r.id }));
}
