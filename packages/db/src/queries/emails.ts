/**
 * Email rows and their timeline: written by the API in the request's transaction, claimed and finished by the
 * worker. Status moves are single conditional UPDATEs, so two processes can never both own a row.
 *
 * @module
 */
import { trackingSql } from './tracking';
import { and, asc, eq, gte, inArray, sql } from 'drizzle-orm';
import { idLowerBound, idTimestampMs, isUuidV7, newId } from '@mailroom/platform/ids';
import { type WebhookDeliveryRef } from './webhook-delivery-ref';
import type { DbOrTx } from '../client';
import { endpointWants } from './webhooks';
import { attachments, campaigns, emailEvents, emails, type EmailSource, type EmailStatus } from '../schema';
import { countReputation, countTagReputation } from './reputation-counts';
import { executeNamed } from './named';
import { recipientKeySql, suppressionCauseSql, type SuppressionCause } from './suppression-rule';
import { topicSubscribedSql } from './topics';

export type EmailRow = typeof emails.$inferSelect;
export type NewEmail = Omit<typeof emails.$inferInsert, 'createdAt' | 'updatedAt' | 'status'>;

/** Stores attachments once for all recipients of a request. @returns their ids, in input order. */
export async function insertAttachments(
  db: DbOrTx,
  projectId: string,
  files: {
    filename: string;
    contentType: string;
    content: Buffer;
    contentId?: string | null;
    disposition?: 'inline' | 'attachment' | null;
  }[],
): Promise<string[]> {
  if (files.length === 0) return [];
  const rows = files.map((f) => ({
    id: newId(),
    projectId,
    filename: f.filename,
    contentType: f.contentType,
    contentId: f.contentId ?? null,
    disposition: f.disposition ?? null,
    size: f.content.length,
    content: f.content,
  }));
  await db.insert(attachments).values(rows);
  return rows.map((r) => r.id);
}

/** Loads attachments of a project by id, in the order of `ids`. */
export async function loadAttachments(db: DbOrTx, projectId: string, ids: string[]) {
  if (ids.length === 0) return [];
  const rows = await db
    .select()
    .from(attachments)
    .where(and(eq(attachments.projectId, projectId), inArray(attachments.id, ids)));
  const byId = new Map(rows.map((r) => [r.id, r]));
  return ids.map((id) => byId.get(id)).filter((r): r is NonNullable<typeof r> => r !== undefined);
}

/**
 * Inserts new `queued` emails and their first timeline entries (two statements, same transaction as the caller).
 * A recipient held back by the suppression rule is never written here: the callers decide it with
 * `suppressionCauseSql` first (a workflow step skips; an accepted send writes its `suppressed` row in
 * `writeTransactionalBatch`), and the worker's claim re-checks every queued email.
 */
export async function insertQueuedEmails(
  db: DbOrTx,
  rows: (Omit<NewEmail, 'tracking'> & { id: string; tracking?: boolean | null })[],
): Promise<void> {
  if (rows.length === 0) return;
  await db.insert(emails).values(
    rows.map(({ tracking, ...r }) => ({
      ...r,
      // `tracking` is the email's own override (null: its project's `tracking_mode` decides, in the statement).
      tracking: trackingSql(
        sql`${r.projectId}::uuid`,
        sql`${tracking ?? null}::boolean`,
        sql`${r.marketing ?? false}::boolean`,
      ),
      status: 'queued' as const,
      error: null,
    })),
  );
  await db.insert(emailEvents).values(
    rows.map((r) => ({
      emailId: r.id,
      projectId: r.projectId,
      type: 'queued',
      data: null,
    })),
  );
}

/** How much earlier than its email's id a timeline row's id may be (ms): SES's clock against ours. */
const TIMELINE_SKEW_MS = 86_400_000;

/**
 * An email of the project with its timeline (oldest first), or `undefined`. A campaign's email reads its subject
 * from the campaign, and its `queued` entry is its creation (fan-out writes no timeline row per recipient).
 */
export async function getEmailWithTimeline(db: DbOrTx, projectId: string, id: string) {
  const [found] = await db
    .select({
      email: emails,
      campaignSubject: sql<
        string | null
      >`coalesce(${campaigns.abTest} -> 'variants' -> (${emails.variant}::int) ->> 'subject', ${campaigns.subject})`,
    })
    .from(emails)
    .leftJoin(campaigns, eq(campaigns.id, emails.campaignId))
    .where(and(eq(emails.projectId, projectId), eq(emails.id, id)));
  if (!found) return undefined;
  const { email, campaignSubject } = found;
  const timeline: { type: string; data: Record<string, unknown> | null; createdAt: Date }[] = await db
    .select({ type: emailEvents.type, data: emailEvents.data, createdAt: emailEvents.createdAt })
    .from(emailEvents)
    // A timeline row is written after its email (SES's own event times included, a day of clock skew allowed): the
    // bound prunes the month partitions older than the email's, so the read and its plan stay the same however many
    // months of history there are. Only for a UUIDv7 email id (every id this service makes): another version's first
    // bits are no time (a row written by hand, say), and its timeline is read unbounded.
    .where(
      and(
        eq(emailEvents.projectId, projectId),
        eq(emailEvents.emailId, id),
        isUuidV7(id) ? gte(emailEvents.id, idLowerBound(idTimestampMs(id) - TIMELINE_SKEW_MS)) : undefined,
      ),
    )
    .orderBy(asc(emailEvents.id));
  if (email.campaignId && timeline[0]?.type !== 'queued')
    timeline.unshift({ type: 'queued', data: null, createdAt: email.createdAt });
  return { email: { ...email, subject: email.subject ?? campaignSubject ?? '' }, timeline };
}

/** snake_case column name → camelCase property, computed once per name (a claim maps every column of every row). */
const camelNames = new Map<string, string>();

function camelCase(row: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k in row) {
    let name = camelNames.get(k);
    if (name === undefined) camelNames.set(k, (name = k.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase())));
    out[name] = row[k];
  }
  return out;
}

/** A claimed email with what sending it needs. */
export interface ClaimedEmail extends EmailRow {
  /** Status before the claim: `sending` means a previous owner died after claiming (see {@link claimEmail}). */
  previousStatus: EmailStatus;
  projectDisabled: boolean;
  /** The project's key for unsubscribe tokens. */
  signingKey: Buffer;
  contactData: Record<string, unknown> | null;
  /**
   * For a campaign's email: the campaign's content (its A/B variant's, for an email with a `variant`) and status
   * (the row stores no copy of the body).
   */
  campaign: { subject: string; body: string; status: string } | null;
  /**
   * Why the email must not be sent now, by the suppression rule (`suppression-rule.ts`), or `null`: the recipient
   * went on the suppression list, or the contact of a marketing email (a MARKETING template's, a campaign's, a
   * marketing workflow email) unsubscribed, since the email was accepted (a paused campaign can hold its emails for
   * hours; a contact can unsubscribe between a `/v1/send` and its job).
   */
  suppression: SuppressionCause | null;
  /**
   * For tracked mail from a sending domain (exactly the From domain) whose custom tracking domain is ready: the
   * domain and the delivery connection its configuration sets were made on; else null.
   */
  trackingTarget: { domain: string; connection: string } | null;
}

/** Why {@link claimEmail} did not claim. */
export type ClaimMiss =
  | { kind: 'missing' }
  | { kind: 'final'; status: EmailStatus }
  | { kind: 'leased'; until: Date }
  /** A scheduled email not yet due (`until`: its `scheduled_at`); a rescheduled one's earlier job lands here. */
  | { kind: 'scheduled'; until: Date }
  | { kind: 'paused'; campaignId: string };

/**
 * What a claim reads back with the claimed row (`e`, the `emails` row; `p.previous_status`): the project, the
 * contact's data, the campaign's content, the suppression list and the subscription, in the claiming statement.
 */
export const CLAIM_RETURNING = sql`returning e.*, p.previous_status,
      (select disabled from projects where id = e.project_id) as project_disabled,
      (select signing_key from projects where id = e.project_id) as signing_key,
      (select data from contacts where id = e.contact_id) as contact_data,
      -- An A/B test's email carries its variant's subject and body; what a variant leaves out is the campaign's.
      (select json_build_object(
          'subject', coalesce(k.ab_test -> 'variants' -> (e.variant::int) ->> 'subject', k.subject),
          'body', coalesce(k.ab_test -> 'variants' -> (e.variant::int) ->> 'body', k.body),
          'status', k.status)
        from campaigns k where k.id = e.campaign_id) as campaign,
      ${suppressionCauseSql({
        projectId: sql`e.project_id`,
        emailKey: recipientKeySql('e'),
        marketing: sql`e.marketing`,
        subscribed: sql`(select c.subscribed from contacts c where c.id = e.contact_id)`,
        topicSubscribed: sql`(case when e.topic_id is not null and e.contact_id is not null then ${topicSubscribedSql(sql`e.project_id`, sql`e.contact_id`, sql`e.topic_id`)} end)`,
      })} as suppression,
      (select json_build_object('domain', d.tracking_domain, 'connection', d.tracking_connection) from domains d
        where e.tracking and d.domain = lower(split_part(e.from_email, '@', 2)) and d.project_id = e.project_id
          and d.tracking_ready_at is not null and d.tracking_connection is not null) as tracking_target`;

/** A row returned through {@link CLAIM_RETURNING} as a {@link ClaimedEmail}. */
export function toClaimedEmail(hit: Record<string, unknown>): ClaimedEmail {
  const {
    previous_status,
    project_disabled,
    signing_key,
    contact_data,
    campaign,
    suppression,
    tracking_target,
    ...row
  } = hit;
  return {
    ...(camelCase(row) as EmailRow),
    previousStatus: previous_status as EmailStatus,
    projectDisabled: project_disabled === true,
    signingKey: signing_key as Buffer,
    contactData: (contact_data as Record<string, unknown> | null) ?? null,
    campaign: (campaign as ClaimedEmail['campaign']) ?? null,
    suppression: (suppression as SuppressionCause | null) ?? null,
    trackingTarget: (tracking_target as ClaimedEmail['trackingTarget']) ?? null,
  };
}

/**
 * Atomically takes ownership of an email for sending: `queued → sending`, `scheduled → sending` once its
 * `scheduled_at` has passed (by Postgres's clock; earlier: `kind: 'scheduled'`), or re-takes a `sending` row whose
 * lease (`leaseMs`) has expired because its worker died. A `cancelled` row is final and never claimed. The claim token must be shown to finish the row.
 * A queued email of a PAUSED campaign is not claimed (`kind: 'paused'`): it waits, queued, for the resume.
 *
 * A re-taken `sending` row may or may not have reached SES before its worker died (SES has no idempotency key);
 * it is sent again with the same Message-ID so receivers can collapse the copy. That window is the time between
 * SES accepting a message and the `sent` update committing (SES's response time plus one UPDATE), and only a hard
 * kill can fall into it.
 */
export async function claimEmail(
  db: DbOrTx,
  emailId: string,
  token: string,
  leaseMs: number,
): Promise<{ ok: true; email: ClaimedEmail } | ({ ok: false } & ClaimMiss)> {
  // Named: parsed once per connection, and planned once where the connection takes generic plans (the worker's send
  // pool; `named.ts` says when Postgres's own choice does not). Planning this on the partitioned `emails` took
  // 1.0–1.1 ms against 0.1 ms to run (`EXPLAIN (ANALYZE, SUMMARY)`); a send whose claim goes alone runs it.
  // `e.id = <id>` as well as `e.id = p.id`: a generic plan prunes the updated partitions only by a parameter.
  const claimed = await executeNamed<Record<string, unknown>>(
    db,
    sql`
    update emails e set status = 'sending', claim_token = ${token}::uuid, claimed_at = now(),
      attempts = e.attempts + 1, updated_at = now()
    from (select id, status as previous_status from emails where id = ${emailId}::uuid for update) p
    where e.id = ${emailId}::uuid and e.id = p.id and (e.status = 'queued'
      -- A scheduled email only once its time has come: a job of an earlier schedule finds it not due.
      or (e.status = 'scheduled' and e.scheduled_at <= now())
      or (e.status = 'sending' and e.claimed_at < now() - make_interval(secs => ${leaseMs / 1000})))
      -- A paused campaign's emails stay queued until it resumes.
      and not (e.status = 'queued' and exists (select 1 from campaigns k where k.id = e.campaign_id and k.status = 'PAUSED'))
    ${CLAIM_RETURNING}
  `,
  );
  const hit = claimed.rows[0];
  if (hit) return { ok: true, email: toClaimedEmail(hit) };
  const [row] = await db
    .select({
      status: emails.status,
      claimedAt: emails.claimedAt,
      scheduledAt: emails.scheduledAt,
      campaignId: emails.campaignId,
      campaignStatus: campaigns.status,
    })
    .from(emails)
    .leftJoin(campaigns, eq(campaigns.id, emails.campaignId))
    .where(eq(emails.id, emailId));
  if (!row) return { ok: false, kind: 'missing' };
  if (row.status === 'queued' && row.campaignId && row.campaignStatus === 'PAUSED')
    return { ok: false, kind: 'paused', campaignId: row.campaignId };
  if (row.status === 'scheduled') return { ok: false, kind: 'scheduled', until: row.scheduledAt ?? new Date() };
  if (row.status === 'sending' && row.claimedAt) {
    return { ok: false, kind: 'leased', until: new Date(row.claimedAt.getTime() + leaseMs) };
  }
  return { ok: false, kind: 'final', status: row.status };
}

/** How a claimed email leaves `sending` ({@link finishEmail}). */
export type FinishOutcome =
  | {
      status: 'sent';
      messageId: string;
      renderedSubject: string;
      /** The delivery connection whose SES accepted it (`emails.ses_connection`); unset: left as it was. */
      connection?: string;
    }
  | { status: 'queued'; reason: string; retryInMs?: number }
  | { status: 'failed'; reason: string; failureKind: 'transient' | 'permanent' }
  | { status: 'cancelled'; reason: string }
  | { status: 'suppressed'; reason: string; cause: SuppressionCause };

/** The timeline entry of a finish: `deferred` for a move back to `queued`, else the new status. */
export function finishEvent(outcome: FinishOutcome): { eventType: string; eventData: Record<string, unknown> } {
  return {
    eventType: outcome.status === 'queued' ? 'deferred' : outcome.status,
    eventData:
      outcome.status === 'sent'
        ? { messageId: outcome.messageId }
        : {
            reason: outcome.reason,
            ...('retryInMs' in outcome && outcome.retryInMs !== undefined ? { retryInMs: outcome.retryInMs } : {}),
            ...('cause' in outcome ? { cause: outcome.cause } : {}),
          },
  };
}

/**
 * Moves a claimed email on, records the timeline entry and, when `announce` is given, writes the webhook
 * deliveries of that event for the project's subscribed endpoints: one statement (one round trip), so the event
 * is announced if and only if the move committed. Only the claim holder (`token`) can do it.
 *
 * @returns whether the row moved (false: the claim was lost), and the webhook deliveries to enqueue.
 */
export async function finishEmail(
  db: DbOrTx,
  emailId: string,
  token: string,
  outcome: FinishOutcome,
  announce?: { type: string; data: Record<string, unknown> },
): Promise<{ finished: boolean; deliveries: WebhookDeliveryRef[] }> {
  const sent = outcome.status === 'sent';
  const { eventType, eventData } = finishEvent(outcome);
  const hookType = announce?.type ?? null;
  // Named, as the claim: planning took 0.44–0.49 ms against 0.15–0.25 ms to run.
  const result = await executeNamed<{
    moved: number;
    deliveries: { id: string; projectId: string; generation: number }[];
  }>(
    db,
    sql`
    with moved as (
      update emails set
        status = ${outcome.status},
        claim_token = null,
        message_id = ${sent ? outcome.messageId : null},
        ses_connection = coalesce(${sent ? (outcome.connection ?? null) : null}::text, ses_connection),
        rendered_subject = coalesce(${sent ? outcome.renderedSubject : null}, rendered_subject),
        sent_at = case when ${sent}::boolean then now() else sent_at end,
        error = ${sent || outcome.status === 'queued' ? null : outcome.reason},
        failure_kind = ${'failureKind' in outcome ? outcome.failureKind : null},
        updated_at = now()
      where id = ${emailId}::uuid and claim_token = ${token}::uuid and status = 'sending'
      returning id, project_id, from_email, campaign_id, marketing, test, tags
    ),
    counted as (
      ${countReputation(sql`select project_id, from_email, campaign_id, marketing, 1 as sent, 0 as delivered, 0 as hard, 0 as soft, 0 as complaints
        from moved where ${sent}::boolean and not test`)}
    ),
    tag_counted as (
      ${countTagReputation(sql`select project_id, from_email, campaign_id, marketing, tags, 1 as sent, 0 as delivered, 0 as hard, 0 as soft, 0 as complaints
        from moved where ${sent}::boolean and not test and tags is not null`)}
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select ${newId()}::uuid, id, project_id, ${eventType}, ${JSON.stringify(eventData)}::jsonb from moved
    ),
    hooks as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
      select mailroom_uuid_v7(clock_timestamp()), m.project_id, w.id, ${hookType}::text,
        jsonb_build_object('type', ${hookType}::text, 'timestamp', ${new Date().toISOString()}::text, 'data', ${JSON.stringify(announce?.data ?? {})}::jsonb)
      from moved m join webhook_endpoints w on w.project_id = m.project_id and ${endpointWants(sql`${hookType}::text`)}
      where ${hookType}::text is not null
      returning id, project_id, generation
    )
    select (select count(*) from moved)::int as moved,
      coalesce((select json_agg(json_build_object('id', id, 'projectId', project_id, 'generation', generation)) from hooks), '[]'::json) as deliveries
  `,
  );
  const row = result.rows[0];
  return { finished: row.moved > 0, deliveries: row.deliveries };
}

/** A queued (or lease-expired sending) email the reconciler should make sure has a job. */
export interface PendingEmail {
  id: string;
  projectId: string;
  source: EmailSource;
}

/**
 * Pending emails older than `olderThanMs`, in creation order after `afterId` (keyset), for the reconciler.
 * Uses the partial index `emails_pending_idx`. A campaign's emails not yet handed to the send queue by its job
 * (beyond the campaign's `enqueue_cursor`) are not pending in this sense.
 */
export async function pendingEmails(
  db: DbOrTx,
  olderThanMs: number,
  afterId: string | null,
  limit: number,
): Promise<PendingEmail[]> {
  const rows = await db.execute<{ id: string; project_id: string; source: EmailSource }>(sql`
    select id, project_id, source from emails
    where status in ('queued', 'sending')
      and id > ${afterId ?? '00000000-0000-0000-0000-000000000000'}::uuid
      and updated_at < now() - make_interval(secs => ${olderThanMs / 1000})
      -- A campaign's emails beyond its feeding window wait as rows by design; its job enqueues them.
      and (campaign_id is null or contact_id is null
        or contact_id <= (select k.enqueue_cursor from campaigns k where k.id = emails.campaign_id))
    order by id
    limit ${limit}
  `);
  return rows.rows.map((r) => ({ id: r.id, projectId: r.project_id, source: r.source }));
}

/** One project's email counts by status over the last hour and the last day. */
export interface ProjectEmailStats {
  projectId: string;
  projectName: string;
  lastHour: Record<string, number>;
  lastDay: Record<string, number>;
}

/**
 * Email counts per project and status, for emails created in the last hour and the last day (operators'
 * `GET /admin/stats`). Email ids are UUIDv7 of their creation time, so the window is a primary-key range.
 */
export async function emailStatsByProject(db: DbOrTx, now = Date.now()): Promise<ProjectEmailStats[]> {
  const rows = await db.execute<{ project_id: string; name: string; status: string; hour: number; day: number }>(sql`
    select e.project_id, p.name, e.status,
      count(*) filter (where e.id >= ${idLowerBound(now - 3_600_000)}::uuid)::int as hour,
      count(*)::int as day
    from emails e join projects p on p.id = e.project_id
    where e.id >= ${idLowerBound(now - 86_400_000)}::uuid
    group by e.project_id, p.name, e.status
    order by e.project_id, e.status
  `);
  const byProject = new Map<string, ProjectEmailStats>();
  for (const r of rows.rows) {
    const s = byProject.get(r.project_id) ?? {
      projectId: r.project_id,
      projectName: r.name,
      lastHour: {},
      lastDay: {},
    };
    if (r.hour > 0) s.lastHour[r.status] = r.hour;
    s.lastDay[r.status] = r.day;
    byProject.set(r.project_id, s);
  }
  return [...byProject.values()];
}
