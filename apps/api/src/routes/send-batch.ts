/**
 * `POST /v1/send/batch`: up to 100 distinct emails in one request, each exactly a `POST /v1/send` body, checked
 * one by one (`@mailroom/sending/accept-batch`).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { bodyValidator } from '@mailroom/platform/validation';
import { acceptSendBatch, SEND_BATCH_LIMIT } from '@mailroom/sending/accept-batch';
import { sendEnqueueBatcher } from '@mailroom/sending/enqueue-batcher';
import { laneConnectionResolver } from '@mailroom/sending/lane-connection';
import { route } from '../http/route';
import { projectRateLimit } from '../http/rate-limit';
import type { AppDeps } from '../http/context';
import { SendBody, SendResult } from './send';

const SendBatchBody = Type.Array(SendBody, {
  minItems: 1,
  maxItems: SEND_BATCH_LIMIT,
  description: `1 to ${SEND_BATCH_LIMIT} messages, each exactly what POST /v1/send takes`,
});

/** At the door only the list itself is checked; each message is checked by the handler, on its own. */
const SendBatchEnvelope = Type.Array(Type.Unknown(), { minItems: 1, maxItems: SEND_BATCH_LIMIT });

const FieldErrorShape = Type.Object({ field: Type.String(), message: Type.String(), code: Type.String() });

const SendBatchResult = Type.Object({
  data: Type.Array(
    Type.Intersect([
      Type.Object({ index: Type.Integer({ description: "the message's position in the request (from 0)" }) }),
      SendResult,
    ]),
    {
      description: 'the accepted messages, by index: what POST /v1/send answers for each',
    },
  ),
  errors: Type.Array(
    Type.Object({
      index: Type.Integer({ description: "the message's position in the request (from 0)" }),
      code: Type.String({
        description:
          'the error code POST /v1/send would have answered (VALIDATION_ERROR, NOT_FOUND, KEY_DOMAIN_FORBIDDEN)',
      }),
      statusCode: Type.Integer(),
      message: Type.String(),
      errors: Type.Optional(
        Type.Array(FieldErrorShape, {
          description: 'for VALIDATION_ERROR: each field, relative to the message (`tags.3.name`)',
        }),
      ),
    }),
    { description: 'the refused messages, by index: nothing of them is stored or sent' },
  ),
});

/** The routes of this module. */
export function sendBatchRoutes(deps: AppDeps) {
  // The send jobs of concurrent batches after their commits, folded as `/v1/send`'s are.
  const enqueuer = sendEnqueueBatcher(
    {
      config: deps.config,
      sendQueue: deps.queues.send,
      redis: deps.redis,
      connectionOf: laneConnectionResolver(deps.database.db, deps.config.sesConnections),
      clock: deps.clock,
    },
    { maxBatch: deps.config.writeBatchSize, maxInFlight: deps.config.writeBatchInFlight },
  );
  const validateItem = bodyValidator(SendBody);
  // Made at the first batch: a route declaration must not touch its dependencies (the OpenAPI document is built
  // from the declarations alone).
  let limit: ReturnType<typeof projectRateLimit> | undefined;
  return [
    route({
      method: 'post',
      path: '/v1/send/batch',
      operationId: 'sendEmailBatch',
      tag: 'Sending',
      summary: 'Send a batch of distinct emails',
      description:
        `Up to ${SEND_BATCH_LIMIT} messages, each exactly what POST /v1/send takes, checked one by one. Answers 200 with \`data\`, the ` +
        'accepted messages with what POST /v1/send answers for each, and `errors`, the refused ones with their error, both by index ' +
        '(from 0). A refused message stores and sends nothing; the accepted ones are stored in one transaction and sent. ' +
        "When no message is accepted, the answer is 422 VALIDATION_ERROR listing every message's problems as `<index>.<field>` " +
        `(\`2.tags.0.name\`). More than ${SEND_BATCH_LIMIT} messages, or a body that is not a list, is 422 and sends nothing. Each message counts as one request ` +
        'of the rate limit. One Idempotency-Key covers the whole batch: a replay answers the same and sends nothing again. ' +
        'With a test key (sk_test_…) every message is a test email, delivered to the test sink.',
      auth: 'secret',
      sendingKeys: true,
      body: SendBatchBody,
      bodyValidation: SendBatchEnvelope,
      example: [
        {
          to: 'ada@example.org',
          from: 'Acme <hello@example.com>',
          subject: 'Your receipt',
          body: '<p>Thanks, Ada</p>',
          tags: [{ name: 'category', value: 'receipt' }],
        },
        {
          to: 'alan@example.org',
          from: 'Acme <hello@example.com>',
          subject: 'Your receipt',
          body: '<p>Thanks, Alan</p>',
          tags: [{ name: 'category', value: 'receipt' }],
        },
      ],
      bodyLimit: '40mb',
      response: SendBatchResult,
      status: 200,
      errors: [400, 401, 403, 413, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, log, db, afterCommit }) => {
        // The door counted the request once; each further message counts too.
        limit ??= projectRateLimit(deps.redis, deps.config.queuePrefix, deps.config.rateLimitPerMinute);
        await limit(auth.projectId, body.length - 1);
        return {
          data: await acceptSendBatch(
            {
              config: deps.config,
              sendQueue: deps.queues.send,
              webhookQueue: deps.queues.webhook,
              db,
              log,
              redis: deps.redis,
              enqueuer,
            },
            auth.projectId,
            body,
            validateItem,
            afterCommit,
            auth.mode,
            auth.allowedDomains,
          ),
        };
      },
    }),
  ];
}
