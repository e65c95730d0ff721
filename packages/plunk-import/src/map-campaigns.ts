/**
 * Plunk v2 campaigns and their emails → ours (see `map.ts` for the decisions: SCHEDULED campaigns arrive as DRAFT,
 * SENDING ones as CANCELLED, unfinished history emails as `cancelled`).
 *
 * @module
 */
import { normalizeEmail } from '@mailroom/platform/address';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { plunkRowId } from './ids';
import { reasonOf } from './steps';
import { type Row, fail, str, parent, contactRef, type MapContext } from './map-context';

const CAMPAIGN_STATUS: Record<string, { status: 'DRAFT' | 'SENT' | 'CANCELLED'; note?: string }> = {
  DRAFT: { status: 'DRAFT' },
  SCHEDULED: {
    status: 'DRAFT',
    note: 'was SCHEDULED in Plunk: imported as DRAFT (schedule it here once Plunk no longer sends)',
  },
  SENDING: { status: 'CANCELLED', note: 'was SENDING in Plunk: imported as CANCELLED with its history' },
  SENT: { status: 'SENT' },
  CANCELLED: { status: 'CANCELLED' },
};

/** A Plunk campaign, draft or history (see {@link CAMPAIGN_STATUS} for states that would send). */
export function mapCampaign(r: Row, ctx: MapContext) {
  const projectId = parent(ctx, 'project', r.projectId);
  if (!projectId) return fail(`its project ${r.projectId} was not imported`);
  const state = CAMPAIGN_STATUS[r.status];
  if (!state) return fail(`unknown status ${r.status}`);
  const from = str(r.from);
  if (!from) return fail('campaign without a from address');
  const audienceType =
    r.audienceType === 'SEGMENT' || r.audienceType === 'FILTERED' ? r.audienceType : ('ALL' as const);
  let segmentId: string | null = null;
  if (audienceType === 'SEGMENT') {
    segmentId = parent(ctx, 'segment', r.segmentId) ?? null;
    if (!segmentId) return fail(`its audience segment ${r.segmentId ?? '(none)'} was not imported`);
  }
  if (audienceType === 'FILTERED') {
    try {
      parseSegmentFilter(r.audienceCondition, 'audienceCondition');
    } catch (err) {
      return fail(reasonOf(err));
    }
  }
  const ended = r.sentAt ?? r.updatedAt ?? r.createdAt;
  const finished = state.status !== 'DRAFT';
  return {
    ok: true as const,
    row: {
      id: plunkRowId('campaign', r.id, r.createdAt),
      projectId,
      name: str(r.name) ?? 'Untitled',
      description: str(r.description),
      subject: r.subject ?? '',
      body: r.body ?? '',
      fromEmail: from,
      fromName: str(r.fromName),
      replyTo: str(r.replyTo),
      audienceType,
      segmentId,
      audienceFilter: audienceType === 'FILTERED' ? r.audienceCondition : null,
      status: state.status,
      startedAt: state.status === 'SENT' ? ended : null,
      completedAt: state.status === 'SENT' ? ended : null,
      cancelledAt: state.status === 'CANCELLED' ? (r.updatedAt ?? ended) : null,
      recipients: Number(r.totalRecipients ?? 0),
      unsubscribed: Number(r.unsubscribedCount ?? 0),
      // A finished campaign's audience is done: nothing resumes its fan-out.
      fanoutDone: finished,
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
    ...(state.note ? { note: `campaign ${r.id} ${state.note}` } : {}),
  };
}

const EMAIL_STATUS: Record<string, string> = {
  PENDING: 'cancelled',
  SENDING: 'cancelled',
  SENT: 'sent',
  DELIVERED: 'delivered',
  RECEIVED: 'delivered',
  OPENED: 'opened',
  CLICKED: 'clicked',
  BOUNCED: 'bounced',
  COMPLAINED: 'complained',
  FAILED: 'failed',
};

/** One recipient of a Plunk campaign (its history); unfinished ones (PENDING/SENDING) become `cancelled`. */
export function mapCampaignEmail(r: Row, ctx: MapContext) {
  const campaignId = parent(ctx, 'campaign', r.campaignId);
  if (!campaignId) return fail(`its campaign ${r.campaignId} was not imported`);
  const projectId = parent(ctx, 'project', r.projectId);
  const contactId = contactRef(ctx, r);
  if (!contactId || !projectId) return fail(`its contact ${r.contactId} was not imported`);
  const status = EMAIL_STATUS[r.status];
  if (!status) return fail(`unknown status ${r.status}`);
  return {
    ok: true as const,
    row: {
      id: plunkRowId('email', r.id, r.createdAt),
      projectId,
      contactId,
      campaignId,
      marketing: true,
      source: 'campaign' as const,
      toEmail: normalizeEmail(String(r.toEmail)),
      toName: str(r.toName),
      fromEmail: str(r.from) ?? '',
      fromName: str(r.fromName),
      replyTo: str(r.replyTo),
      renderedSubject: str(r.subject),
      status: status as 'sent',
      messageId: str(r.messageId),
      error:
        str(r.error) ??
        (r.status === 'PENDING' || r.status === 'SENDING' ? 'imported from Plunk before it was sent' : null),
      sentAt: r.sentAt ?? null,
      deliveredAt: r.deliveredAt ?? null,
      openedAt: r.openedAt ?? null,
      clickedAt: r.clickedAt ?? null,
      openCount: Number(r.opens ?? 0),
      clickCount: Number(r.clicks ?? 0),
      createdAt: r.createdAt,
      updatedAt: r.updatedAt ?? r.createdAt,
    },
  };
}
