/**
 * Sending domains: `POST /domains` registers the identity (Easy DKIM and a custom MAIL FROM domain) and returns the
 * DNS records to publish; `GET /domains` (keyset, `verified`), `GET /domains/{id}`, `POST /domains/{id}/verify`
 * (check now) and `DELETE /domains/{id}` (also removes the identity; 409 while a SCHEDULED, SENDING or PAUSED campaign
 * sends from it). The worker re-checks pending domains every `DOMAIN_REFRESH_MS`. `from` addresses must be on a
 * verified domain of the project (or a subdomain of one).
 *
 * Plunk v2 compatibility: `GET /domains/{id}/verify` (Plunk's method) does what the POST does, every domain answer
 * carries `dkimTokens` and `projectId`, and the verify answer also carries Plunk's `tokens`.
 *
 * @module
 */
import { Type, type Static } from '@sinclair/typebox';
import { notFound } from '@mailroom/platform/errors';
import { createIdentityProvider, type DomainIdentityProvider } from '@mailroom/mail/identities';
import { checkTrackingDomainNow, setTrackingDomain, type TrackingDeps } from '@mailroom/mail/domain-tracking';
import { createTrackingSetProvider } from '@mailroom/mail/tracking';
import { connectionClientConfig } from '@mailroom/mail/connections';
import { addDomain, checkDomain, removeDomain } from '@mailroom/mail/domains';
import { createResolver } from '@mailroom/verify/dns';
import { getDomain, listDomains, type DomainRow } from '@mailroom/mail/queries/domains';
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

const RecordState = StringEnum(['pending', 'found', 'failed'] as const);

const DnsRecord = Type.Object({
  purpose: StringEnum(
    ['dkim', 'mail-from-mx', 'mail-from-spf', 'dmarc', 'tracking', 'inbound-mx'] as const,
    '`tracking`: the CNAME of the custom tracking domain (listed while one is set); `inbound-mx`: the MX record that receives mail for the domain (listed while inbound is enabled)',
  ),
  type: StringEnum(['CNAME', 'TXT', 'MX'] as const),
  name: Type.String(),
  value: Type.String(),
  priority: Type.Optional(Type.Integer()),
  required: Type.Boolean({ description: 'false for the DMARC suggestion' }),
  status: RecordState,
});

/** The answer of every domain route. */
export const DomainSchema = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  domain: Type.String(),
  status: StringEnum(['pending', 'verified', 'failed'] as const),
  verified: Type.Boolean(),
  mailFromDomain: Nullable(Type.String()),
  dkimTokens: Type.Array(Type.String(), {
    description:
      'Easy DKIM tokens: publish `<token>._domainkey.<domain>` CNAME `<token>.dkim.amazonses.com` (also in records)',
  }),
  records: Type.Array(DnsRecord, { description: 'publish these; `status` is what the last check found' }),
  checkedAt: Nullable(Timestamp),
  verifiedAt: Nullable(Timestamp),
  failedAt: Nullable(Timestamp),
  failureReason: Nullable(Type.String()),
  inboundEnabled: Type.Boolean({
    description: 'mail to the domain is received (PUT /domains/{id}/inbound); its records then include the inbound MX',
  }),
  trackingDomain: Nullable(
    Type.String({
      description:
        "the custom open/click tracking domain (PUT /domains/{id}/tracking); its CNAME is in records. null: SES's shared tracking domain",
    }),
  ),
  trackingReady: Type.Boolean({
    description:
      "the tracking domain's CNAME was found and its SES configuration sets made: tracked mail from this domain uses it",
  }),
  createdAt: Timestamp,
});
const Domain = DomainSchema;

/** The answer of a verification: the domain, with Plunk's name for the DKIM tokens. */
const VerifyResult = Type.Object({
  ...Domain.properties,
  tokens: Type.Array(Type.String(), { description: "same as dkimTokens (Plunk's form)" }),
});

/**
 * A domain as the API shows it; with inbound enabled, its records end with the MX record that receives its mail
 * (`mxHost`, priority 10; `status` pending: the sending identity's check does not look at it).
 */
export function presentDomain(d: DomainRow, mxHost: string): Static<typeof Domain> {
  const inbound = d.inboundEnabled
    ? [
        {
          purpose: 'inbound-mx' as const,
          type: 'MX' as const,
          name: d.domain,
          value: mxHost,
          priority: 10,
          required: true,
          status: 'pending' as const,
        },
      ]
    : [];
  return {
    id: d.id,
    projectId: d.projectId,
    domain: d.domain,
    status: d.status,
    verified: d.verified,
    mailFromDomain: d.mailFromDomain,
    dkimTokens: d.dkimTokens,
    records: [...d.records, ...inbound],
    checkedAt: d.checkedAt?.toISOString() ?? null,
    verifiedAt: d.verifiedAt?.toISOString() ?? null,
    failedAt: d.failedAt?.toISOString() ?? null,
    failureReason: d.failureReason,
    inboundEnabled: d.inboundEnabled,
    trackingDomain: d.trackingDomain,
    trackingReady: d.trackingReadyAt !== null,
    createdAt: d.createdAt.toISOString(),
  };
}

/** Routes of this module. `identities` defaults to the provider `DOMAIN_IDENTITY_PROVIDER` selects. */
export function domainRoutes(deps: AppDeps, identities?: DomainIdentityProvider) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  const resolver = createResolver(deps.config);
  const provider = identities ?? createIdentityProvider(deps.config, resolver);

  const domains = { db, config: deps.config, identities: provider };
  const tracking: TrackingDeps = {
    db,
    connections: deps.config.sesConnections,
    resolver,
    sets: (c) => createTrackingSetProvider(deps.config, connectionClientConfig(c)),
  };

  return [
    route({
      method: 'get',
      path: '/domains',
      operationId: 'listDomains',
      tag: 'Domains',
      summary: 'List sending domains, newest first',
      auth: 'secret',
      query: Type.Object({ ...PageQuery, verified: Type.Optional(Type.Boolean()) }, { additionalProperties: false }),
      response: Type.Object({ items: Type.Array(Domain), ...PageFields }),
      status: 200,
      errors: [400, 401, 403, 429],
      handler: async ({ query, auth }) => {
        const page = await listDomains(reads, auth.projectId, {
          limit: query.limit,
          beforeId: cursorId(query.cursor),
          verified: query.verified,
        });
        return { data: keysetPage(page, (d) => presentDomain(d, deps.config.inboundMxHost), page.total) };
      },
    }),
    route({
      method: 'post',
      path: '/domains',
      operationId: 'addDomain',
      tag: 'Domains',
      summary: 'Add a sending domain; returns the DNS records to publish',
      description:
        'Registers the domain with the identity provider (SES: `CreateEmailIdentity` with Easy DKIM, and a custom MAIL FROM domain ' +
        '`MAIL_FROM_SUBDOMAIN.<domain>`). Publish the three DKIM CNAMEs, the MAIL FROM MX and SPF TXT, and consider the DMARC TXT; the ' +
        'worker re-checks pending domains every `DOMAIN_REFRESH_MS`, and `POST /domains/{id}/verify` checks now. A domain belongs to one ' +
        'project: one already added anywhere is 409. Internationalized names are stored in ASCII (punycode).',
      auth: 'secret',
      body: Type.Object({ domain: Type.String({ minLength: 1, maxLength: 253 }) }, { additionalProperties: false }),
      example: { domain: 'example.com' },
      response: Domain,
      status: 201,
      errors: [400, 401, 403, 409, 413, 422, 429, 503],
      handler: async ({ body, auth, log }) => {
        return {
          data: presentDomain(await addDomain(domains, auth.projectId, body.domain, log), deps.config.inboundMxHost),
        };
      },
    }),
    route({
      method: 'get',
      path: '/domains/:id',
      operationId: 'getDomain',
      tag: 'Domains',
      summary: 'A sending domain with its records and their state',
      auth: 'secret',
      params: IdParams,
      response: Domain,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, auth }) => {
        const d = await getDomain(db, auth.projectId, params.id);
        if (!d) throw notFound('Domain');
        return { data: presentDomain(d, deps.config.inboundMxHost) };
      },
    }),
    ...(['post', 'get'] as const).map((method) =>
      route({
        method,
        path: '/domains/:id/verify',
        operationId: method === 'post' ? 'verifyDomain' : 'verifyDomainPlunk',
        tag: 'Domains',
        summary: method === 'post' ? 'Check the domain now' : 'Check the domain now (Plunk v2 method)',
        description:
          'Asks the identity provider (SES `GetEmailIdentity`, or the DNS records themselves locally) and records the answer. ' +
          "`GET` is Plunk v2's method for the same check; the answer carries Plunk's `tokens` (= `dkimTokens`) too.",
        auth: 'secret',
        params: IdParams,
        response: VerifyResult,
        status: 200,
        errors: [400, 401, 403, 404, 422, 429, 503],
        handler: async ({ params, auth }) => {
          const checked = presentDomain(
            await checkTrackingDomainNow(tracking, await checkDomain(domains, auth.projectId, params.id)),
            deps.config.inboundMxHost,
          );
          return { data: { ...checked, tokens: checked.dkimTokens } };
        },
      }),
    ),
    route({
      method: 'put',
      path: '/domains/:id/tracking',
      operationId: 'setDomainTracking',
      tag: 'Domains',
      summary: "Set or clear the domain's custom open/click tracking domain",
      description:
        'A subdomain of the sending domain (e.g. `track.example.com`) that the links and open pixel of its tracked mail go through instead of ' +
        "SES's shared tracking domain. Publish the `tracking` CNAME of `records` (to `r.<region>.awstrack.me`); once it resolves and the domain " +
        'is verified, the SES configuration sets that redirect through it are made (the worker re-checks, `POST /domains/{id}/verify` checks now) ' +
        'and `trackingReady` turns true. null clears it.',
      auth: 'secret',
      params: IdParams,
      body: Type.Object(
        {
          trackingDomain: Nullable(
            Type.String({ minLength: 1, maxLength: 253, description: 'a subdomain of the sending domain; null: none' }),
          ),
        },
        { additionalProperties: false },
      ),
      example: { trackingDomain: 'track.example.com' },
      response: Domain,
      status: 200,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, auth, log }) => ({
        data: presentDomain(
          await setTrackingDomain({ ...tracking, logger: log }, auth.projectId, params.id, body.trackingDomain),
          deps.config.inboundMxHost,
        ),
      }),
    }),
    route({
      method: 'delete',
      path: '/domains/:id',
      operationId: 'deleteDomain',
      tag: 'Domains',
      summary: 'Remove a sending domain and its identity',
      description:
        'Refused (409) while a SCHEDULED, SENDING or PAUSED campaign sends from the domain or a subdomain; cancel or finish it first.',
      auth: 'secret',
      params: IdParams,
      response: Deleted,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429, 503],
      handler: async ({ params, auth }) => {
        const d = await removeDomain(domains, auth.projectId, params.id);
        return { data: { id: d.id, deleted: true as const } };
      },
    }),
  ];
}
