/**
 * Email verification: `POST /v1/verify` (one address) and `POST /v1/verify/batch` (up to 100, sharing one DNS
 * lookup per domain). The checks and the `valid` rule are `@mailroom/verify/verify`; DNS answers are cached in Redis
 * (`@mailroom/verify/dns`).
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { createDnsLookup } from '@mailroom/verify/dns';
import { verifyEmail, verifyEmails } from '@mailroom/verify/verify';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { Nullable } from './common';

const Result = Type.Object({
  email: Type.String(),
  valid: Type.Boolean({
    description:
      'false for bad syntax, a domain that does not exist, or a domain that cannot receive mail (a null MX, RFC 7505, or neither MX nor ' +
      'A/AAAA records: RFC 5321 implicit MX counts as receiving). Disposable, alias, role and typo addresses stay valid and are flagged. ' +
      'When DNS does not answer in time, what could not be checked does not make it false; `reasons` says so.',
  }),
  isDisposable: Type.Boolean({
    description: 'a temporary-mailbox service (matched on the registrable domain: x.mailinator.com counts)',
  }),
  isAlias: Type.Boolean({
    description: 'a relay service: Apple Hide My Email, Firefox Relay, SimpleLogin, addy.io, DuckDuckGo, Proton Pass…',
  }),
  isTypo: Type.Boolean({ description: 'the domain looks misspelled; see `suggestion`' }),
  isPlusAddressed: Type.Boolean({ description: 'a subaddress: local+tag@' }),
  isPersonalEmail: Type.Boolean({ description: 'a free personal provider (gmail.com, yahoo.co.uk…)' }),
  isRoleAccount: Type.Boolean({
    description: 'a team or function address: admin@, info@, support@, noreply@, postmaster@…',
  }),
  domainExists: Type.Boolean(),
  hasWebsite: Type.Boolean({ description: 'A/AAAA for the domain or www.' }),
  hasMxRecords: Type.Boolean(),
  suggestion: Nullable(Type.String({ description: 'the address with the domain corrected, when `isTypo`' })),
  reasons: Type.Array(Type.String(), { description: 'every false or risky flag, in plain words' }),
});

const Address = Type.String({
  minLength: 1,
  maxLength: 320,
  description: 'the address to check; bad syntax is a result (`valid: false`), not an error',
});

/** Routes of this module. */
export function verifyRoutes(deps: AppDeps) {
  const lookup = createDnsLookup(deps.config, deps.redis);
  return [
    route({
      method: 'post',
      path: '/v1/verify',
      operationId: 'verifyEmail',
      tag: 'Verification',
      summary: 'Check whether an address is worth mailing',
      description:
        'Syntax (RFC 5322, quoted local parts, internationalized domains via punycode), disposable, alias, personal-provider and role ' +
        'lists, plus-addressing, domain typos (with `suggestion`), and DNS: MX, implicit MX, null MX, domain existence, website.',
      auth: 'secret',
      example: { email: 'ada@example.org' },
      body: Type.Object({ email: Address }, { additionalProperties: false }),
      response: Result,
      status: 200,
      errors: [400, 401, 403, 413, 422, 429],
      handler: async ({ body }) => ({ data: await verifyEmail(body.email, lookup) }),
    }),
    route({
      method: 'post',
      path: '/v1/verify/batch',
      operationId: 'verifyEmails',
      tag: 'Verification',
      summary: 'Check up to 100 addresses at once',
      description: 'Results in input order; addresses of one domain share one DNS lookup.',
      auth: 'secret',
      example: { emails: ['ada@example.org', 'grace@example.net'] },
      body: Type.Object(
        { emails: Type.Array(Address, { minItems: 1, maxItems: 100 }) },
        { additionalProperties: false },
      ),
      response: Type.Object({ results: Type.Array(Result) }),
      status: 200,
      errors: [400, 401, 403, 413, 422, 429],
      handler: async ({ body }) => ({ data: { results: await verifyEmails(body.emails, lookup) } }),
    }),
  ];
}
