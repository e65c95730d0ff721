/**
 * Contact events: `POST /v1/track` (public or secret key), `GET /events`, `GET /events/names`.
 *
 * Plunk v2 compatibility (docs/api/overview.md): `POST /events/track` records an event the way `/v1/track` does and
 * also takes Plunk's body (`name` for `event`, `contactId` instead of `email`); `GET /events` takes `eventName` (for
 * `name`) and `page`/`pageSize`, and answers `events` beside `items`; `GET /events/names` answers `eventNames` too.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { EmailAddress } from '@mailroom/contacts/contacts';
import { trackBatcher, trackContactEvent, trackPlunkEvent } from '@mailroom/contacts/events';
import { decodeCursor, decodeKeyCursor, encodeCursor, encodeKeyCursor } from '@mailroom/platform/ids';
import { findContactByEmail } from '@mailroom/contacts/queries/contacts';
import { listEventNames, listEvents } from '@mailroom/contacts/queries/events';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import {
  PageFields,
  PageQuery,
  PlunkPageFields,
  PlunkPageQuery,
  plunkPageFields,
  resolvePaging,
  Timestamp,
} from './common';

const TrackBody = Type.Object(
  {
    email: EmailAddress,
    event: Type.String({
      minLength: 1,
      maxLength: 1000,
      description: 'event name: trimmed, 1–255 characters; email.*, contact.* and segment.* are reserved',
    }),
    subscribed: Type.Optional(
      Type.Boolean({ description: 'default true for new contacts; unchanged for existing ones when omitted' }),
    ),
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

const EventNameText = Type.String({
  minLength: 1,
  maxLength: 1000,
  description: 'event name: trimmed, 1–255 characters; email.*, contact.* and segment.* are reserved',
});

/** `POST /events/track`: our body, or Plunk v2's (`name` for `event`, `contactId` for `email`). */
const EventsTrackBody = Type.Object(
  {
    email: Type.Optional(EmailAddress),
    contactId: Type.Optional(
      Type.String({ format: 'uuid', description: "Plunk's form: an existing contact's id, instead of `email`" }),
    ),
    event: Type.Optional(EventNameText),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 1000, description: "Plunk's name for `event`" })),
    subscribed: TrackBody.properties.subscribed,
    data: TrackBody.properties.data,
  },
  { additionalProperties: false },
);

const TrackResult = Type.Object({
  contact: Type.String({ description: 'contact id' }),
  event: Type.String({ description: 'event id' }),
  timestamp: Timestamp,
});

const EventsTrackResult = Type.Object({
  ...TrackResult.properties,
  id: Type.String({ description: "the event id (Plunk's event fields follow)" }),
  projectId: Type.String(),
  contactId: Type.String(),
  name: Type.String(),
  data: Type.Record(Type.String(), Type.Unknown()),
  createdAt: Timestamp,
});

const Event = Type.Object({
  id: Type.String(),
  name: Type.String(),
  contactId: Type.String(),
  email: Type.String(),
  contact: Type.Object({ id: Type.String(), email: Type.String() }, { description: "the contact (Plunk's form)" }),
  data: Type.Record(Type.String(), Type.Unknown()),
  test: Type.Boolean({ description: 'recorded with a test key: it starts and wakes test workflow executions only' }),
  createdAt: Timestamp,
});

const EventQuery = Type.Object(
  {
    ...PageQuery,
    contactId: Type.Optional(Type.String({ format: 'uuid', description: 'only this contact’s events' })),
    email: Type.Optional(
      Type.String({
        minLength: 3,
        maxLength: 320,
        description: 'only the events of the contact with this address (case-insensitive)',
      }),
    ),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: 'exact event name' })),
    eventName: Type.Optional(Type.String({ minLength: 1, maxLength: 255, description: "Plunk's name for `name`" })),
    ...PlunkPageQuery,
    since: Type.Optional(Type.String({ format: 'date-time', description: 'events at or after this time (ISO 8601)' })),
    until: Type.Optional(Type.String({ format: 'date-time', description: 'events at or before this time (ISO 8601)' })),
  },
  { additionalProperties: false },
);

const EventList = Type.Object({
  items: Type.Array(Event),
  ...PageFields,
  totalExact: Type.Boolean({ description: 'false when `total` is a lower bound (more than 10,000 matching events)' }),
  events: Type.Array(Event, { description: "same as items (Plunk's form)" }),
  ...PlunkPageFields,
});

const NameQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });

const EventName = Type.Object({
  name: Type.String(),
  count: Type.Integer({ description: 'events with this name' }),
  firstSeenAt: Timestamp,
  lastSeenAt: Timestamp,
});

const NameList = Type.Object({
  items: Type.Array(EventName),
  ...PageFields,
  eventNames: Type.Array(Type.String(), { description: "the names of this page (Plunk's form)" }),
});

function badParameter(field: string, message: string): AppError {
  return new AppError(ErrorCode.INVALID_PARAMETERS, `${field}: ${message}`, {
    errors: [{ field, message, code: 'custom' }],
  });
}

/** Routes of this module. */
export function eventRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  // Concurrent tracks without an Idempotency-Key go to Postgres in batches (API_WRITE_BATCH_SIZE, API_WRITE_BATCH_IN_FLIGHT),
  // those reaching the write in one turn of the event loop in one batch (docs/decisions/0174-api-write-batches-fixed-text-per-turn.md).
  const writer = trackBatcher(db, {
    maxBatch: deps.config.writeBatchSize,
    maxInFlight: deps.config.writeBatchInFlight,
    sameTurn: true,
  });
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
        'values, which are stored on the event only. Tracked with a test key (pk_test_…, sk_test_…), the event is a test event ' +
        '(`test: true`): the workflow executions it starts are test executions, whose emails go to the test sink, and it wakes only test executions.',
      auth: 'any-key',
      example: { email: 'ada@example.org', event: 'signed-up', data: { plan: 'pro' } },
      body: TrackBody,
      response: TrackResult,
      status: 200,
      errors: [400, 401, 403, 409, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, db: tx }) => {
        const { r } = await trackContactEvent(
          tx,
          auth.projectId,
          { ...body, test: auth.mode === 'test' },
          'event',
          writer,
        );
        return { data: { contact: r.contact.id, event: r.eventId, timestamp: r.createdAt.toISOString() } };
      },
    }),
    route({
      method: 'post',
      path: '/events/track',
      operationId: 'trackEventPlunk',
      tag: 'Events',
      summary: 'Track an event (Plunk v2 path)',
      description:
        "Plunk v2's tracking path: the same operation as `POST /v1/track` (contact upsert, `data` rules), answered 201 " +
        "with the Track result plus Plunk's event fields (`id`, `projectId`, `contactId`, `name`, `data`, `createdAt`). Takes our " +
        "body, or Plunk's: `name` instead of `event`, and `contactId` (an existing contact of the project, else 404) instead of " +
        '`email`. Exactly one of `event`/`name` and one of `email`/`contactId`. A secret key is required, as in Plunk ' +
        '(public keys track through `/v1/track`).',
      auth: 'secret',
      example: { email: 'ada@example.org', event: 'signed-up', data: { plan: 'pro' } },
      body: EventsTrackBody,
      response: EventsTrackResult,
      status: 201,
      errors: [400, 401, 403, 404, 409, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, db: tx }) => {
        const { r, name, data } = await trackPlunkEvent(tx, auth.projectId, body, auth.mode === 'test', writer);
        const createdAt = r.createdAt.toISOString();
        return {
          data: {
            contact: r.contact.id,
            event: r.eventId,
            timestamp: createdAt,
            id: r.eventId,
            projectId: auth.projectId,
            contactId: r.contact.id,
            name,
            data,
            createdAt,
          },
        };
      },
    }),
    route({
      method: 'get',
      path: '/events',
      operationId: 'listEvents',
      tag: 'Events',
      summary: 'List events, newest first',
      description:
        'Keyset pagination; filters combine. `since` and `until` are inclusive, at millisecond precision. Plunk v2 forms: `eventName` ' +
        '(= `name`), `page`/`pageSize` (page numbers read by offset, at most 10,000 rows deep; use `cursor` beyond), and `events`, ' +
        '`page`, `pageSize`, `totalPages` in the answer.',
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
        if (query.name !== undefined && query.eventName !== undefined && query.name !== query.eventName) {
          throw badParameter('eventName', 'differs from name; give one of them');
        }
        const name = query.name ?? query.eventName;
        const paging = resolvePaging(query);
        let contactId = query.contactId;
        if (query.email !== undefined) {
          const contact = await findContactByEmail(reads, auth.projectId, query.email);
          if (!contact || (contactId && contactId !== contact.id)) {
            const empty = { items: [], nextCursor: null, hasMore: false, total: 0, totalExact: true, events: [] };
            return { data: { ...empty, ...plunkPageFields(0, paging.page, paging.limit) } };
          }
          contactId = contact.id;
        }
        const page = await listEvents(reads, auth.projectId, {
          limit: paging.limit,
          offset: paging.offset,
          beforeId,
          contactId,
          name,
          since,
          until,
        });
        const last = page.items[page.items.length - 1];
        const items = page.items.map((e) => ({
          ...e,
          contact: { id: e.contactId, email: e.email },
          createdAt: e.createdAt.toISOString(),
        }));
        return {
          data: {
            items,
            nextCursor: page.hasMore && last ? encodeCursor(last.id) : null,
            hasMore: page.hasMore,
            total: page.total,
            totalExact: page.totalExact,
            events: items,
            ...plunkPageFields(page.total, paging.page, paging.limit),
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
      description:
        "Alphabetical; counts and first/last seen are maintained as events are recorded and deleted. `eventNames` lists this page's " +
        "names (Plunk v2's form).",
      auth: 'secret',
      query: NameQuery,
      response: NameList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const after = query.cursor ? decodeKeyCursor(query.cursor) : undefined;
        const page = await listEventNames(reads, auth.projectId, { limit: query.limit, after });
        const last = page.items[page.items.length - 1];
        return {
          data: {
            items: page.items.map((n) => ({
              ...n,
              firstSeenAt: n.firstSeenAt.toISOString(),
              lastSeenAt: n.lastSeenAt.toISOString(),
            })),
            nextCursor: page.hasMore && last ? encodeKeyCursor(last.name) : null,
            hasMore: page.hasMore,
            total: page.total,
            eventNames: page.items.map((n) => n.name),
          },
        };
      },
    }),
  ];
}
