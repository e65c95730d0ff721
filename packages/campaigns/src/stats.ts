/**
 * A campaign's statistics, progress and ETA (`GET /campaigns/{id}/stats`), from the counts of its emails.
 *
 * @module
 */
import type { DbOrTx } from '@mailroom/db/client';
import { campaignEmailCounts, type CampaignRow } from './queries/campaigns';

/** Status groups of the stats: a later status implies the earlier ones (an opened email was delivered). */
export const REACHED = {
  sent: ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained'],
  final: ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'complained', 'failed', 'cancelled', 'suppressed'],
} as const;

/** The window of the current send rate (ms). */
const RATE_WINDOW_MS = 60_000;

/** A campaign's statistics. */
export interface CampaignStats {
  recipients: number;
  /** Not yet handed to SES (queued or sending). */
  queued: number;
  /** Accepted by SES (including those later delivered, opened, bounced…). */
  sent: number;
  delivered: number;
  opened: number;
  clicked: number;
  bounced: number;
  complained: number;
  failed: number;
  cancelled: number;
  suppressed: number;
  unsubscribed: number;
  /** Contacts of the audience that got no email, by reason: `snoozed` (paused marketing email at fan-out). */
  skipped: { snoozed: number };
  /** Fractions (0–1) of `sent`, rounded to 4 places. */
  rates: { delivery: number; open: number; click: number; bounce: number; complaint: number; unsubscribe: number };
  /** Percentages (0–100) of `sent`, unrounded, as Plunk gives them; 0 before any is sent. */
  percent: { open: number; click: number; bounce: number; delivery: number };
  /** Fraction (0–1) of recipients whose email is final. */
  progress: number;
  /** False while recipients are still being added. */
  audienceComplete: boolean;
  /** Emails/s of this campaign over the last minute. */
  sendRate: number;
  /** Time to send the rest at the current rate (s); null when unknown or not SENDING. */
  etaSeconds: number | null;
}

/** The statistics of a campaign, counted now. */
export async function campaignStats(db: DbOrTx, c: CampaignRow): Promise<CampaignStats> {
  const { byStatus, recentlySent, delivered, opened, clicked } = await campaignEmailCounts(db, c.id, RATE_WINDOW_MS);
  const sum = (statuses: readonly string[]) => statuses.reduce((n, s) => n + (byStatus[s] ?? 0), 0);
  const sent = sum(REACHED.sent);
  const rate = (n: number) => (sent > 0 ? Math.round((n / sent) * 10_000) / 10_000 : 0);
  // Plunk's percentages: unrounded, of the emails sent.
  const percent = (n: number) => (sent > 0 ? (n / sent) * 100 : 0);
  const bounced = byStatus.bounced ?? 0;
  const queued = sum(['queued', 'sending']);
  const final = sum(REACHED.final);
  const sendRate = Math.round((recentlySent / (RATE_WINDOW_MS / 1000)) * 100) / 100;
  return {
    recipients: c.recipients,
    queued,
    sent,
    delivered,
    opened,
    clicked,
    bounced,
    complained: byStatus.complained ?? 0,
    failed: byStatus.failed ?? 0,
    cancelled: byStatus.cancelled ?? 0,
    suppressed: byStatus.suppressed ?? 0,
    unsubscribed: c.unsubscribed,
    skipped: { snoozed: c.skippedSnoozed },
    rates: {
      delivery: rate(delivered),
      open: rate(opened),
      click: rate(clicked),
      bounce: rate(bounced),
      complaint: rate(byStatus.complained ?? 0),
      unsubscribe: rate(c.unsubscribed),
    },
    percent: { open: percent(opened), click: percent(clicked), bounce: percent(bounced), delivery: percent(delivered) },
    progress: c.recipients > 0 ? Math.round((final / c.recipients) * 10_000) / 10_000 : c.status === 'SENT' ? 1 : 0,
    audienceComplete: c.fanoutDone,
    sendRate,
    etaSeconds:
      c.status !== 'SENDING'
        ? null
        : queued === 0 && c.fanoutDone
          ? 0
          : sendRate > 0 && c.fanoutDone
            ? Math.ceil(queued / sendRate)
            : null,
  };
}
