/**
 * Topics (docs/guides/topics.md): `GET/POST /topics`, `GET/PATCH/DELETE /topics/{id}`, and a contact's choices,
 * `GET/PUT /contacts/{id}/topics`.
 *
 * - A topic's `defaultSubscription` says where a contact without a choice stands: `opt_out` subscribed (until they
 *   opt out), `opt_in` not subscribed (until they opt in). `visibility: public` topics are shown by the preference
 *   center (the unsubscribe page); `private` ones are set through the API only.
 * - Names are unique per project, case-insensitively (409 `CONFLICT`): imports name topics (`topic:<name>` columns).
 * - Deleting a topic deletes every contact's choice for it; a campaign or workflow step still naming it then reaches
 *   nobody (never everyone).
 * - `PUT /contacts/{id}/topics` records choices (`[{topicId, subscribed}]`; topics not listed keep theirs) and, for
 *   each topic whose standing changed, the event and webhook `contact.topic_subscribed` / `contact.topic_unsubscribed`.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { notFound, validationError } from '@mailroom/platform/errors';
import { TOPIC_DEFAULTS, TOPIC_VISIBILITIES } from '@mailroom/db/schema/topics';
import {
  contactTopicStates,
  createTopic,
  deleteTopic,
  getTopic,
  listTopics,
  missingTopics,
  setContactTopics,
  updateTopic,
  type ContactTopicState,
  type TopicRow,
} from '@mailroom/contacts/queries/topics';
import { getContact } from '@mailroom/contacts/queries/contacts';
import { recordWebhookEvents } from '@mailroom/db/queries/webhooks';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { topicWebhookEvents } from '@mailroom/contacts/topics';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import {
  cursorId,
  Deleted,
  IdParams,
  keysetPage,
  Nullable,
  PageFields,
  PageQuery,
  StringEnum,
  Timestamp,
} from './common';

const DefaultSubscription = StringEnum(
  TOPIC_DEFAULTS,
  'opt_out: a contact without a choice is subscribed (until they opt out); opt_in: not subscribed (until they opt in)',
);
const Visibility = StringEnum(
  TOPIC_VISIBILITIES,
  'public: shown as a checkbox on the preference center (the unsubscribe page); private: set through the API only',
);

/** A topic as the API returns it. */
export const Topic = Type.Object({
  id: Type.String(),
  name: Type.String(),
  description: Nullable(Type.String()),
  defaultSubscription: DefaultSubscription,
  visibility: Visibility,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

function present(t: TopicRow): Static<typeof Topic> {
  return {
    id: t.id,
    name: t.name,
    description: t.description,
    defaultSubscription: t.defaultSubscription,
    visibility: t.visibility,
    createdAt: t.createdAt.toISOString(),
    updatedAt: t.updatedAt.toISOString(),
  };
}

const fields = {
  name: Type.String({
    minLength: 1,
    maxLength: 100,
    pattern: '\\S',
    description: 'unique per project (case-insensitive)',
  }),
  description: Nullable(Type.String({ maxLength: 500, description: 'shown under the name on the preference center' })),
  defaultSubscription: DefaultSubscription,
  visibility: Visibility,
};

const CreateBody = Type.Object(
  {
    name: fields.name,
    description: Type.Optional(fields.description),
    defaultSubscription: fields.defaultSubscription,
    visibility: Type.Optional(fields.visibility),
  },
  { additionalProperties: false },
);
const UpdateBody = Type.Object(
  {
    name: Type.Optional(fields.name),
    description: Type.Optional(fields.description),
    defaultSubscription: Type.Optional(fields.defaultSubscription),
    visibility: Type.Optional(fields.visibility),
  },
  { additionalProperties: false, minProperties: 1 },
);

/** A contact's standing with one topic. */
export const ContactTopic = Type.Object({
  topicId: Type.String(),
  name: Type.String(),
  subscribed: Type.Boolean({
    description:
      "whether the contact receives the topic's mail (its choice, else the topic's default); the global `subscribed` still applies",
  }),
  explicit: Type.Boolean({ description: "whether the contact chose (false: the topic's default applies)" }),
});

/** Presents a contact's topic standing. */
export function presentContactTopic(s: ContactTopicState): Static<typeof ContactTopic> {
  return { topicId: s.topicId, name: s.name, subscribed: s.subscribed, explicit: s.explicit };
}

/** One choice of `PUT /contacts/{id}/topics` (and the `topics` field of `POST /contacts`). */
export const TopicChoiceInput = Type.Object(
  { topicId: Type.String({ format: 'uuid', description: 'a topic of this project' }), subscribed: Type.Boolean() },
  { additionalProperties: false },
);

/** The `topics` list of a request: at most 100 choices. */
export const TopicChoices = Type.Array(TopicChoiceInput, {
  maxItems: 100,
  description: 'topic choices `[{topicId, subscribed}]`; topics not listed keep their standing',
});

/**
 * Checks that every `topicId` of `choices` is a topic of the project. @throws {@link AppError} 422 naming
 * `<field>.<i>.topicId`.
 */
export async function checkTopicChoices(
  db: Parameters<typeof missingTopics>[0],
  projectId: string,
  ids: string[],
  field: (i: number) => string,
): Promise<void> {
  const missing = new Set(await missingTopics(db, projectId, [...new Set(ids)]));
  const errors = ids.flatMap((id, i) =>
    missing.has(id) ? [{ field: field(i), message: 'is not a topic of this project', code: 'custom' as const }] : [],
  );
  if (errors.length > 0) throw validationError(errors);
}

/** Routes of this module. */
export function topicRoutes(deps: AppDeps) {
  const { db } = deps.database;
  return [
    route({
      method: 'get',
      path: '/topics',
      operationId: 'listTopics',
      tag: 'Topics',
      summary: 'List topics, newest first',
      description: 'Keyset pagination: pass `nextCursor` back as `cursor`.',
      auth: 'secret',
      query: Type.Object(PageQuery, { additionalProperties: false }),
      response: Type.Object({ items: Type.Array(Topic), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listTopics(db, auth.projectId, { limit: query.limit, beforeId: cursorId(query.cursor) });
        return { data: keysetPage(page, present, page.total) };
      },
    }),
    route({
      method: 'post',
      path: '/topics',
      operationId: 'createTopic',
      tag: 'Topics',
      summary: 'Create a topic',
      auth: 'secret',
      example: {
        name: 'Product news',
        description: 'New features, once a month',
        defaultSubscription: 'opt_out',
        visibility: 'public',
      },
      body: CreateBody,
      response: Topic,
      status: 201,
      errors: [400, 401, 403, 409, 422, 429],
      handler: async ({ body, auth }) => ({
        data: present(await createTopic(db, auth.projectId, { ...body, name: body.name.trim() })),
      }),
    }),
    route({
      method: 'get',
      path: '/topics/:id',
      operationId: 'getTopic',
      tag: 'Topics',
      summary: 'Get a topic',
      auth: 'secret',
      params: IdParams,
      response: Topic,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const t = await getTopic(db, auth.projectId, params.id);
        if (!t) throw notFound('Topic');
        return { data: present(t) };
      },
    }),
    route({
      method: 'patch',
      path: '/topics/:id',
      operationId: 'updateTopic',
      tag: 'Topics',
      summary: 'Update a topic',
      description:
        'Changing `defaultSubscription` moves every contact without a choice at once (no events are recorded for them).',
      auth: 'secret',
      params: IdParams,
      body: UpdateBody,
      response: Topic,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, auth }) => {
        const t = await updateTopic(db, auth.projectId, params.id, {
          ...body,
          ...(body.name !== undefined ? { name: body.name.trim() } : {}),
        });
        if (!t) throw notFound('Topic');
        return { data: present(t) };
      },
    }),
    route({
      method: 'delete',
      path: '/topics/:id',
      operationId: 'deleteTopic',
      tag: 'Topics',
      summary: "Delete a topic and every contact's choice for it",
      description: 'A campaign or workflow step still naming the topic reaches nobody afterwards.',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await deleteTopic(db, auth.projectId, params.id))) throw notFound('Topic');
        return { data: { id: params.id, deleted: true as const } };
      },
    }),
    route({
      method: 'get',
      path: '/contacts/:id/topics',
      operationId: 'getContactTopics',
      tag: 'Topics',
      summary: "A contact's standing with every topic",
      auth: 'secret',
      params: IdParams,
      response: Type.Object({ topics: Type.Array(ContactTopic) }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await getContact(db, auth.projectId, params.id))) throw notFound('Contact');
        return { data: { topics: (await contactTopicStates(db, auth.projectId, params.id)).map(presentContactTopic) } };
      },
    }),
    route({
      method: 'put',
      path: '/contacts/:id/topics',
      operationId: 'setContactTopics',
      tag: 'Topics',
      summary: "Set a contact's topic choices",
      description:
        'Records each choice (topics not listed keep theirs) and, for each topic whose standing changed, the event and webhook ' +
        '`contact.topic_subscribed` / `contact.topic_unsubscribed` (`method: "api"`). The global `subscribed` is not changed. ' +
        "Answers every topic's standing.",
      auth: 'secret',
      params: IdParams,
      example: { topics: [{ topicId: '0193f0c2-1a2b-7c3d-8e4f-5a6b7c8d9e0f', subscribed: false }] },
      body: Type.Object({ topics: TopicChoices }, { additionalProperties: false }),
      response: Type.Object({ topics: Type.Array(ContactTopic) }),
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      idempotent: true,
      handler: async ({ params, body, auth, db: tx, afterCommit, log }) => {
        const contact = await getContact(tx, auth.projectId, params.id);
        if (!contact) throw notFound('Contact');
        await checkTopicChoices(
          tx,
          auth.projectId,
          body.topics.map((t) => t.topicId),
          (i) => `topics.${i}.topicId`,
        );
        const changes = await setContactTopics(tx, auth.projectId, contact.id, body.topics, {
          method: 'api',
          test: auth.mode === 'test',
        });
        const deliveries = await recordWebhookEvents(
          tx,
          auth.projectId,
          topicWebhookEvents(contact, changes, { method: 'api' }),
        );
        afterCommit(() => relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log));
        return {
          data: { topics: (await contactTopicStates(tx, auth.projectId, contact.id)).map(presentContactTopic) },
        };
      },
    }),
  ];
}
