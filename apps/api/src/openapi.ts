/**
 * The OpenAPI 3.1 document, generated from the same route declarations and TypeBox schemas that ajv enforces, the
 * error catalog (each operation's error codes), and the webhook event catalog (`webhooks`). `npm run docs:generate`
 * writes it to docs/openapi.json; the API serves the same document at `/openapi.json`.
 *
 * @module
 */
import type { TSchema } from '@sinclair/typebox';
import type { ErrorCode } from '@mailroom/platform/errors';
import { registeredSchemas } from '@mailroom/platform/validation';
import type { AnyRoute } from './http/route';
import {
  codesOf,
  ErrorBody,
  ErrorResponses,
  exampleOf,
  headersFor,
  responseHeaders,
  type HeaderTraits,
} from './openapi-parts';
import { webhookOperations } from './openapi-webhooks';

const IdempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first response to a key (1–255 printable ASCII characters, per project) is replayed ' +
    'for 24 h with `Idempotent-Replayed: true`. The same key with a different request is 422 IDEMPOTENCY_CONFLICT; ' +
    'a duplicate sent while the first is still running waits for it (409 CONFLICT, retryable, after 10 s).',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

/** The codes a route's error status can carry, narrower than the catalog's where the route's steps say so. */
function routeCodes(r: AnyRoute, status: number): ErrorCode[] {
  const all = codesOf(status);
  if (status === 403 && r.auth === 'admin') return ['FORBIDDEN'];
  if (status === 403 && r.auth === 'any-key') return all.filter((c) => c !== 'PUBLIC_KEY_NOT_ALLOWED');
  if (status === 409 && !r.idempotent) return all;
  if (status === 422 && !r.idempotent) return all.filter((c) => c !== 'IDEMPOTENCY_CONFLICT');
  return all;
}

function plain(schema: TSchema): unknown {
  // Drops TypeBox's symbol keys and undefined values; a reference to a shared schema (by `$id`, as ajv resolves
  // it) points at its component.
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) =>
    key === '$ref' && typeof value === 'string' && registeredSchemas().has(value)
      ? `#/components/schemas/${value}`
      : value,
  );
}

/** The shared schemas (`registerSchema`) as components, under their `$id`. */
function sharedComponents(): Record<string, unknown> {
  return Object.fromEntries(
    [...registeredSchemas()].map(([id, schema]) => {
      const { $id: _id, ...rest } = plain(schema) as Record<string, unknown>;
      return [id, rest];
    }),
  );
}

function parameters(schema: TSchema | undefined, where: 'query' | 'path') {
  if (!schema) return [];
  const s = plain(schema) as { properties?: Record<string, { description?: string }>; required?: string[] };
  return Object.entries(s.properties ?? {}).map(([name, prop]) => ({
    name,
    in: where,
    required: where === 'path' || (s.required ?? []).includes(name),
    description: prop.description,
    schema: prop,
  }));
}

/** Builds the document for the given routes. */
export function buildOpenApi(
  routes: AnyRoute[],
  info: { version: string; serverUrl: string },
  errors = new ErrorResponses(),
) {
  const components = sharedComponents();
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const traits: HeaderTraits = {
      rateLimited: r.auth === 'secret' || r.auth === 'any-key',
      idempotent: r.idempotent === true,
    };
    const envelope = {
      type: 'object',
      required: ['success', 'data'],
      properties: { success: { const: true }, data: plain(r.response) },
    };
    const responses: Record<string, unknown> = {
      [r.status]: {
        description: 'Success',
        headers: headersFor(r.status, traits),
        content: { 'application/json': { schema: envelope } },
      },
    };
    for (const [status, text] of Object.entries(r.otherStatuses ?? {})) {
      responses[status] = {
        description: text,
        headers: headersFor(Number(status), traits),
        content: { 'application/json': { schema: envelope } },
      };
    }
    // Every route that reads a JSON body can meet an encoding it does not speak; every route can meet a bug or
    // a backing service that is down.
    const statuses = new Set([...r.errors, ...(r.body ? [415] : []), 500, 503]);
    for (const status of [...statuses].sort()) responses[status] = errors.ref(status, traits, routeCodes(r, status));
    const body = r.body ? plain(r.body) : undefined;
    paths[path] ??= {};
    paths[path][r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      description: r.description,
      tags: [r.tag],
      security: r.auth === 'none' ? [] : r.auth === 'admin' ? [{ adminToken: [] }] : [{ apiKey: [] }],
      parameters: [
        ...parameters(r.params, 'path'),
        ...parameters(r.query, 'query'),
        ...(r.idempotent ? [IdempotencyKeyParameter] : []),
      ],
      ...(body
        ? {
            requestBody: {
              required: true,
              content: { 'application/json': { schema: body, example: r.example ?? exampleOf(body, components) } },
            },
          }
        : {}),
      ...(r.requestBody ? { requestBody: r.requestBody } : {}),
      responses,
    };
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Mailroom API',
      version: info.version,
      description:
        'Transactional email, contacts, templates and more. Authenticate with `Authorization: Bearer <key>`: ' +
        'secret keys (sk_) work everywhere, public keys (pk_) only on /v1/track. Every success body is ' +
        '`{ success: true, data }`; every error body is the Error schema, whose `error.retryable` says whether ' +
        'sending the same request again can succeed (docs/api/errors.md). Requests are limited per project ' +
        '(RateLimit-* headers; 429 with Retry-After beyond). Every response carries X-Request-Id. Outbound ' +
        'webhooks are described under `webhooks`.',
    },
    servers: [{ url: info.serverUrl }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'sk_… (or pk_… on /v1/track)' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' },
      },
      headers: responseHeaders,
      responses: errors.components(),
      schemas: { Error: ErrorBody, ...components },
    },
    paths,
    webhooks: webhookOperations(),
  };
}

/** The operations of a path item (`get`, `post`, …), with their method. */
function operations(
  pathItem: Record<string, unknown>,
): Array<[string, { responses?: Record<string, Record<string, unknown>> }]> {
  return Object.entries(pathItem).filter(([m]) => ['get', 'put', 'post', 'patch', 'delete'].includes(m)) as Array<
    [string, { responses?: Record<string, Record<string, unknown>> }]
  >;
}

/**
 * The whole document: the declared routes plus the hand-described ones (`extraPaths`: routes that answer HTML,
 * `message/rfc822` or read their own body), whose responses get the headers every response carries
 * (`X-Request-Id`; `Retry-After` on 429 and 503) and a 503.
 */
export function apiDocument(
  routes: AnyRoute[],
  extraPaths: Record<string, Record<string, unknown>>,
  info: { version: string; serverUrl: string },
) {
  const errors = new ErrorResponses();
  const doc = buildOpenApi(routes, info, errors);
  for (const [path, item] of Object.entries(extraPaths)) {
    const copy = JSON.parse(JSON.stringify(item)) as Record<string, unknown>;
    for (const [, op] of operations(copy)) {
      const responses = (op.responses ??= {});
      responses['503'] ??= errors.ref(503, { rateLimited: false, idempotent: false });
      for (const [status, response] of Object.entries(responses)) {
        if ('$ref' in response) continue;
        response.headers = {
          ...headersFor(Number(status), { rateLimited: false, idempotent: false }),
          ...(response.headers as object | undefined),
        };
      }
    }
    doc.paths[path] = copy;
  }
  doc.components.responses = errors.components();
  return doc;
}
