/**
 * The suppression list: `GET /suppressions` (keyset, search, reason), `POST /suppressions` (one address or up to
 * 1,000 in bulk), `GET /suppressions/{email}`, `DELETE /suppressions/{email}`.
 *
 * A suppressed address is never mailed: `/v1/send` stores its email as `suppressed`, campaigns leave it out,
 * and the worker re-checks at send time. Entries come from permanent bounces, repeated transient bounces and
 * complaints (SES events at `POST /webhooks/ses`) and from these routes (`manual`).
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { EmailAddress } from '@mailroom/contacts/contacts';
import { relayWebhookDeliveries } from '@mailroom/queues/enqueue';
import { notFound } from '@mailroom/platform/errors';
import { TRIM_KEYWORD } from '@mailroom/platform/validation';
import { suppressManually } from '@mailroom/feedback/suppressions';
import {
  deleteSuppression,
  getSuppression,
  listSuppressions,
  type SuppressionRow,
} from '@mailroom/feedback/queries/suppressions';
import { SUPPRESSION_REASONS } from '@mailroom/db/schema/feedback';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import { cursorId, keysetPage, Nullable, PageFields, PageQuery, StringEnum, Timestamp } from './common';

const Reason = StringEnum(
  SUPPRESSION_REASONS,
  'hard_bounce (permanent bounce), soft_bounce (repeated transient bounces), complaint, manual',
);

const Suppression = Type.Object({
  id: Type.String(),
  email: Type.String(),
  reason: Reason,
  sourceEmailId: Nullable(Type.String({ description: 'the email whose bounce or complaint caused it' })),
  details: Type.Record(Type.String(), Type.Unknown(), {
    description: 'bounce type and subtype, diagnostic code, feedback type, or the note given',
  }),
  createdAt: Timestamp,
});

function present(s: SuppressionRow): Static<typeof Suppression> {
  return {
    id: s.id,
    email: s.email,
    reason: s.reason,
    sourceEmailId: s.sourceEmailId,
    details: s.details,
    createdAt: s.createdAt.toISOString(),
  };
}

const AddBody = Type.Object(
  {
    email: Type.Optional(EmailAddress),
    emails: Type.Optional(
      Type.Array(EmailAddress, { minItems: 1, maxItems: 1000, description: 'bulk: up to 1,000 addresses' }),
    ),
    note: Type.Optional(Type.String({ maxLength: 1000, description: 'kept in `details.note`' })),
  },
  { additionalProperties: false },
);

// Surrounding whitespace (an encoded space or tab) is not part of the address: accepted, and trimmed (`x-trim`).
const EmailParams = Type.Object({
  email: Type.String({
    minLength: 3,
    maxLength: 320,
    pattern: '^\\s*[^@\\s]+@[^@\\s]+\\s*$',
    [TRIM_KEYWORD]: true,
    description: 'the suppressed address (URL-encoded)',
  }),
});

/** Routes of this module. */
export function suppressionRoutes(deps: AppDeps) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  return [
    route({
      method: 'get',
      path: '/suppressions',
      operationId: 'listSuppressions',
      tag: 'Suppressions',
      summary: 'List suppressed addresses, newest first',
      auth: 'secret',
      query: Type.Object(
        {
          ...PageQuery,
          search: Type.Optional(
            Type.String({ minLength: 1, maxLength: 320, description: 'part of the address (case-insensitive)' }),
          ),
          reason: Type.Optional(Reason),
        },
        { additionalProperties: false },
      ),
      response: Type.Object({ items: Type.Array(Suppression), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listSuppressions(reads, auth.projectId, {
          limit: query.limit,
          beforeId: cursorId(query.cursor),
          search: query.search,
          reason: query.reason,
        });
        return { data: keysetPage(page, present, page.total) };
      },
    }),
    route({
      method: 'post',
      path: '/suppressions',
      operationId: 'addSuppressions',
      tag: 'Suppressions',
      summary: 'Suppress addresses (one, or up to 1,000 in bulk)',
      description:
        '`{email, note?}` or `{emails: [...], note?}`. Entries get reason `manual`. An address already on the list ' +
        'keeps its entry; `added` lists the new ones, `alreadySuppressed` the rest.',
      auth: 'secret',
      example: { email: 'bounced@example.org', note: 'asked to stop by phone' },
      body: AddBody,
      response: Type.Object({ added: Type.Array(Suppression), alreadySuppressed: Type.Array(Type.String()) }),
      status: 201,
      otherStatuses: { 200: 'every address was already suppressed' },
      errors: [400, 401, 403, 422, 429],
      idempotent: true,
      handler: async ({ body, auth, db: tx, afterCommit, log }) => {
        const { added, alreadySuppressed, deliveries } = await suppressManually(tx, auth.projectId, body);
        afterCommit(() => relayWebhookDeliveries(deps.queues.webhook, deps.config, deliveries, log));
        return { status: added.length > 0 ? 201 : 200, data: { added: added.map(present), alreadySuppressed } };
      },
    }),
    route({
      method: 'get',
      path: '/suppressions/:email',
      operationId: 'getSuppression',
      tag: 'Suppressions',
      summary: 'Whether an address is suppressed, and why',
      auth: 'secret',
      params: EmailParams,
      response: Suppression,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const s = await getSuppression(db, auth.projectId, params.email);
        if (!s) throw notFound('Suppression');
        return { data: present(s) };
      },
    }),
    route({
      method: 'delete',
      path: '/suppressions/:email',
      operationId: 'deleteSuppression',
      tag: 'Suppressions',
      summary: 'Remove an address from the suppression list',
      description: 'Mail to the address is sent again from now on. Emails already stored as `suppressed` stay so.',
      auth: 'secret',
      params: EmailParams,
      response: Type.Object({ email: Type.String(), deleted: Type.Literal(true) }),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const s = await deleteSuppression(db, auth.projectId, params.email);
        if (!s) throw notFound('Suppression');
        return { data: { email: s.email, deleted: true as const } };
      },
    }),
  ];
}
