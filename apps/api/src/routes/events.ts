/**
 * Contact events: `POST /v1/track` (public or secret key), `GET /events`, `GET /events/names`.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import {
  AppError,
  checkEventName,
  decodeCursor,
  decodeKeyCursor,
  EmailAddress,
  encodeCursor,
  encodeKeyCursor,
  ErrorCode,
  splitVariables,
  validationError,
} from '@mailroom/core';
import { findContactByEmail, listEventNames, listEvents, trackEvent } from '@mailroom/db';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { PageFields, PageQuery, Timestamp } from './common';

const TrackBody = Type.Object(
  {
    email: EmailAddress,
    event: Type.String({ minLength: 1, maxLength: 1000, description: 'event name: trimmed, 1–255 characters; email.*, contact.* and segment.* are reserved' }),
    subscribed: Type.Optional(Type.Boolean({ description: 'default true for new contacts; unchanged for existing ones when omitted' })),
    data: Type.Optional(
      Type.Record(Type.String({ maxLength: 200 }), Type.Unknown(), {
        description:
          'stored on the event and merged into the contact; `{ value, persistent: false }` values are stored on the event only. ' +
          'At most 32 levels of nesting in the whole body; no U+0000 in any string or key (422 naming the field)',
      }),
    ),
  },
  { additionalProperties: false },
);

const TrackResult = Type.Object({
  contact: Type.String({ description: 'contact id' }),
  event: Type.String({ description: 'event id' }),
  timestamp: Timestamp,
});

const Event = Type.Object({
  id: Type.String(),
  name: Type.String(),
  contactId: Type.String(),
  email: Type.String(),
  data: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
});

const EventQuery = Type.Object(
  {
    ...PageQuery,
    contactId: Type.Optional(Type.String({ format: 'uuid', description: 'only this contact’s events' })),
    email: Type.Optional(Type.String({ minLength: 3, maxLength: 320, description: 'only the events of the contact with this address (case-insensitive)' })),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'exact event name' })),
    since: Type.Optional(Type.String({ format: 'date-time', description: 'events at or after this time (ISO 8601)' })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'events at or before this time (ISO 8601)' })),
  },
  { additionalProperties: false },
);

const EventList = Type.Object({
  items: Type.Array(Event),
  ...PageFields,
  totalExact: Type.Boolean({ description: 'false when `total` is a lower bound (more than 10,000 matching events)' }),
});

const NameQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });

const EventName = Type.Object({
  name: Type.String(),
  count: Type.Integer({ description: 'events with this name' }),
  firstSeenAt: Timestamp,
  lastSeenAt: Timestamp,
});

const NameList = Type.Object({ items: Type.Array(EventName), ...PageFields });

/** Routes of this module. */
export function eventRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/v1/track',
      operationId: 'trackEvent',
      tag: 'Events',
      summary: 'Track an event for a contact',
      description:
        'Creates or updates the contact and records the event, in one statement. Accepts public (pk_) and secret ' +
        'keys. `data` is stored on the event and merged into the contact, except `{ value, persistent: false }` ' +
        'values, which are stored on the event only.',
      auth: 'any-key',
      body: TrackBody,
      response: TrackResult,
      status: 200,
      errors: [400, 401, 403, 409, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, db: tx }) => {
        const name = checkEventName(body.event);
        if (!name.ok) throw validationError([name.error]);
        const { render, persist } = splitVariables(body.data);
        const r = await trackEvent(tx, auth.projectId, {
          email: body.email,
          subscribed: body.subscribed,
          contactData: persist,
          name: name.name,
          eventData: render,
        });
        return { data: { contact: r.contact.id, event: r.eventId, timestamp: r.createdAt.toISOString() } };
      },
    }),
    route({
      method: 'get',
      path: '/events',
      operationId: 'listEvents',
      tag: 'Events',
      summary: 'List events, newest first',
      description: 'Keyset pagination; filters combine. `since` and `until` are inclusive, at millisecond precision.',
      auth: 'secret',
      query: EventQuery,
      response: EventList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const beforeId = query.cursor ? decodeCursor(query.cursor) : undefined;
        const since = query.since ? new Date(query.since) : undefined;
        const until = query.until ? new Date(query.until) : undefined;
        if (since && until && since > until) {
          throw new AppError(ErrorCode.INVALID_PARAMETERS, 'until: must not be before since', {
            errors: [{ field: 'until', message: 'must not be before since', code: 'custom' }],
          });
        }
        let contactId = query.contactId;
        if (query.email !== undefined) {
          const contact = await findContactByEmail(db, auth.projectId, query.email);
          const empty = { items: [], nextCursor: null, hasMore: false, total: 0, totalExact: true };
          if (!contact || (contactId && contactId !== contact.id)) return { data: empty };
          contactId = contact.id;
        }
        const page = await listEvents(db, auth.projectId, { limit: query.limit, beforeId, contactId, name: query.name, since, until });
        const last = page.items[page.items.length - 1];
        return {
          data: {
            items: page.items.map((e) => ({ ...e, createdAt: e.createdAt.toISOString() })),
            nextCursor: page.hasMore && last ? encodeCursor(last.id) : null,
            hasMore: page.hasMore,
            total: page.total,
            totalExact: page.totalExact,
          },
        };
      },
    }),
    route({
      method: 'get',
      path: '/events/names',
      operationId: 'listEventNames',
      tag: 'Events',
      summary: 'List distinct event names with counts',
      description: 'Alphabetical; counts and first/last seen are maintained as events are recorded and deleted.',
      auth: 'secret',
      query: NameQuery,
      response: NameList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const after = query.cursor ? decodeKeyCursor(query.cursor) : undefined;
        const page = await listEventNames(db, auth.projectId, { limit: query.limit, after });
        const last = page.items[page.items.length - 1];
        return {
          data: {
            items: page.items.map((n) => ({ ...n, firstSeenAt: n.firstSeenAt.toISOString(), lastSeenAt: n.lastSeenAt.toISOString() })),
            nextCursor: page.hasMore && last ? encodeKeyCursor(last.name) : null,
            hasMore: page.hasMore,
            total: page.total,
          },
        };
      },
    }),
  ];
}
