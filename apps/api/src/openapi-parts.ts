/**
 * Parts of the OpenAPI document that every operation shares: the error body, the response headers the API sends
 * (IETF draft-ietf-httpapi-ratelimit-headers `RateLimit-*`, RFC 9110 §10.2.3 `Retry-After`, `X-Request-Id`,
 * `Idempotent-Replayed`), the error responses per status with the codes each can carry (from the error catalog),
 * and request body examples synthesized from a schema.
 *
 * @module
 */
import { errorCatalog, type ErrorCode } from '@mailroom/platform/errors';

/** The error body (`Error` component): the same shape `sendError` writes. */
export const ErrorBody = {
  type: 'object',
  required: ['success', 'error', 'code', 'message', 'timestamp'],
  properties: {
    success: { const: false },
    error: {
      type: 'object',
      required: ['code', 'message', 'statusCode', 'retryable', 'requestId'],
      properties: {
        code: {
          type: 'string',
          enum: Object.keys(errorCatalog),
          description: 'machine-readable code (docs/api/errors.md)',
        },
        message: { type: 'string' },
        statusCode: { type: 'integer' },
        retryable: {
          type: 'boolean',
          description: 'whether the same request may succeed if sent again unchanged (after Retry-After when present)',
        },
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
                enum: [
                  'invalid_type',
                  'invalid_string',
                  'invalid_enum_value',
                  'too_small',
                  'too_big',
                  'unrecognized_keys',
                  'custom',
                ],
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

/** Response headers, as components (`#/components/headers/<name>`). */
export const responseHeaders = {
  'X-Request-Id': {
    description:
      "The request's id (the client's own `X-Request-Id` when it sent a sane one); in every log line and error body.",
    schema: { type: 'string' },
  },
  'RateLimit-Limit': {
    description:
      "Requests per minute of the project's limit (RATE_LIMIT_PER_MINUTE); IETF draft-ietf-httpapi-ratelimit-headers.",
    schema: { type: 'integer' },
  },
  'RateLimit-Remaining': { description: 'Requests left in the current window.', schema: { type: 'integer' } },
  'RateLimit-Reset': { description: 'Seconds until the window resets.', schema: { type: 'integer' } },
  'Retry-After': {
    description: 'Seconds to wait before retrying (RFC 9110 §10.2.3).',
    schema: { type: 'integer', minimum: 1 },
  },
  'Idempotent-Replayed': {
    description:
      'Present (`true`) when this response is the stored answer to an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
};

const header = (name: keyof typeof responseHeaders) => ({ $ref: `#/components/headers/${name}` });
const RATE_LIMIT_HEADERS = {
  'RateLimit-Limit': header('RateLimit-Limit'),
  'RateLimit-Remaining': header('RateLimit-Remaining'),
  'RateLimit-Reset': header('RateLimit-Reset'),
};

/** What decides an operation's headers. */
export interface HeaderTraits {
  /** Counted by the per-project rate limit (secret or public key routes): `RateLimit-*` past authentication. */
  rateLimited: boolean;
  /** Honours `Idempotency-Key`: a success may be a replay. */
  idempotent: boolean;
}

/** The headers of a response with `status` of an operation with `traits`. */
export function headersFor(status: number, traits: HeaderTraits): Record<string, unknown> {
  const out: Record<string, unknown> = { 'X-Request-Id': header('X-Request-Id') };
  // Rate limiting runs after authentication: a 401 or 403 from it has no RateLimit-* headers.
  if (traits.rateLimited && status !== 401 && status !== 403) Object.assign(out, RATE_LIMIT_HEADERS);
  if (status === 429 || status === 503) out['Retry-After'] = header('Retry-After');
  if (traits.idempotent && status < 300) out['Idempotent-Replayed'] = header('Idempotent-Replayed');
  return out;
}

/** The codes of the catalog with `status`. */
export function codesOf(status: number): ErrorCode[] {
  return (Object.keys(errorCatalog) as ErrorCode[]).filter((c) => errorCatalog[c].status === status);
}

/**
 * Error responses as components, each described once and referenced by every operation that can give it: the
 * `Error` schema with `error.code` narrowed to the codes the response carries, and a description listing them with
 * whether each is retryable.
 */
export class ErrorResponses {
  private readonly byName = new Map<string, Record<string, unknown>>();

  /**
   * A `$ref` to the error response of `status` for an operation with `traits`.
   *
   * @param codes - the codes this operation can answer with this status (default: every code of the status).
   */
  ref(status: number, traits: HeaderTraits, codes: ErrorCode[] = codesOf(status)): { $ref: string } {
    const limited = traits.rateLimited && status !== 401 && status !== 403;
    const narrowed = codes.length !== codesOf(status).length;
    const name = `Error${status}${limited ? 'RateLimited' : ''}${narrowed ? `_${codes.join('_')}` : ''}`;
    if (!this.byName.has(name))
      this.byName.set(name, errorResponse(status, { rateLimited: limited, idempotent: false }, codes));
    return { $ref: `#/components/responses/${name}` };
  }

  /** The `components.responses` object (sorted by name, so the document is stable). */
  components(): Record<string, unknown> {
    return Object.fromEntries([...this.byName].sort(([a], [b]) => a.localeCompare(b)));
  }
}

function errorResponse(status: number, traits: HeaderTraits, codes: ErrorCode[]): Record<string, unknown> {
  const listed = codes.map((c) => `\`${c}\` (${errorCatalog[c].retryable ? 'retryable' : 'not retryable'})`).join(', ');
  const description = `${codes.map((c) => `${c}: ${errorCatalog[c].meaning}`).join(' ')} Codes: ${listed}.`;
  const sameRetryable =
    codes.every((c) => errorCatalog[c].retryable === errorCatalog[codes[0]].retryable) && !codes.includes('CONFLICT');
  const narrow = {
    code: { enum: codes },
    ...(sameRetryable ? { retryable: { const: errorCatalog[codes[0]].retryable } } : {}),
  };
  const schema = {
    allOf: [
      { $ref: '#/components/schemas/Error' },
      { type: 'object', properties: { error: { type: 'object', properties: narrow } } },
    ],
  };
  return { description, headers: headersFor(status, traits), content: { 'application/json': { schema } } };
}

type Json = Record<string, unknown>;

const FORMAT_EXAMPLES: Record<string, string> = {
  email: 'ada@example.com',
  mailbox: 'Acme <hello@example.com>',
  uuid: '0190a6e5-7c1e-7d3a-9c1b-5d2f3e4a5b6c',
  'date-time': '2026-01-01T09:00:00.000Z',
  date: '2026-01-01',
  uri: 'https://example.com/hooks/mailroom',
  hostname: 'example.com',
};

/**
 * A value that satisfies `schema` (as far as a synthesized value can: the schema's own `examples`, `default`,
 * `const` or first `enum` value first; then the shape with its required properties only). `$ref`s are resolved
 * in `components`. Patterns are not synthesized: a schema with one should carry `examples`.
 */
export function exampleOf(schema: unknown, components: Record<string, unknown>, depth = 0): unknown {
  const s = (schema ?? {}) as Json;
  if (depth > 12) return undefined;
  if (typeof s.$ref === 'string')
    return exampleOf(components[s.$ref.replace('#/components/schemas/', '')], components, depth + 1);
  if (Array.isArray(s.examples) && s.examples.length > 0) return s.examples[0] as unknown;
  if (s.default !== undefined) return s.default;
  if (s.const !== undefined) return s.const;
  if (Array.isArray(s.enum)) return s.enum[0] as unknown;
  for (const key of ['anyOf', 'oneOf'] as const) {
    if (Array.isArray(s[key])) {
      const options = s[key] as Json[];
      return exampleOf(options.find((o) => o.type !== 'null') ?? options[0], components, depth + 1);
    }
  }
  if (Array.isArray(s.allOf)) {
    return Object.assign({}, ...(s.allOf as unknown[]).map((part) => exampleOf(part, components, depth + 1) as Json));
  }
  switch (s.type) {
    case 'object': {
      const props = (s.properties ?? {}) as Record<string, unknown>;
      const required = ((s.required ?? []) as string[]).filter((k) => k in props);
      // A patch body (`minProperties`) gets its first optional properties too.
      const optional = Object.keys(props).filter((k) => !required.includes(k));
      const keys = [...required, ...optional.slice(0, Math.max(0, Number(s.minProperties ?? 0) - required.length))];
      return Object.fromEntries(keys.map((k) => [k, exampleOf(props[k], components, depth + 1)]));
    }
    case 'array':
      return Array.from({ length: Math.max(1, Number(s.minItems ?? 1)) }, () =>
        exampleOf(s.items, components, depth + 1),
      );
    case 'string': {
      const base = (typeof s.format === 'string' && FORMAT_EXAMPLES[s.format]) || 'example';
      const min = Number(s.minLength ?? 0);
      return base.length >= min ? base : base.padEnd(min, 'x');
    }
    case 'integer':
    case 'number':
      return typeof s.minimum === 'number' ? Math.max(s.minimum, 1) : 1;
    case 'boolean':
      return true;
    case 'null':
      return null;
    default:
      return {};
  }
}
