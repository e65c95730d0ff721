/**
 * Scheduled sending: `scheduledAt` of `POST /v1/send` (at most {@link SCHEDULE_MAX_AHEAD_MS} ahead; a time not in
 * the future sends at once), and the cancel and reschedule of one email (`POST /emails/{id}/cancel`,
 * `PATCH /emails/{id}`).
 *
 * A scheduled email is a row `scheduled` with its `scheduled_at` (Postgres is the record) and a `send` job delayed
 * until then (`jobId` = email id). The claim takes the row only once its time has come, so a job that runs early (one
 * of an earlier time, before a reschedule) waits again; the reconciler gives every scheduled email due before its next
 * pass a job delayed to its time (`dueScheduledEmails`), so a lost job (Redis flushed, an enqueue that failed) costs
 * nothing. A cancel is one conditional UPDATE against the claim's: one of them wins the row, never both.
 *
 * @module
 */
import type { Queue } from 'bullmq';
import { AppError, ErrorCode, type FieldError } from '@mailroom/platform/errors';
import type { Logger } from '@mailroom/platform/logger';
import { SendPriority, type SendJobPayload } from '@mailroom/queues/catalog';
import type { QueueConfig } from '@mailroom/queues/config';
import { scheduleSendJob } from '@mailroom/queues/enqueue';
import { cancelEmail, rescheduleEmail, type ScheduleMove } from './queries/scheduled-emails';
import type { DbOrTx } from '@mailroom/db/client';

/** How far ahead an email may be scheduled: 30 days (ms). */
export const SCHEDULE_MAX_AHEAD_MS = 30 * 86_400_000;

/**
 * The time to send at of a `scheduledAt` given (ISO 8601 date-time, already checked by the schema's format):
 * `null` when it is not in the future (send at once), the time when it is at most 30 days ahead.
 *
 * @param field - the field named by the error (`scheduledAt`).
 * @returns the time (ms precision) or null, and the 422 field errors (more than 30 days ahead; not a date).
 */
export function scheduledTime(
  input: string | undefined,
  now = Date.now(),
  field = 'scheduledAt',
): { at: Date | null; errors: FieldError[] } {
  if (input === undefined) return { at: null, errors: [] };
  const at = new Date(input);
  if (Number.isNaN(at.getTime()))
    return { at: null, errors: [{ field, message: 'must be an ISO 8601 date-time', code: 'invalid_string' }] };
  if (at.getTime() - now > SCHEDULE_MAX_AHEAD_MS) {
    return { at: null, errors: [{ field, message: 'must be at most 30 days ahead', code: 'too_big' }] };
  }
  return { at: at.getTime() > now ? at : null, errors: [] };
}

/** What cancelling and rescheduling need: the database, the send queue and its settings, a logger. */
export interface ScheduleDeps {
  db: DbOrTx;
  sendQueue: Queue<SendJobPayload>;
  config: Pick<QueueConfig, 'sendMaxAttempts' | 'sendBackoffMs'>;
  log: Logger;
}

function refused(move: ScheduleMove & { moved: false }, action: string): AppError {
  if (move.status === undefined) return new AppError(ErrorCode.NOT_FOUND, 'Email not found');
  return new AppError(ErrorCode.INVALID_STATE, `The email is ${move.status}: it can no longer be ${action}`, {
    suggestion:
      'Only an email that has not started sending can be cancelled, and only a scheduled one rescheduled; read it at GET /emails/{id}.',
  });
}

/**
 * Cancels an email of the project that has not started sending (`scheduled`, or `queued` and never tried). Its job,
 * if Redis still has it, is removed; one that runs anyway finds the row final.
 *
 * @throws {@link AppError} 404 (no such email in the project), 409 `INVALID_STATE` (sending, or final, or tried
 *   before); the database's error.
 */
export async function cancelScheduled(deps: ScheduleDeps, projectId: string, emailId: string): Promise<void> {
  const move = await cancelEmail(deps.db, projectId, emailId);
  if (!move.moved) throw refused(move, 'cancelled');
  // Tidying only: a job left behind (running, or Redis down) does nothing.
  await deps.sendQueue
    .remove(emailId)
    .catch((err: unknown) => deps.log.debug({ err, emailId }, 'job of a cancelled email not removed'));
}

/**
 * Moves a scheduled email of the project to `at` (a time not in the future: due at once). Its delayed job is moved
 * to the new time; when that fails (Redis down) the reconciler gives it one before it is due, and a job of the old
 * time that runs first finds the email not due.
 *
 * @throws {@link AppError} 404 (no such email), 409 `INVALID_STATE` (no longer scheduled); the database's error.
 */
export async function reschedule(
  deps: ScheduleDeps,
  projectId: string,
  emailId: string,
  at: Date | null,
): Promise<void> {
  const runAt = at ?? new Date();
  const move = await rescheduleEmail(deps.db, projectId, emailId, runAt);
  if (!move.moved) throw refused(move, 'rescheduled');
  await scheduleSendJob(
    deps.sendQueue,
    deps.config,
    { emailId, projectId, priority: SendPriority.transactional },
    runAt,
  ).catch((err: unknown) =>
    deps.log.warn({ err, emailId }, 'job of a rescheduled email not moved; the reconciler will schedule it'),
  );
}
