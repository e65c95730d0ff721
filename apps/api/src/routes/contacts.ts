/**
 * Contacts: `GET/POST /contacts`, `GET/PATCH/DELETE /contacts/{id}` (spec "Contact"; docs/api/overview.md).
 *
 * - List: newest first by keyset; both forms of docs/api/overview.md (`items`/`nextCursor` and the reference
 *   `contacts`/`cursor`); `total` from maintained counters (exact) or, with `search`, counted up to 10,000.
 * - Upsert (`POST`): 201 with `_meta.isNew` for a new contact, 200 with `_meta.isUpdate` for an existing one.
 * - `data` merges shallowly in SQL (a `null` value removes the key); `subscribed` changes only when stated.
 * - `snoozedUntil` (create and update): marketing mail is held back until then (`contact-snooze.ts`).
 * - Delete: an erasure (`@mailroom/contacts/queries/erase`): the contact goes with its events and executions, its queued
 *   emails are cancelled, its emails stay in the sending log scrubbed of personal data, and webhook deliveries,
 *   import errors and idempotent responses naming it are deleted.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound } from '@mailroom/platform/errors';
import { ContactData } from '@mailroom/contacts/contacts';
import { topicWebhookEvents } from '@mailroom/contacts/topics';
import { contactTopicStates, setContactTopics } from '@mailroom/contacts/queries/topics';
import { confirmationsOf } from '@mailroom/contacts/queries/confirmations';
import { withWebhookEvents } from '@mailroom/db/queries/webhooks';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { decodeCursor, encodeCursor } from '@mailroom/platform/ids';
import { type SegmentFilter } from '@mailroom/audiences/segments';
import { parseSegmentFilter } from '@mailroom/audiences/filter-parser';
import { compileAudience } from '@mailroom/audiences/audience';
import { getContact, listContacts, updateContact, type ContactRow } from '@mailroom/contacts/queries/contacts';
import { eraseContact } from '@mailroom/contacts/queries/erase';
import { route } from '../http/route';
import { SnoozeField, applySnooze, checkSnooze } from './contact-snooze';
import { readDb, type AppDeps } from '../http/context';
import { Deleted, IdParams, Nullable, PageFields, PageQuery, Timestamp } from './common';
import { checkTopicChoices, ContactTopic, presentContactTopic, TopicChoices } from './topics';
import { Confirmation, presentConfirmation, UpsertBody, upsertWithTopics } from './contact-upsert';

/** A contact as the API returns it. */
export const Contact = Type.Object({
  id: Type.String(),
  email: Type.String(),
  subscribed: Type.Boolean({ description: 'subscribed to marketing email' }),
  data: Type.Record(Type.String(), Type.Unknown()),
  snoozedUntil: Nullable(
    Type.String({
      format: 'date-time',
      description:
        'marketing email is paused until then (campaigns and marketing workflow steps skip the contact); null: not snoozed',
    }),
  ),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

/** Presents a stored contact. */
export function presentContact(
  c: Pick<ContactRow, 'id' | 'email' | 'subscribed' | 'data' | 'createdAt' | 'updatedAt'> & {
    snoozedUntil?: Date | null;
  },
): Static<typeof Contact> {
  return {
    id: c.id,
    email: c.email,
    subscribed: c.subscribed,
    data: c.data,
    snoozedUntil: c.snoozedUntil?.toISOString() ?? null,
    createdAt: c.createdAt.toISOString(),
    updatedAt: c.updatedAt.toISOString(),
  };
}

const ListQuery = Type.Object(
  {
    ...PageQuery,
    subscribed: Type.Optional(Type.Boolean({ description: 'only subscribed (true) or unsubscribed (false) contacts' })),
    search: Type.Optional(
      Type.String({ minLength: 1, maxLength: 320, description: 'case-insensitive substring of the email address' }),
    ),
    filter: Type.Optional(
      Type.String({
        minLength: 2,
        maxLength: 20_000,
        description: 'a segment filter as JSON (see POST /segments); invalid filters get 422 naming the path',
      }),
    ),
  },
  { additionalProperties: false },
);

const ContactList = Type.Object({
  items: Type.Array(Contact),
  ...PageFields,
  totalExact: Type.Boolean({
    description: 'false when `total` is a lower bound (a search matching more than 10,000 contacts)',
  }),
  contacts: Type.Array(Contact, { description: 'same as items (reference form)' }),
  cursor: Nullable(Type.String({ description: 'same as nextCursor (reference form)' })),
});

const UpsertResult = Type.Intersect([
  Contact,
  Type.Object({
    _meta: Type.Object({
      isNew: Type.Boolean(),
      isUpdate: Type.Boolean(),
      confirmation: Type.Optional(
        Type.Object(
          {
            id: Type.String(),
            emailId: Type.String({ description: 'the confirmation email (GET /emails/{id})' }),
            topicIds: Type.Array(Type.String()),
          },
          {
            description: 'with doubleOptIn: the pending confirmation',
          },
        ),
      ),
    }),
  }),
]);

const UpdateBody = Type.Object(
  {
    subscribed: Type.Optional(Type.Boolean()),
    data: Type.Optional(ContactData),
    snoozedUntil: SnoozeField,
    topics: Type.Optional(TopicChoices),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** One contact with its topics and its double opt-in confirmations (the proof of consent). */
const ContactDetail = Type.Intersect([
  Contact,
  Type.Object({
    topics: Type.Array(ContactTopic, { description: "the contact's standing with every topic of the project" }),
    confirmations: Type.Array(Confirmation, { description: 'double opt-in confirmations, newest first (at most 20)' }),
  }),
]);

/** `?filter=`: JSON text (400 when it does not parse), then the segment language (422 naming the path). */
function parseFilterParam(text: string): SegmentFilter {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new AppError(ErrorCode.INVALID_PARAMETERS, 'filter: is not valid JSON', {
      errors: [{ field: 'filter', message: 'is not valid JSON', code: 'invalid_string' }],
    });
  }
  return parseSegmentFilter(parsed, 'filter');
}

/** Routes of this module. */
export function contactRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  return [
    route({
      method: 'get',
      path: '/contacts',
      operationId: 'listContacts',
      tag: 'Contacts',
      summary: 'List contacts, newest first',
      description:
        'Keyset pagination: pass `nextCursor` back as `cursor`. A contact that exists for the whole listing appears ' +
        'exactly once, whatever is inserted or deleted meanwhile. `search` matches any part of the address, ' +
        'case-insensitively (trigram index). `filter` takes a segment filter (JSON, URL-encoded), compiled by the ' +
        'same compiler as segments and campaigns.',
      auth: 'secret',
      query: ListQuery,
      response: ContactList,
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const beforeId = query.cursor ? decodeCursor(query.cursor) : undefined;
        const predicate =
          query.filter !== undefined
            ? compileAudience(
                auth.projectId,
                { type: 'FILTERED', filter: parseFilterParam(query.filter) },
                { now: Date.now() },
              )
            : undefined;
        const page = await listContacts(reads, auth.projectId, {
          limit: query.limit,
          beforeId,
          subscribed: query.subscribed,
          search: query.search,
          predicate,
        });
        const items = page.items.map(presentContact);
        const last = page.items[page.items.length - 1];
        const nextCursor = page.hasMore && last ? encodeCursor(last.id) : null;
        return {
          data: {
            items,
            nextCursor,
            hasMore: page.hasMore,
            total: page.total,
            totalExact: page.totalExact,
            contacts: items,
            cursor: nextCursor,
          },
        };
      },
    }),
    route({
      method: 'post',
      path: '/contacts',
      operationId: 'upsertContact',
      tag: 'Contacts',
      summary: 'Create or update a contact by email',
      description:
        'Upsert by address (case-insensitive). New contacts default to `subscribed: true`; for an existing contact ' +
        'an omitted `subscribed` is unchanged and `data` is merged (a null value removes the key). `snoozedUntil` (a ' +
        'future time) pauses marketing email until then; null clears a snooze (`contact.snoozed` / `contact.unsnoozed`). ' +
        '`topics` records topic ' +
        'choices as PUT /contacts/{id}/topics does. With `doubleOptIn: true` a confirmation email is sent (the template ' +
        '`confirmationTemplateId`, where `{{confirmUrl}}` is the link, or a built-in one) and the contact stays unsubscribed ' +
        '(a new contact globally; with `topicIds`, from those topics too, unless it chose them before) until it confirms ' +
        "through the link's page (GET /confirm). Unconfirmed contacts the double opt-in created are deleted after " +
        'DOUBLE_OPT_IN_EXPIRY_HOURS.',
      auth: 'secret',
      body: UpsertBody,
      response: UpsertResult,
      status: 201,
      otherStatuses: { 200: 'The contact existed and was updated (`_meta.isUpdate`)' },
      errors: [400, 401, 403, 409, 422, 429],
      idempotent: true,
      handler: async (ctx) => {
        const { contact: c, meta } = await upsertWithTopics(deps, ctx);
        return { status: c.inserted ? 201 : 200, data: { ...presentContact(c), _meta: meta } };
      },
    }),
    route({
      method: 'get',
      path: '/contacts/:id',
      operationId: 'getContact',
      tag: 'Contacts',
      summary: 'Get a contact',
      auth: 'secret',
      params: IdParams,
      response: ContactDetail,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const c = await getContact(db, auth.projectId, params.id);
        if (!c) throw notFound('Contact');
        const [topics, confirmations] = await Promise.all([
          contactTopicStates(db, auth.projectId, c.id),
          confirmationsOf(db, auth.projectId, c.id),
        ]);
        return {
          data: {
            ...presentContact(c),
            topics: topics.map(presentContactTopic),
            confirmations: confirmations.map(presentConfirmation),
          },
        };
      },
    }),
    route({
      method: 'patch',
      path: '/contacts/:id',
      operationId: 'updateContact',
      tag: 'Contacts',
      summary: 'Update a contact',
      description:
        '`data` is shallow-merged into the stored data (a null value removes the key); `subscribed` is set when given; ' +
        '`snoozedUntil` (a future time) pauses marketing email until then, null clears a snooze ' +
        '(`contact.snoozed` / `contact.unsnoozed` events and webhooks, when it changes). ' +
        '`topics` records topic choices as PUT /contacts/{id}/topics does.',
      auth: 'secret',
      params: IdParams,
      body: UpdateBody,
      response: Contact,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, auth, log }) => {
        const { topics, snoozedUntil, ...rest } = body;
        const until = checkSnooze(snoozedUntil);
        if (topics)
          await checkTopicChoices(
            db,
            auth.projectId,
            topics.map((t) => t.topicId),
            (i) => `topics.${i}.topicId`,
          );
        const test = auth.mode === 'test';
        const { result: c, deliveries } = await withWebhookEvents(
          db,
          auth.projectId,
          async (tx) => {
            const snoozed =
              until === undefined ? undefined : await applySnooze(tx, auth.projectId, params.id, until, test);
            const updated =
              rest.subscribed !== undefined || rest.data !== undefined
                ? await updateContact(tx, auth.projectId, params.id, rest, { test })
                : await getContact(tx, auth.projectId, params.id);
            const changes =
              updated && topics
                ? await setContactTopics(tx, auth.projectId, updated.id, topics, { method: 'api', test })
                : [];
            return { updated, changes, snoozeDeliveries: snoozed?.deliveries ?? [] };
          },
          ({ updated, changes }) => (updated ? topicWebhookEvents(updated, changes, { method: 'api' }) : []),
        );
        await relayWebhookDeliveries(deps.queues.webhook, deps.config, [...c.snoozeDeliveries, ...deliveries], log);
        if (!c.updated) throw notFound('Contact');
        return { data: presentContact(c.updated) };
      },
    }),
    route({
      method: 'delete',
      path: '/contacts/:id',
      operationId: 'deleteContact',
      tag: 'Contacts',
      summary: 'Delete a contact and erase its personal data',
      description:
        'Deletes the contact with its events, workflow executions and segment memberships, and erases its personal ' +
        'data everywhere else: its emails not yet picked up by a worker are cancelled; its emails stay in the sending ' +
        'log (GET /emails/{id}: status and dates, `erased: true`) without address, name, subject or content; webhook ' +
        'deliveries, import row errors and stored idempotent responses naming it are deleted. Suppressions of the ' +
        'address stay (DELETE /suppressions/{email} removes one).',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await eraseContact(db, auth.projectId, params.id))) throw notFound('Contact');
        return { data: { id: params.id, deleted: true } };
      },
    }),
  ];
}
