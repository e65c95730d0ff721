/**
 * `POST /emails/{id}/cancel` and `PATCH /emails/{id}`: cancel an email that has not started sending, and move a
 * scheduled one to another time (`@mailroom/sending/schedule`).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { notFound, validationError } from '@mailroom/platform/errors';
import { cancelScheduled, reschedule, scheduledTime, type ScheduleDeps } from '@mailroom/sending/schedule';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import type { Logger } from '@mailroom/platform/logger';
import { IdParams } from './common';
import { Email, presentEmailWithTimeline } from './emails';

const RescheduleBody = Type.Object(
  {
    scheduledAt: Type.String({
      format: 'date-time',
      examples: ['2026-12-01T09:00:00Z'],
      description:
        'the new time (ISO 8601 date-time with a time zone), at most 30 days ahead; a time not in the future sends at once',
    }),
  },
  { additionalProperties: false },
);

/** Routes of this module. */
export function emailScheduleRoutes(deps: AppDeps) {
  const { db } = deps.database;
  const scheduleDeps = (log: Logger): ScheduleDeps => ({ db, sendQueue: deps.queues.send, config: deps.config, log });
  const answer = async (projectId: string, id: string) => {
    const found = await presentEmailWithTimeline(db, projectId, id);
    if (!found) throw notFound('Email');
    return { data: found };
  };
  return [
    route({
      method: 'post',
      path: '/emails/:id/cancel',
      operationId: 'cancelEmail',
      tag: 'Sending',
      summary: 'Cancel an email that has not started sending',
      description:
        'A `scheduled` email, or a `queued` one no worker has tried yet, becomes `cancelled` (final, with a `cancelled` timeline entry) ' +
        'and is never sent. 409 `INVALID_STATE` once it is sending or final (sent, failed, cancelled, …), or was tried before ' +
        '(SES may have it). A cancel and the send at the same moment never both happen: one of them wins the email.',
      auth: 'secret',
      params: IdParams,
      response: Email,
      status: 200,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        await cancelScheduled(scheduleDeps(log), auth.projectId, params.id);
        return answer(auth.projectId, params.id);
      },
    }),
    route({
      method: 'patch',
      path: '/emails/:id',
      operationId: 'updateEmail',
      tag: 'Sending',
      summary: 'Reschedule a scheduled email',
      description:
        'Moves a `scheduled` email to `scheduledAt` (a `rescheduled` timeline entry with the new and the previous time); it is sent ' +
        'then, never at the earlier time. 409 `INVALID_STATE` once it is no longer scheduled (sending, sent, cancelled, …).',
      auth: 'secret',
      params: IdParams,
      body: RescheduleBody,
      example: { scheduledAt: '2030-01-01T09:00:00Z' },
      response: Email,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        const { at, errors } = scheduledTime(body.scheduledAt);
        if (errors.length > 0) throw validationError(errors);
        await reschedule(scheduleDeps(log), auth.projectId, params.id, at);
        return answer(auth.projectId, params.id);
      },
    }),
  ];
}
