/**
 * Outbound webhook endpoints: `GET/POST /webhooks/endpoints`, `GET/PATCH/DELETE /webhooks/endpoints/{id}`,
 * `GET /webhooks/endpoints/{id}/deliveries` (every delivery with its attempt log) and
 * `POST /webhooks/endpoints/{id}/deliveries/{deliveryId}/redeliver`.
 *
 * Deliveries are signed per Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`) with the
 * endpoint's secret, shown once at creation. They are retried over about a day
 * (`WEBHOOK_RETRY_SCHEDULE_MS`); an endpoint whose deliveries keep failing for a whole schedule is disabled.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '@mailroom/platform/errors';
import { WEBHOOK_EVENT_TYPES } from '@mailroom/webhooks/webhooks';
import { addEndpoint, changeEndpoint, loadEndpoint, redeliver } from '@mailroom/webhooks/endpoints';
import {
  deleteWebhookEndpoint,
  listWebhookDeliveries,
  listWebhookEndpoints,
  type WebhookEndpointRow,
} from '@mailroom/webhooks/queries/webhooks';
import { WEBHOOK_DELIVERY_STATUSES } from '@mailroom/db/schema/webhooks';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
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

const EventTypes = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  minItems: 1,
  maxItems: 50,
  description: `event types, family wildcards (\`email.*\`, \`contact.*\`, \`campaign.*\`, \`workflow.*\`) or \`*\`. Types: ${WEBHOOK_EVENT_TYPES.join(', ')}`,
});

const Url = Type.String({
  minLength: 1,
  maxLength: 2048,
  description:
    'http(s) URL; private, loopback and link-local targets are refused unless the operator allows them (WEBHOOK_ALLOW_PRIVATE_TARGETS)',
});

const Endpoint = Type.Object({
  id: Type.String(),
  url: Type.String(),
  description: Nullable(Type.String()),
  eventTypes: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  disabledReason: Nullable(Type.String({ description: 'set when the platform disabled it after persistent failure' })),
  disabledAt: Nullable(Timestamp),
  lastSuccessAt: Nullable(Timestamp),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

const CreatedEndpoint = Type.Composite([
  Endpoint,
  Type.Object({ secret: Type.String({ description: 'signing secret (`whsec_…`), shown only in this response' }) }),
]);

function present(e: WebhookEndpointRow): Static<typeof Endpoint> {
  return {
    id: e.id,
    url: e.url,
    description: e.description,
    eventTypes: e.eventTypes,
    enabled: e.enabled,
    disabledReason: e.disabledReason,
    disabledAt: e.disabledAt?.toISOString() ?? null,
    lastSuccessAt: e.lastSuccessAt?.toISOString() ?? null,
    createdAt: e.createdAt.toISOString(),
    updatedAt: e.updatedAt.toISOString(),
  };
}

const Attempt = Type.Object({
  attempt: Type.Integer(),
  statusCode: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  responseBody: Nullable(Type.String({ description: 'first 1,024 characters of the answer' })),
  durationMs: Type.Integer(),
  createdAt: Timestamp,
});

const Delivery = Type.Object({
  id: Type.String({ description: 'the `webhook-id` header, the same on every attempt and redelivery' }),
  eventType: Type.String(),
  status: StringEnum(WEBHOOK_DELIVERY_STATUSES),
  attempts: Type.Integer(),
  lastStatusCode: Nullable(Type.Integer()),
  lastError: Nullable(Type.String()),
  nextAttemptAt: Nullable(Timestamp),
  succeededAt: Nullable(Timestamp),
  createdAt: Timestamp,
  payload: Type.Record(Type.String(), Type.Unknown(), { description: 'the body sent: `{type, timestamp, data}`' }),
  attemptLog: Type.Array(Attempt),
});

const DeliveryParams = Type.Object({
  id: Type.String({ format: 'uuid' }),
  deliveryId: Type.String({ format: 'uuid' }),
});

/** Routes of this module. */
export function webhookRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  const allowPrivate = deps.config.webhookAllowPrivateTargets;
  return [
    route({
      method: 'get',
      path: '/webhooks/endpoints',
      operationId: 'listWebhookEndpoints',
      tag: 'Webhooks',
      summary: 'List webhook endpoints, newest first',
      auth: 'secret',
      query: Type.Object({ ...PageQuery }, { additionalProperties: false }),
      response: Type.Object({ items: Type.Array(Endpoint), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listWebhookEndpoints(reads, auth.projectId, {
          limit: query.limit,
          beforeId: cursorId(query.cursor),
        });
        return { data: keysetPage(page, present, page.total) };
      },
    }),
    route({
      method: 'post',
      path: '/webhooks/endpoints',
      operationId: 'createWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Create a webhook endpoint (the response shows its signing secret, once)',
      description:
        'Events are POSTed as JSON `{type, timestamp, data}` with the Standard Webhooks headers `webhook-id`, ' +
        '`webhook-timestamp` and `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body` under the ' +
        'base64-decoded secret after `whsec_`). `data` carries our `emailId`, `contactId` and `campaignId` next to ' +
        'the SES `messageId`. A 2xx answer within WEBHOOK_TIMEOUT_MS is success; anything else is retried over ' +
        'about a day (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h by default). When every attempt of a delivery fails ' +
        'and nothing succeeded since it was created, the endpoint is disabled (`disabledReason`).',
      auth: 'secret',
      example: {
        url: 'https://example.com/hooks/mailroom',
        eventTypes: ['email.delivered', 'email.bounced', 'contact.*'],
      },
      body: Type.Object(
        {
          url: Url,
          eventTypes: EventTypes,
          description: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
      response: CreatedEndpoint,
      status: 201,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body, auth }) => {
        const e = await addEndpoint(db, auth.projectId, body, allowPrivate);
        return { data: { ...present(e), secret: e.secret } };
      },
    }),
    route({
      method: 'get',
      path: '/webhooks/endpoints/:id',
      operationId: 'getWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Get a webhook endpoint',
      auth: 'secret',
      params: IdParams,
      response: Endpoint,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => ({ data: present(await loadEndpoint(db, auth.projectId, params.id)) }),
    }),
    route({
      method: 'patch',
      path: '/webhooks/endpoints/:id',
      operationId: 'updateWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Update a webhook endpoint (enable it again after the platform disabled it)',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          url: Type.Optional(Url),
          eventTypes: Type.Optional(EventTypes),
          description: Type.Optional(Nullable(Type.String({ maxLength: 500 }))),
          enabled: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false, minProperties: 1 },
      ),
      response: Endpoint,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, auth }) => {
        const e = await changeEndpoint(db, auth.projectId, params.id, body, allowPrivate);
        return { data: present(e) };
      },
    }),
    route({
      method: 'delete',
      path: '/webhooks/endpoints/:id',
      operationId: 'deleteWebhookEndpoint',
      tag: 'Webhooks',
      summary: 'Delete a webhook endpoint with its delivery log',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        if (!(await deleteWebhookEndpoint(db, auth.projectId, params.id))) throw notFound('Webhook endpoint');
        return { data: { id: params.id, deleted: true as const } };
      },
    }),
    route({
      method: 'get',
      path: '/webhooks/endpoints/:id/deliveries',
      operationId: 'listWebhookDeliveries',
      tag: 'Webhooks',
      summary: "List an endpoint's deliveries, newest first, each with every attempt",
      auth: 'secret',
      params: IdParams,
      query: Type.Object(
        { ...PageQuery, status: Type.Optional(StringEnum(WEBHOOK_DELIVERY_STATUSES)) },
        { additionalProperties: false },
      ),
      response: Type.Object({ items: Type.Array(Delivery), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query, auth }) => {
        await loadEndpoint(db, auth.projectId, params.id);
        const page = await listWebhookDeliveries(reads, auth.projectId, params.id, {
          limit: query.limit,
          beforeId: cursorId(query.cursor),
          status: query.status,
        });
        return {
          data: keysetPage(
            page,
            (d) => ({
              id: d.id,
              eventType: d.eventType,
              status: d.status,
              attempts: d.attempts,
              lastStatusCode: d.lastStatusCode,
              lastError: d.lastError,
              nextAttemptAt: d.nextAttemptAt?.toISOString() ?? null,
              succeededAt: d.succeededAt?.toISOString() ?? null,
              createdAt: d.createdAt.toISOString(),
              payload: d.payload,
              attemptLog: d.attemptLog.map((a) => ({
                attempt: a.attempt,
                statusCode: a.statusCode,
                error: a.error,
                responseBody: a.responseBody,
                durationMs: a.durationMs,
                createdAt: a.createdAt.toISOString(),
              })),
            }),
            page.total,
          ),
        };
      },
    }),
    route({
      method: 'post',
      path: '/webhooks/endpoints/:id/deliveries/:deliveryId/redeliver',
      operationId: 'redeliverWebhook',
      tag: 'Webhooks',
      summary: 'Deliver again (a new round of attempts, same `webhook-id`)',
      auth: 'secret',
      params: DeliveryParams,
      response: Type.Object({ id: Type.String(), status: Type.Literal('pending') }),
      status: 202,
      errors: [400, 401, 403, 404, 409, 429],
      handler: async ({ params, auth, log }) => {
        const ref = await redeliver(deps, log, auth.projectId, params.id, params.deliveryId);
        return { data: { id: ref.id, status: 'pending' as const } };
      },
    }),
  ];
}
