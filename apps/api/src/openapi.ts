/**
 * The OpenAPI 3.1 document, generated from the same route declarations and TypeBox schemas that ajv enforces.
 *
 * @module
 */
import type { TSchema } from '@sinclair/typebox';
import { registeredSchemas } from '@mailroom/platform/validation';
import type { AnyRoute } from './http/route';

const statusText: Record<number, string> = {
  400: 'Malformed JSON, wrong content type, or a bad query/path parameter (BAD_REQUEST, INVALID_JSON, INVALID_PARAMETERS)',
  401: 'Missing, malformed, unknown, expired or revoked API key (UNAUTHORIZED)',
  403: 'Public key on a secret-key route, or project disabled (PUBLIC_KEY_NOT_ALLOWED, PROJECT_DISABLED, FORBIDDEN)',
  404: 'Unknown id, or an id of another project (NOT_FOUND)',
  409: 'State conflict (CONFLICT, INVALID_STATE), or a request with the same Idempotency-Key still in progress (CONFLICT)',
  413: 'Request body too large (PAYLOAD_TOO_LARGE)',
  415: 'Content-Encoding other than identity, gzip, deflate or br, or a charset other than UTF-8 (UNSUPPORTED_MEDIA_TYPE); a body that does not decode as its encoding says is 400',
  422: 'Validation failed; error.errors lists the fields (VALIDATION_ERROR); or an Idempotency-Key reused with a different request (IDEMPOTENCY_CONFLICT)',
  429: 'Rate limit exceeded; see Retry-After (RATE_LIMITED)',
};

const ErrorBody = {
  type: 'object',
  required: ['success', 'error', 'code', 'message', 'timestamp'],
  properties: {
    success: { const: false },
    error: {
      type: 'object',
      required: ['code', 'message', 'statusCode', 'requestId'],
      properties: {
        code: { type: 'string', description: 'machine-readable code, e.g. VALIDATION_ERROR' },
        message: { type: 'string' },
        statusCode: { type: 'integer' },
        requestId: { type: 'string', description: 'also sent as the X-Request-Id header' },
        errors: {
          type: 'array',
          items: {
            type: 'object',
            required: ['field', 'message', 'code'],
            properties: {
              field: { type: 'string', description: 'dotted path, e.g. to.0.email' },
              message: { type: 'string' },
              code: {
                type: 'string',
                enum: ['invalid_type', 'invalid_string', 'invalid_enum_value', 'too_small', 'too_big', 'unrecognized_keys', 'custom'],
              },
            },
          },
        },
        suggestion: { type: 'string' },
      },
    },
    code: { type: 'string', description: 'same as error.code (for Plunk SDKs)' },
    message: { type: 'string', description: 'same as error.message (for Plunk SDKs)' },
    timestamp: { type: 'string', format: 'date-time' },
  },
};

const IdempotencyKeyParameter = {
  name: 'Idempotency-Key',
  in: 'header',
  required: false,
  description:
    'Makes a retry safe: the first response to a key (1–255 printable ASCII characters, per project) is replayed ' +
    'for 24 h with `Idempotent-Replayed: true`. The same key with a different request is 422 IDEMPOTENCY_CONFLICT; ' +
    'a duplicate sent while the first is still running waits for it (409 CONFLICT after 10 s).',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};

function plain(schema: TSchema): unknown {
  // Drops TypeBox's symbol keys and undefined values; a reference to a shared schema (by `$id`, as ajv resolves
  // it) points at its component.
  return JSON.parse(JSON.stringify(schema), (key, value: unknown) =>
    key === '$ref' && typeof value === 'string' && registeredSchemas().has(value) ? `#/components/schemas/${value}` : value,
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
export function buildOpenApi(routes: AnyRoute[], info: { version: string; serverUrl: string }) {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const r of routes) {
    const path = r.path.replace(/:(\w+)/g, '{$1}');
    const envelope = { type: 'object', required: ['success', 'data'], properties: { success: { const: true }, data: plain(r.response) } };
    const responses: Record<string, unknown> = {
      [r.status]: { description: 'Success', content: { 'application/json': { schema: envelope } } },
    };
    for (const [status, text] of Object.entries(r.otherStatuses ?? {})) {
      responses[status] = { description: text, content: { 'application/json': { schema: envelope } } };
    }
    // Every route that reads a JSON body can meet an encoding it does not speak.
    for (const status of r.body && !r.errors.includes(415) ? [...r.errors, 415] : r.errors) {
      responses[status] = {
        description: statusText[status] ?? 'Error',
        content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      };
    }
    responses['500'] = { description: 'Unexpected error (INTERNAL_ERROR); 503 when a backing service is down', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
    paths[path] ??= {};
    paths[path][r.method] = {
      operationId: r.operationId,
      summary: r.summary,
      description: r.description,
      tags: [r.tag],
      security: r.auth === 'none' ? [] : r.auth === 'admin' ? [{ adminToken: [] }] : [{ apiKey: [] }],
      parameters: [
        ...parameters(r.params as TSchema | undefined, 'path'),
        ...parameters(r.query as TSchema | undefined, 'query'),
        ...(r.idempotent ? [IdempotencyKeyParameter] : []),
      ],
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: plain(r.body as TSchema) } } } } : {}),
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
        '`{ success: true, data }`; every error body is the Error schema. Requests are limited per project ' +
        '(RateLimit-* headers on every response).',
    },
    servers: [{ url: info.serverUrl }],
    components: {
      securitySchemes: {
        apiKey: { type: 'http', scheme: 'bearer', description: 'sk_… (or pk_… on /v1/track)' },
        adminToken: { type: 'http', scheme: 'bearer', description: 'ADMIN_TOKEN' },
      },
      schemas: { Error: ErrorBody, ...sharedComponents() },
    },
    paths,
  };
}
