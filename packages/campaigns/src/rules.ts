/**
 * The rules of a campaign (docs/api/overview.md, campaign states): which states allow which moves, what a campaign's
 * audience and content must satisfy before it is stored or sent, and who it reaches.
 *
 * States: DRAFT → SCHEDULED → SENDING → SENT; PAUSED from SENDING (a guardrail or the SES quota) and back by
 * resume; CANCELLED from DRAFT, SCHEDULED, SENDING or PAUSED; FAILED when a scheduled campaign cannot start (its
 * segment was deleted). Every other move is 409 `INVALID_STATE`. The moves themselves are single conditional
 * UPDATEs (`queries/campaigns.ts`), so two requests (or a request and the worker) never both move a campaign.
 *
 * @module
 */
import { emailTagErrors } from '@mailroom/platform/email-tags';
import { AppError, ErrorCode, notFound, type FieldError } from '@mailroom/platform/errors';
import { templateSyntaxErrors } from '@mailroom/mail/templates';
import { contentLimitErrors } from '@mailroom/mail/content-limits';
import { senderError } from '@mailroom/mail/sender';
import type { CampaignStatus } from '@mailroom/db/schema';
import type { DbOrTx } from '@mailroom/db/client';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import type { Audience } from '@mailroom/audiences/audience';
import { getSegment } from '@mailroom/audiences/queries/segments';
import { missingTopics } from '@mailroom/contacts/queries/topics';
import type { CampaignRow, NewCampaign, Transition } from './queries/campaigns';

/** States in which a campaign's content and audience may change, and from which it may be sent or scheduled. */
export const EDITABLE_STATES: readonly CampaignStatus[] = ['DRAFT', 'SCHEDULED'];

/**
 * The 409 or 404 of a refused transition.
 *
 * @param action - the verb of the message (`send`, `update`…): "Cannot send a campaign that is SENT".
 */
export function refused(t: Exclude<Transition, { ok: true }>, action: string): AppError {
  if (t.reason === 'missing') return notFound('Campaign');
  return new AppError(ErrorCode.INVALID_STATE, `Cannot ${action} a campaign that is ${t.status}`, {
    suggestion:
      'See the campaign states: DRAFT → SCHEDULED → SENDING → SENT; PAUSED from SENDING, resumed to SENDING; CANCELLED from DRAFT, SCHEDULED, SENDING or PAUSED.',
  });
}

/**
 * Refuses to `action` a campaign that is not DRAFT or SCHEDULED. @throws {@link AppError} 409 `INVALID_STATE`.
 */
export function requireEditable(c: Pick<CampaignRow, 'status'>, action: string): void {
  if (!EDITABLE_STATES.includes(c.status)) throw refused({ ok: false, reason: 'state', status: c.status }, action);
}

/**
 * Refuses a test key an action that would send a live campaign's mail through SES (resume, retry-failed): test
 * keys never mail anyone. @throws {@link AppError} 403 `FORBIDDEN`.
 */
export function refuseTestKeyOnLive(
  auth: { mode: 'live' | 'test' },
  c: Pick<CampaignRow, 'test'>,
  action: string,
): void {
  if (auth.mode === 'test' && !c.test) {
    throw new AppError(ErrorCode.FORBIDDEN, `A test key cannot ${action} a live campaign: that would send real mail`, {
      suggestion: 'Use the live secret key (sk_…) of the project.',
    });
  }
}

/**
 * A campaign after a patch: the patch over the current row, where switching the audience type drops the other
 * type's settings unless the patch restates them. @returns the merged campaign and the patch to store.
 */
export function patchedCampaign(
  current: CampaignRow,
  patch: Partial<NewCampaign>,
): { merged: CampaignRow; patch: Partial<NewCampaign> } {
  const stored = { ...patch };
  const merged = { ...current, ...patch };
  if (patch.audienceType && patch.audienceType !== 'SEGMENT' && patch.segmentId === undefined)
    merged.segmentId = stored.segmentId = null;
  if (patch.audienceType && patch.audienceType !== 'FILTERED' && patch.audienceFilter === undefined)
    merged.audienceFilter = stored.audienceFilter = null;
  return { merged, patch: stored };
}

/**
 * Checks the audience and content rules of a campaign (as it would be after a create or patch): a SEGMENT
 * audience names a segment of the project, a FILTERED one a valid filter (its errors named under
 * `audienceFilter`), neither carries the other's setting; subject and body are valid templates; the sender is on
 * a verified domain (`@mailroom/mail/sender`); tags have distinct names, none reserved. @returns every problem, empty when none.
 */
export async function campaignErrors(
  db: DbOrTx,
  projectId: string,
  c: NewCampaign & { fromEmail: string },
): Promise<FieldError[]> {
  const errors: FieldError[] = [];
  if (c.audienceType === 'SEGMENT') {
    if (!c.segmentId)
      errors.push({ field: 'segmentId', message: 'is required when audienceType is SEGMENT', code: 'invalid_type' });
    else if (!(await getSegment(db, projectId, c.segmentId)))
      errors.push({ field: 'segmentId', message: 'is not a segment of this project', code: 'custom' });
  } else if (c.segmentId) {
    errors.push({ field: 'segmentId', message: 'is only used when audienceType is SEGMENT', code: 'custom' });
  }
  if (c.audienceType === 'FILTERED') {
    if (c.audienceFilter === null || c.audienceFilter === undefined) {
      errors.push({
        field: 'audienceFilter',
        message: 'is required when audienceType is FILTERED',
        code: 'invalid_type',
      });
    } else {
      try {
        parseSegmentFilter(c.audienceFilter, 'audienceFilter');
      } catch (err) {
        if (err instanceof AppError && err.options.errors) errors.push(...err.options.errors);
        else throw err;
      }
    }
  } else if (c.audienceFilter !== null && c.audienceFilter !== undefined) {
    errors.push({ field: 'audienceFilter', message: 'is only used when audienceType is FILTERED', code: 'custom' });
  }
  if (c.topicId && (await missingTopics(db, projectId, [c.topicId])).length > 0) {
    errors.push({ field: 'topicId', message: 'is not a topic of this project', code: 'custom' });
  }
  errors.push(...templateSyntaxErrors({ subject: c.subject, body: c.body }, (k) => k));
  // Campaign bodies are HTML: sizes and nesting depth the renderers can take (content-limits.ts).
  errors.push(...contentLimitErrors({ subject: c.subject, body: c.body }, 'html'));
  errors.push(...emailTagErrors(c.tags ?? undefined));
  const sender = await senderError(db, projectId, c.fromEmail);
  if (sender) errors.push(sender);
  return errors;
}

/**
 * Who a campaign reaches, as an {@link Audience} (`queries/audience.ts` compiles it). A FILTERED campaign's stored
 * filter is parsed here, once per read: it was validated when stored. Campaigns reach subscribed, unsuppressed
 * contacts only; the fan-out adds that (`fanoutBatch`).
 *
 * @returns the audience, or `undefined` for a SEGMENT campaign without a segment (deleted).
 */
export function campaignAudience(
  c: Pick<CampaignRow, 'audienceType' | 'segmentId' | 'audienceFilter'>,
): Audience | undefined {
  if (c.audienceType === 'ALL') return { type: 'ALL' };
  if (c.audienceType === 'FILTERED')
    return { type: 'FILTERED', filter: parseSegmentFilter(c.audienceFilter, 'audienceFilter') };
  return c.segmentId ? { type: 'SEGMENT', segmentId: c.segmentId } : undefined;
}
