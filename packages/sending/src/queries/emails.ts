/**
 * Email rows and their timeline: written by the API in the request's transaction, claimed and finished by the
 * worker (`email-batches.ts`, with the shapes of `email-claim.ts`). Status moves are single conditional UPDATEs, so
 * two processes can never both own a row.
 *
 * @module
 */
import { and, asc, eq, gte, inArray, sql } from 'drizzle-orm';
import { idLowerBound, idTimestampMs, isUuidV7, newId } from '@mailroom/platform/ids';
import type { DbOrTx } from '@mailroom/db/client';
import { attachments, campaigns, emailEvents, emails, type EmailSource } from '@mailroom/db/schema';

export type EmailRow = typeof emails.$inferSelect;

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

/**
 * Which of `ids` are still pending (`queued` or `sending`) now: a pass that read them pending a moment ago may have
 * raced their jobs, which sent them since.
 */
export async function stillPendingEmails(db: DbOrTx, ids: readonly string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const rows = await db.execute<{ id: string }>(sql`
    select id from emails where id = any(${sql.param([...ids])}::uuid[]) and status in ('queued', 'sending')`);
  return new Set(rows.rows.map((r) => r.id));
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
