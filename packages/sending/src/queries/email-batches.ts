/**
 * The claim and the finish of emails for sending, one implementation each for one email or several: a claim or
 * finish of one email ({@link claimEmail}, {@link finishEmail}) is a batch of one. Batched, the send worker's
 * concurrent jobs share one round trip, one commit and, for the finishes, one update of each `reputation_counts` row
 * (which every `sent` finish of a project's hour and domain updates, so single finishes queue on its lock). Rows are
 * locked in id order and counter rows in key order, so two batches cannot deadlock on them. Both run as named
 * statements whose text is built once, at load (`namedTemplate`; one text whatever the batch size: the rows travel
 * as arrays).
 *
 * @module
 */
import { eq, sql } from 'drizzle-orm';

const ph = (key: string) => sql.placeholder(key);
import { newId } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { campaigns, emails } from '@mailroom/db/schema';
import {
  CLAIM_RETURNING,
  finishEvent,
  toClaimedEmail,
  type ClaimedEmail,
  type ClaimMiss,
  type FinishOutcome,
} from './email-claim';
import { executeTemplate, namedTemplate } from '@mailroom/db/queries/named';
import { countReputation, countTagReputation } from '@mailroom/db/queries/reputation-counts';
import { type WebhookDeliveryRef } from '@mailroom/db/queries/webhook-delivery-ref';
import { endpointWants } from '@mailroom/db/queries/webhooks';

/** One claim of a batch: the email and the fresh token that will finish it. */
export interface ClaimRequest {
  emailId: string;
  token: string;
}

/** {@link claimEmails}'s statement, its text built once (`namedTemplate`): ids and tokens travel as arrays. */
const CLAIM = namedTemplate(
  sql`
    with want as (
      select * from unnest(${ph('ids')}::uuid[], ${ph('tokens')}::uuid[]) as w(id, token)
    ),
    p as (
      select id, status as previous_status from emails where id in (select id from want) order by id for update
    ),
    one as (
      -- The same email twice in a batch: only its first request claims.
      select distinct on (id) id, token from want order by id
    )
    update emails e set status = 'sending', claim_token = one.token, claimed_at = now(),
      attempts = e.attempts + 1, updated_at = now()
    from p join one on one.id = p.id
    where e.id = any(${ph('ids')}::uuid[]) and e.id = p.id and (e.status = 'queued'
      or (e.status = 'scheduled' and e.scheduled_at <= now())
      or (e.status = 'sending' and e.claimed_at < now() - make_interval(secs => ${ph('leaseSeconds')}::float8)))
      and not (e.status = 'queued' and exists (select 1 from campaigns k where k.id = e.campaign_id and k.status = 'PAUSED'))
    ${CLAIM_RETURNING}
  `,
);

/**
 * Claims every email of `requests` that may be claimed, each with its own token, in one statement: `queued →
 * sending`, `scheduled → sending` once its `scheduled_at` has passed (by Postgres's clock), or re-takes a `sending`
 * row whose lease (`leaseMs`) has expired because its worker died. A `cancelled` row is final and never claimed. A
 * queued email of a PAUSED campaign is not claimed: it waits, queued, for the resume. The claim token must be shown
 * to finish the row.
 *
 * A re-taken `sending` row may or may not have reached SES before its worker died (SES has no idempotency key);
 * it is sent again with the same Message-ID so receivers can collapse the copy. That window is the time between
 * SES accepting a message and the `sent` update committing (SES's response time plus one UPDATE), and only a hard
 * kill can fall into it.
 *
 * Named (one text whatever the batch size): parsed once per connection, and planned once where the connection
 * takes generic plans (the worker's send pool; `named.ts`). `e.id = any(<ids>)` as well as `e.id = p.id`: a
 * generic plan prunes the updated month partitions only by a parameter (planning the statement on the partitioned
 * `emails` took ten times its run).
 *
 * @returns the claimed emails by token. A request missing from it was not claimed (missing, final, leased,
 *   paused, or the same email twice in the batch): its caller asks {@link claimEmail} why (which claims it if it
 *   can by then).
 * @throws the database's error (then nothing was claimed).
 */
export async function claimEmails(
  db: DbOrTx,
  requests: readonly ClaimRequest[],
  leaseMs: number,
): Promise<Map<string, ClaimedEmail>> {
  const sorted = [...requests].sort((a, b) => (a.emailId < b.emailId ? -1 : a.emailId > b.emailId ? 1 : 0));
  const result = await executeTemplate<Record<string, unknown>>(db, CLAIM, {
    ids: sorted.map((r) => r.emailId),
    tokens: sorted.map((r) => r.token),
    leaseSeconds: leaseMs / 1000,
  });
  return new Map(result.rows.map((hit) => [hit.claim_token as string, toClaimedEmail(hit)]));
}

/** One finish of a batch. */
export interface FinishRequest {
  emailId: string;
  token: string;
  outcome: FinishOutcome;
  announce?: { type: string; data: Record<string, unknown> };
}

/** {@link finishEmails}'s statement, its text built once (`namedTemplate`): one array per column of the requests. */
const FINISH = namedTemplate(
  sql`
    with input as (
      select * from unnest(
        ${ph('ids')}::uuid[], ${ph('tokens')}::uuid[], ${ph('statuses')}::text[],
        ${ph('messageIds')}::text[],
        ${ph('subjects')}::text[],
        ${ph('connections')}::text[],
        ${ph('errors')}::text[],
        ${ph('failureKinds')}::text[],
        ${ph('eventIds')}::uuid[], ${ph('eventTypes')}::text[],
        ${ph('eventData')}::jsonb[],
        ${ph('hookTypes')}::text[],
        ${ph('hookPayloads')}::jsonb[]
      ) as i(id, token, status, message_id, rendered_subject, ses_connection, error, failure_kind, event_id, event_type, event_data, hook_type, hook_payload)
    ),
    moved as (
      update emails e set
        status = i.status,
        claim_token = null,
        message_id = i.message_id,
        ses_connection = coalesce(i.ses_connection, e.ses_connection),
        rendered_subject = coalesce(i.rendered_subject, e.rendered_subject),
        sent_at = case when i.status = 'sent' then now() else e.sent_at end,
        error = i.error,
        failure_kind = i.failure_kind,
        updated_at = now()
      from input i
      where e.id = i.id and e.claim_token = i.token and e.status = 'sending'
      returning e.id, e.project_id, e.from_email, e.campaign_id, e.marketing, e.test, e.tags, i.token, i.status, i.event_id, i.event_type,
        i.event_data, i.hook_type, i.hook_payload
    ),
    counted as (
      ${countReputation(sql`select project_id, from_email, campaign_id, marketing, 1 as sent, 0 as delivered, 0 as hard, 0 as soft, 0 as complaints
        from moved where status = 'sent' and not test`)}
    ),
    tag_counted as (
      ${countTagReputation(sql`select project_id, from_email, campaign_id, marketing, tags, 1 as sent, 0 as delivered, 0 as hard, 0 as soft, 0 as complaints
        from moved where status = 'sent' and not test and tags is not null`)}
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select event_id, id, project_id, event_type, event_data from moved
    ),
    hooks as (
      insert into webhook_deliveries (id, project_id, endpoint_id, event_type, payload)
      select mailroom_uuid_v7(clock_timestamp()), m.project_id, w.id, m.hook_type, m.hook_payload
      from moved m join webhook_endpoints w on w.project_id = m.project_id and ${endpointWants(sql`m.hook_type`)}
      where m.hook_type is not null
      returning id, project_id, generation
    )
    select (select array_agg(token::text) from moved) as moved,
      coalesce((select json_agg(json_build_object('id', id, 'projectId', project_id, 'generation', generation)) from hooks), '[]'::json) as deliveries
  `,
);

/**
 * Finishes every claim of `requests` in one statement: each row moves on to its outcome only with its token, gets
 * its timeline entry, its `sent` is counted (`reputation_counts`), and its webhook deliveries (`announce`, for the
 * project's subscribed endpoints) are written if and only if it moved, so the event is announced if and only if
 * the move committed.
 *
 * @returns per request (in `requests`' order) whether its row moved, and every webhook delivery to enqueue.
 * @throws the database's error (then nothing was written).
 */
export async function finishEmails(
  db: DbOrTx,
  requests: readonly FinishRequest[],
): Promise<{ finished: boolean[]; deliveries: WebhookDeliveryRef[] }> {
  const sorted = [...requests].sort((a, b) => (a.emailId < b.emailId ? -1 : a.emailId > b.emailId ? 1 : 0));
  const now = new Date().toISOString();
  const result = await executeTemplate<{ moved: string[] | null; deliveries: WebhookDeliveryRef[] }>(db, FINISH, {
    ids: sorted.map((r) => r.emailId),
    tokens: sorted.map((r) => r.token),
    statuses: sorted.map((r) => r.outcome.status),
    messageIds: sorted.map((r) => (r.outcome.status === 'sent' ? r.outcome.messageId : null)),
    subjects: sorted.map((r) => (r.outcome.status === 'sent' ? r.outcome.renderedSubject : null)),
    connections: sorted.map((r) => (r.outcome.status === 'sent' ? (r.outcome.connection ?? null) : null)),
    errors: sorted.map((r) => (r.outcome.status === 'sent' || r.outcome.status === 'queued' ? null : r.outcome.reason)),
    failureKinds: sorted.map((r) => ('failureKind' in r.outcome ? r.outcome.failureKind : null)),
    eventIds: sorted.map(() => newId()),
    eventTypes: sorted.map((r) => finishEvent(r.outcome).eventType),
    eventData: sorted.map((r) => JSON.stringify(finishEvent(r.outcome).eventData)),
    hookTypes: sorted.map((r) => r.announce?.type ?? null),
    hookPayloads: sorted.map((r) =>
      r.announce ? JSON.stringify({ type: r.announce.type, timestamp: now, data: r.announce.data }) : null,
    ),
  });
  const row = result.rows[0];
  const moved = new Set(row.moved ?? []);
  return { finished: requests.map((r) => moved.has(r.token)), deliveries: row.deliveries };
}

/**
 * Claims one email ({@link claimEmails} with a batch of one) and, when it was not claimed, says why: `missing`,
 * `final` (already sent, failed, cancelled, …), `leased` (held by a live claim until `until`), `scheduled` (not due
 * until `until`), `paused` (its campaign is paused; the row stays queued). The look is a second statement: a row
 * found `queued` may have been claimable by then (its campaign resumed), and is answered `final` with status
 * `queued`.
 *
 * @throws the database's error.
 */
export async function claimEmail(
  db: DbOrTx,
  emailId: string,
  token: string,
  leaseMs: number,
): Promise<{ ok: true; email: ClaimedEmail } | ({ ok: false } & ClaimMiss)> {
  const email = (await claimEmails(db, [{ emailId, token }], leaseMs)).get(token);
  if (email) return { ok: true, email };
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

/**
 * Finishes one claim ({@link finishEmails} with a batch of one): moves the email on to `outcome` if `token` still
 * holds it, with its timeline entry and, when `announce` is given, its webhook deliveries.
 *
 * @returns whether the row moved (false: the claim was lost), and the webhook deliveries to enqueue.
 * @throws the database's error (then nothing was written).
 */
export async function finishEmail(
  db: DbOrTx,
  emailId: string,
  token: string,
  outcome: FinishOutcome,
  announce?: { type: string; data: Record<string, unknown> },
): Promise<{ finished: boolean; deliveries: WebhookDeliveryRef[] }> {
  const { finished, deliveries } = await finishEmails(db, [
    { emailId, token, outcome, ...(announce ? { announce } : {}) },
  ]);
  return { finished: finished[0], deliveries };
}
