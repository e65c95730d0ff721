/**
 * Delivery feedback from SES (through SNS): each event moves its email forward, lands on the email's timeline
 * and the contact's events, feeds the suppression list and produces webhook deliveries, all inside the caller's
 * transaction (the one that also records the SNS message id, so a redelivered message changes nothing twice).
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import { DEFAULT_GUARDRAILS, type Guardrails } from '@mailroom/audiences/guardrail-defaults';
import { type SesFeedback } from '../ses-events';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import type { DbOrTx } from '@mailroom/db/client';
import { enforceCampaignGuardrail } from '@mailroom/campaigns/queries/guardrails';
import { countReputation, countTagReputation } from '@mailroom/db/queries/reputation-counts';
import { addSuppressions, type NewSuppression } from './suppressions';
import { addressScrubber } from '@mailroom/contacts/queries/erase';
import { unsubscribeContact } from '@mailroom/contacts/queries/unsubscribe';
import { recordWebhookEvents, type WebhookEvent } from '@mailroom/db/queries/webhooks';

/**
 * Status order for SES events: an email only moves to a later status, so a late Delivery never overwrites
 * Opened and an Open after a Click leaves Clicked. A Reject or rendering failure is `failed`.
 */
const STATUS_ORDER = ['sent', 'delivered', 'opened', 'clicked', 'bounced', 'failed', 'complained'] as const;

/** The status an event moves to, its timeline entry, and its contact event / webhook type. */
const EFFECTS: Record<
  SesFeedback['kind'],
  { status?: (typeof STATUS_ORDER)[number]; timeline?: string; event?: string } | undefined
> = {
  delivered: { status: 'delivered', timeline: 'delivered', event: 'email.delivered' },
  delivery_delayed: { timeline: 'delivery_delayed', event: 'email.delivery_delayed' },
  bounced: { status: 'bounced', timeline: 'bounced', event: 'email.bounced' },
  complained: { status: 'complained', timeline: 'complained', event: 'email.complained' },
  opened: { status: 'opened', timeline: 'opened', event: 'email.opened' },
  clicked: { status: 'clicked', timeline: 'clicked', event: 'email.clicked' },
  rejected: { status: 'failed', timeline: 'failed', event: 'email.failed' },
  rendering_failed: { status: 'failed', timeline: 'failed', event: 'email.failed' },
  sent: undefined,
  ignored: undefined,
};

/** Contact events recorded for segments and workflows (the rest stay on the email's timeline only). */
const CONTACT_EVENTS = new Set([
  'email.delivered',
  'email.opened',
  'email.clicked',
  'email.bounced',
  'email.complained',
]);

/** Soft-bounce suppression policy. */
export interface SoftBouncePolicy {
  /** Transient or undetermined bounces within the window that suppress the address. */
  limit: number;
  windowHours: number;
}

/** What applying an event did. */
export type FeedbackOutcome =
  | { applied: false; reason: 'unknown message' | 'no effect' }
  | {
      applied: true;
      emailId: string;
      projectId: string;
      status: string;
      suppressed: string[];
      unsubscribed: boolean;
      deliveries: WebhookDeliveryRef[];
    };

type EmailForFeedback = {
  id: string;
  project_id: string;
  contact_id: string | null;
  campaign_id: string | null;
  /** An A/B-tested campaign's variant (0-based) the email carried, else null. */
  variant: number | null;
  /** The stream (reputation is counted per stream). */
  marketing: boolean;
  to_email: string;
  from_email: string;
  message_id: string | null;
  /** The sender's tags (null: none). */
  tags: { name: string; value: string }[] | null;
  /** Its contact was erased (`DELETE /contacts/{id}`): the address must not come back through its feedback. */
  erased: boolean;
};

/**
 * The event as it may be stored and sent on for an email whose contact was erased: every mention of the
 * recipients' addresses (any case, percent-encoded, the local part where quoted) cut out of its details, and no
 * recipients left (`addressScrubber` in `erase.ts`).
 */
function scrubErased(fb: SesFeedback): SesFeedback {
  const scrub = addressScrubber([...fb.recipients, ...fb.destination]);
  return { ...fb, recipients: [], destination: [], details: scrub(fb.details) };
}

/**
 * Finds the email an event is about: by SES message id, or (an event racing our `sent` update) by the
 * `email_id` tag on a row with no message id yet. The row is locked for the rest of the transaction.
 *
 * The tag is tried first together with the message id: `emails` is partitioned by id (UUIDv7, time-ordered), so
 * `id = tag` reads one month's partition, where the message id alone probes the `message_id` index of every month.
 * A tag that names no row with that message id (a message sent before the tag existed, an imported email) falls
 * back to the message id alone.
 */
async function findEmail(db: DbOrTx, fb: SesFeedback): Promise<EmailForFeedback | undefined> {
  const cols = sql`id, project_id, contact_id, campaign_id, variant, marketing, to_email, from_email, message_id, tags, erased_at is not null as erased`;
  const tagged = fb.tags.email_id;
  const validTag = tagged !== undefined && /^[0-9a-f-]{36}$/i.test(tagged);
  if (validTag) {
    const byId = await db.execute<EmailForFeedback>(
      sql`select ${cols} from emails where id = ${tagged}::uuid and message_id = ${fb.messageId} for update`,
    );
    if (byId.rows[0]) return byId.rows[0];
  }
  const byMessage = await db.execute<EmailForFeedback>(
    sql`select ${cols} from emails where message_id = ${fb.messageId} for update`,
  );
  if (byMessage.rows[0]) return byMessage.rows[0];
  if (!validTag) return undefined;
  const byTag = await db.execute<EmailForFeedback>(sql`
    select ${cols} from emails where id = ${tagged}::uuid and message_id is null
      and (${fb.tags.project_id ?? null}::text is null or project_id::text = ${fb.tags.project_id ?? null}::text)
    for update
  `);
  return byTag.rows[0];
}

/**
 * Applies one SES event.
 *
 * - Status: forward only along {@link STATUS_ORDER}, and only from `sent` on (a row still `sending` is the
 *   worker's to finish). Opens and clicks are counted atomically; first delivery, open and click times kept.
 * - Timeline entry and (for delivered, opened, clicked, bounced, complained) the contact event `email.<x>`, both
 *   stamped with SES's event time.
 * - Suppression: a permanent bounce or a complaint suppresses the address at once; transient and undetermined
 *   bounces when the contact has had `policy.limit` of them within `policy.windowHours`. A complaint also
 *   unsubscribes the contact.
 * - An email whose contact was erased (`erased_at`): the event still moves its status and counters, but its
 *   details are scrubbed of the recipient's address before they reach the timeline or a webhook payload, and it
 *   suppresses nothing (the erasure is not undone by late feedback).
 * - Webhook deliveries for `email.<x>`, `contact.suppressed` and `contact.unsubscribed`.
 * - The campaign guardrail: a delivery, bounce or complaint of a SENDING campaign's email has its campaign judged
 *   on its outcomes (`enforceCampaignGuardrail`, with `guardrails` as the service defaults) and paused, with its
 *   `campaign.paused` deliveries, when a rate is over.
 */
export async function applySesFeedback(
  db: DbOrTx,
  event: SesFeedback,
  policy: SoftBouncePolicy,
  guardrails: Readonly<Guardrails> = DEFAULT_GUARDRAILS,
): Promise<FeedbackOutcome> {
  const effect = EFFECTS[event.kind];
  if (!effect) return { applied: false, reason: 'no effect' };
  const email = await findEmail(db, event);
  if (!email) return { applied: false, reason: 'unknown message' };
  const fb = email.erased ? scrubErased(event) : event;
  const at = fb.occurredAt.toISOString();
  const order = sql.param([...STATUS_ORDER]);

  const base = {
    emailId: email.id,
    contactId: email.contact_id,
    campaignId: email.campaign_id,
    // As on email.sent: an A/B-tested campaign's email says which variant it carried.
    ...(email.variant !== null && email.variant !== undefined ? { variant: email.variant } : {}),
    messageId: fb.messageId,
    to: email.to_email,
    from: email.from_email,
  };
  const tags = email.tags ?? [];
  const contactEvent = email.contact_id && CONTACT_EVENTS.has(effect.event!) ? effect.event! : null;
  const bounceType = fb.kind === 'bounced' ? (fb.bounceType === 'Permanent' ? 'hard' : 'soft') : null;
  // One statement: the status move and counters, the timeline entry and the contact event; `old` reads the row
  // as it was (the same snapshot), for the reputation counts written last (below).
  const updated = await db.execute<{
    status: string;
    test: boolean;
    undelivered: boolean;
    old_bounce: string | null;
    uncomplained: boolean;
  }>(sql`
    with old as (
      select test, delivered_at is null as undelivered, bounce_type as old_bounce, status <> 'complained' as uncomplained
      from emails where id = ${email.id}::uuid
    ),
    moved as (
      update emails set
        status = case when ${effect.status ?? null}::text is not null
            and array_position(${order}::text[], status) < array_position(${order}::text[], ${effect.status ?? null}::text)
          then ${effect.status ?? null}::text else status end,
        delivered_at = case when ${fb.kind} = 'delivered' then coalesce(delivered_at, ${at}::timestamptz) else delivered_at end,
        opened_at = case when ${fb.kind} = 'opened' then coalesce(opened_at, ${at}::timestamptz) else opened_at end,
        clicked_at = case when ${fb.kind} = 'clicked' then coalesce(clicked_at, ${at}::timestamptz) else clicked_at end,
        open_count = open_count + (${fb.kind} = 'opened')::int,
        click_count = click_count + (${fb.kind} = 'clicked')::int,
        -- A hard bounce after a soft one upgrades it (the guardrail judges hard bounces).
        bounce_type = case when ${bounceType}::text = 'hard' then 'hard' else coalesce(bounce_type, ${bounceType}::text) end,
        failure_kind = case when ${effect.status === 'failed'} then 'permanent' else failure_kind end,
        error = case when ${effect.status === 'failed'} then ${typeof fb.details.reason === 'string' ? fb.details.reason : fb.sesType} else error end,
        updated_at = now()
      where id = ${email.id}::uuid
      returning status
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data, created_at)
      values (mailroom_uuid_v7(${at}::timestamptz), ${email.id}::uuid, ${email.project_id}::uuid, ${effect.timeline!},
        ${JSON.stringify({ messageId: fb.messageId, ...fb.details })}::jsonb, ${at}::timestamptz)
    ),
    contact_event as (
      insert into events (id, project_id, contact_id, name, data, created_at)
      select mailroom_uuid_v7(${at}::timestamptz), ${email.project_id}::uuid, ${email.contact_id}::uuid, ${contactEvent}::text,
        ${JSON.stringify({ ...base, ...fb.details })}::jsonb, ${at}::timestamptz
      where ${contactEvent}::text is not null
    )
    select moved.status, old.* from moved, old
  `);
  const { status, ...was } = updated.rows[0];

  const toSuppress: NewSuppression[] = [];
  const recipients = fb.recipients.length > 0 ? fb.recipients : [email.to_email];
  const source = { sourceEmailId: email.id, details: { messageId: fb.messageId, ...fb.details } };
  if (email.erased) {
    // An erased email's feedback suppresses nothing: a new suppression would store the erased address again, and
    // the contact it protected is gone (suppressions made before the erasure stay; see `erase.ts`). Its contact
    // id is null, so no contact event, soft-bounce count or unsubscribe follows either.
  } else if (fb.kind === 'complained') {
    toSuppress.push(...recipients.map((r) => ({ email: r, reason: 'complaint' as const, ...source })));
  } else if (fb.kind === 'bounced' && fb.bounceType === 'Permanent') {
    toSuppress.push(...recipients.map((r) => ({ email: r, reason: 'hard_bounce' as const, ...source })));
  } else if (fb.kind === 'bounced' && email.contact_id) {
    const since = new Date(fb.occurredAt.getTime() - policy.windowHours * 3_600_000).toISOString();
    const counted = await db.execute<{ n: number }>(sql`
      select count(*)::int as n from events
      where contact_id = ${email.contact_id}::uuid and name = 'email.bounced'
        and data->>'bounceType' in ('Transient', 'Undetermined') and created_at >= ${since}::timestamptz
    `);
    const n = counted.rows[0].n;
    if (n >= policy.limit) {
      toSuppress.push({
        email: email.to_email,
        reason: 'soft_bounce',
        sourceEmailId: email.id,
        details: { ...source.details, softBounces: n, windowHours: policy.windowHours },
      });
    }
  }
  const added = await addSuppressions(db, email.project_id, toSuppress);

  let unsubscribed = false;
  if (fb.kind === 'complained') {
    unsubscribed = await unsubscribeContact(
      db,
      { emailId: email.id, projectId: email.project_id, contactId: email.contact_id, campaignId: email.campaign_id },
      'complaint',
    );
  }

  // `status` last: it is the email's status, whatever the event's details carry.
  const events: WebhookEvent[] = [
    { type: effect.event!, occurredAt: fb.occurredAt, data: { ...base, ...fb.details, tags, status } },
  ];
  for (const s of added) {
    events.push({
      type: 'contact.suppressed',
      data: {
        email: s.email,
        contactId: email.contact_id,
        reason: s.reason,
        sourceEmailId: email.id,
        suppressionId: s.id,
      },
    });
  }
  if (unsubscribed)
    events.push({
      type: 'contact.unsubscribed',
      data: {
        contactId: email.contact_id,
        email: email.to_email,
        method: 'complaint',
        emailId: email.id,
        campaignId: email.campaign_id,
      },
    });
  const deliveries = await recordWebhookEvents(db, email.project_id, events);
  // Reputation counts, each outcome once per email (the first delivery, the first soft bounce, the first hard
  // bounce even after a soft one, the first complaint). Written last, so the shared counts row of a campaign's
  // hour is locked only from here to the commit, not through the rest of this transaction.
  const counts = {
    delivered: fb.kind === 'delivered' && was.undelivered ? 1 : 0,
    hard: bounceType === 'hard' && was.old_bounce !== 'hard' ? 1 : 0,
    soft: bounceType === 'soft' && was.old_bounce === null ? 1 : 0,
    complaints: fb.kind === 'complained' && was.uncomplained ? 1 : 0,
  };
  if (!was.test && counts.delivered + counts.hard + counts.soft + counts.complaints > 0) {
    const outcome = sql`select ${email.project_id}::uuid as project_id, ${email.from_email}::text as from_email, ${email.campaign_id}::uuid as campaign_id,
        ${email.marketing}::boolean as marketing, ${tags.length > 0 ? JSON.stringify(tags) : null}::jsonb as tags,
        0 as sent, ${counts.delivered}::int as delivered, ${counts.hard}::int as hard, ${counts.soft}::int as soft, ${counts.complaints}::int as complaints`;
    // Per tag as well, in the same statement, for `GET /reputation?tag=`.
    await db.execute(
      tags.length > 0
        ? sql`with counted as (${countReputation(outcome)}) ${countTagReputation(outcome)}`
        : countReputation(outcome),
    );
  }
  // After the count: an outcome of a campaign email may pause its campaign, in this same transaction.
  if (email.campaign_id && (fb.kind === 'delivered' || fb.kind === 'bounced' || fb.kind === 'complained')) {
    deliveries.push(...(await enforceCampaignGuardrail(db, email.campaign_id, guardrails)).deliveries);
  }
  return {
    applied: true,
    emailId: email.id,
    projectId: email.project_id,
    status,
    suppressed: added.map((s) => s.email),
    unsubscribed,
    deliveries,
  };
}

/**
 * Records an SNS message id as processed (same transaction as its effects).
 *
 * @returns false when it was already recorded: a redelivery, to be acknowledged without effect.
 */
export async function recordSnsMessage(
  db: DbOrTx,
  m: { messageId: string; topicArn: string; type: string },
): Promise<boolean> {
  const rows = await db.execute(sql`
    insert into sns_messages (message_id, topic_arn, type) values (${m.messageId}, ${m.topicArn}, ${m.type})
    on conflict (message_id) do nothing
  `);
  return (rows.rowCount ?? 0) > 0;
}

/** Forgets SNS message ids older than `days` (SNS stops redelivering long before). @returns rows removed. */
export async function pruneSnsMessages(db: DbOrTx, days: number): Promise<number> {
  const rows = await db.execute(
    sql`delete from sns_messages where received_at < now() - make_interval(days => ${days})`,
  );
  return rows.rowCount ?? 0;
}
