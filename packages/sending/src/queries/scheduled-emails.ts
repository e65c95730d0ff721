/**
 * Scheduled emails (`POST /v1/send` with `scheduledAt`): the cancel and the reschedule of one email, and the
 * reconciler's look at the scheduled emails coming due. Each move is one conditional UPDATE, so it and the send
 * claim (`claimEmail`: `scheduled → sending` only once due) exclude each other on the row: a cancel that commits
 * first leaves nothing to claim, and a claim that commits first leaves nothing to cancel.
 *
 * @module
 */
import { sql } from 'drizzle-orm';
import type { DbOrTx } from '@mailroom/db/client';
import type { EmailSource, EmailStatus } from '@mailroom/db/schema';

/** What a cancel or reschedule did: `moved`, or the status that refused it (`undefined`: no such email in the project). */
export type ScheduleMove = { moved: true } | { moved: false; status: EmailStatus | undefined };

/** Reason stored on an email cancelled through the API (`error`, and the `cancelled` timeline entry's `reason`). */
export const CANCELLED_BY_REQUEST = 'cancelled by request';

async function refusal(db: DbOrTx, projectId: string, id: string): Promise<ScheduleMove> {
  const found = await db.execute<{ status: EmailStatus }>(
    sql`select status from emails where project_id = ${projectId}::uuid and id = ${id}::uuid`,
  );
  return { moved: false, status: found.rows[0]?.status };
}

/**
 * Cancels an email of the project that has not started sending: a `scheduled` one, or a `queued` one never
 * claimed (no attempt made). It becomes `cancelled` (final) with a `cancelled` timeline entry; a send job that
 * runs later finds it final and does nothing.
 *
 * @returns `moved`, or the status that refused it (`sending`, `sent`, `cancelled`, …, or a `queued` email that was
 *   already tried: SES may have it); `status` undefined when the project has no such email.
 * @throws the database's error.
 */
export async function cancelEmail(db: DbOrTx, projectId: string, id: string): Promise<ScheduleMove> {
  const result = await db.execute<{ id: string }>(sql`
    with moved as (
      update emails set status = 'cancelled', error = ${CANCELLED_BY_REQUEST}, updated_at = now()
      where project_id = ${projectId}::uuid and id = ${id}::uuid
        and (status = 'scheduled' or (status = 'queued' and attempts = 0 and claim_token is null))
      returning id, project_id
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), m.id, m.project_id, 'cancelled', ${JSON.stringify({ reason: CANCELLED_BY_REQUEST })}::jsonb from moved m
    )
    select id from moved
  `);
  return result.rows.length > 0 ? { moved: true } : refusal(db, projectId, id);
}

/**
 * Moves a `scheduled` email of the project to `scheduledAt` (which may be now: it is then due at once), with a
 * `rescheduled` timeline entry `{ scheduledAt, previous }`. A send job of the earlier time that runs before the
 * new one finds the email not due (the claim reads `scheduled_at`).
 *
 * @returns `moved`, or the status that refused it (anything but `scheduled`); `status` undefined when the project
 *   has no such email.
 * @throws the database's error.
 */
export async function rescheduleEmail(
  db: DbOrTx,
  projectId: string,
  id: string,
  scheduledAt: Date,
): Promise<ScheduleMove> {
  const at = scheduledAt.toISOString();
  const result = await db.execute<{ id: string }>(sql`
    with old as (
      select id, scheduled_at from emails where project_id = ${projectId}::uuid and id = ${id}::uuid and status = 'scheduled' for update
    ),
    moved as (
      update emails e set scheduled_at = ${at}::timestamptz, updated_at = now()
      from old where e.id = old.id and e.id = ${id}::uuid and e.project_id = ${projectId}::uuid and e.status = 'scheduled'
      returning e.id, e.project_id, old.scheduled_at as previous
    ),
    timeline as (
      insert into email_events (id, email_id, project_id, type, data)
      select mailroom_uuid_v7(clock_timestamp()), m.id, m.project_id, 'rescheduled',
        jsonb_build_object('scheduledAt', ${at}::text,
          'previous', to_char(m.previous at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      from moved m
    )
    select id from moved
  `);
  return result.rows.length > 0 ? { moved: true } : refusal(db, projectId, id);
}

/** A scheduled email coming due, for the reconciler. */
export interface DueScheduledEmail {
  id: string;
  projectId: string;
  source: EmailSource;
  scheduledAt: Date;
}

/**
 * Scheduled emails due within `withinMs` from now (Postgres's clock), or overdue, soonest first (then by id), after
 * `after` (keyset: the last row of the previous page), at most `limit`: the reconciler makes sure each has a job
 * delayed to its time. Uses the partial index `emails_scheduled_idx`.
 */
export async function dueScheduledEmails(
  db: DbOrTx,
  withinMs: number,
  after: DueScheduledEmail | null,
  limit: number,
): Promise<DueScheduledEmail[]> {
  const keyset = after
    ? sql`and (scheduled_at, id) > (${after.scheduledAt.toISOString()}::timestamptz, ${after.id}::uuid)`
    : sql``;
  const rows = await db.execute<{
    id: string;
    project_id: string;
    source: EmailSource;
    scheduled_at: string | Date;
  }>(sql`
    select id, project_id, source, scheduled_at from emails
    where status = 'scheduled' and scheduled_at <= now() + make_interval(secs => ${withinMs / 1000}) ${keyset}
    order by scheduled_at, id
    limit ${limit}
  `);
  return rows.rows.map((r) => ({
    id: r.id,
    projectId: r.project_id,
    source: r.source,
    scheduledAt: new Date(r.scheduled_at),
  }));
}
