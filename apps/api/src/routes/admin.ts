/**
 * Operator routes under `/admin/*`, guarded by `ADMIN_TOKEN`: the same operations as the CLI.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { adminOps } from '@mailroom/projects/admin';
import { emailStatsByProject } from '@mailroom/sending/queries/emails';
import { route } from '../http/route';
import { readDb, type AppDeps } from '../http/context';
import { IdParams, Nullable, StringEnum, Timestamp } from './common';

const IssuedProject = Type.Object({
  id: Type.String(),
  name: Type.String(),
  disabled: Type.Boolean(),
  publicKey: Type.String({ description: 'pk_…, shown once' }),
  secretKey: Type.String({ description: 'sk_…, shown once' }),
  testPublicKey: Type.String({ description: 'pk_test_…, shown once: a test key; what it creates is test data' }),
  testSecretKey: Type.String({
    description: 'sk_test_…, shown once: a test key; its mail goes to the sink, never to SES',
  }),
});
const KeyMode = StringEnum(
  ['live', 'test'] as const,
  '`live` keys (sk_…, pk_…) send through SES; `test` keys (sk_test_…, pk_test_…) deliver to the test sink',
);
const RotatedKeys = Type.Object({
  id: Type.String(),
  name: Type.String(),
  disabled: Type.Boolean(),
  mode: KeyMode,
  publicKey: Type.String({ description: 'the new public key of that mode (pk_… or pk_test_…), shown once' }),
  secretKey: Type.String({ description: 'the new secret key of that mode (sk_… or sk_test_…), shown once' }),
});
const ProjectState = Type.Object({ id: Type.String(), name: Type.String(), disabled: Type.Boolean() });
const Domain = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  domain: Type.String(),
  verified: Type.Boolean(),
  createdAt: Timestamp,
});
const KeyFields = {
  id: Type.String({ description: "the key's id" }),
  kind: Type.Union([Type.Literal('secret'), Type.Literal('public')]),
  mode: KeyMode,
  keyPrefix: Type.String({
    description:
      'the first 10 characters of a live key (sk_… or pk_…), 15 of a test key (sk_test_… or pk_test_…): the only part stored in clear',
  }),
  createdAt: Timestamp,
  expiresAt: Nullable(Timestamp),
  revokedAt: Nullable(Timestamp),
  active: Type.Boolean({ description: 'authenticates now: neither revoked nor expired' }),
  scope: StringEnum(
    ['full', 'sending'] as const,
    '`full`: every route of its kind; `sending`: POST /v1/send and the SMTP relay only',
  ),
  allowedDomains: Nullable(
    Type.Array(Type.String(), {
      description: "a `sending` key's domains (each with its subdomains); null: any verified domain",
    }),
  ),
};
const KeyInfo = Type.Object(KeyFields);
const RevokedKey = Type.Object({
  ...KeyFields,
  projectId: Type.String(),
  alreadyRevoked: Type.Boolean({ description: 'the key was revoked before this call; nothing changed' }),
  replacementKey: Nullable(
    Type.String({
      description:
        'a new key of the same kind, shown once: issued when the revoked key was a current key (not one a rotation had already ended)',
    }),
  ),
});
const DomainName = Type.String({
  minLength: 3,
  maxLength: 253,
  pattern: '^(?=.{3,253}$)([a-zA-Z0-9](?:[a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\\.)+[a-zA-Z]{2,63}\\.?$',
  description: 'a domain name, e.g. example.com',
  examples: ['example.com'],
});

/** Routes of this module; `onChange` runs after anything that affects authentication (cache flush). */
export function adminRoutes(deps: AppDeps, onChange: () => void) {
  const { db } = deps.database;
  /** Lists, searches and stats: a replica when one is usable (see `@mailroom/db/replicas`). */
  const reads = readDb(deps);
  const { config } = deps;
  return [
    route({
      method: 'get',
      path: '/admin/stats',
      operationId: 'adminStats',
      tag: 'Admin',
      summary: 'Emails per project by status, over the last hour and the last day',
      description:
        'Counts emails created in each window, by their current status. Projects without email in the last day are left out.',
      auth: 'admin',
      response: Type.Object({
        generatedAt: Timestamp,
        projects: Type.Array(
          Type.Object({
            projectId: Type.String(),
            projectName: Type.String(),
            lastHour: Type.Record(Type.String(), Type.Integer(), {
              description: 'status → emails created in the last hour',
            }),
            lastDay: Type.Record(Type.String(), Type.Integer(), {
              description: 'status → emails created in the last 24 hours',
            }),
          }),
        ),
      }),
      status: 200,
      errors: [401, 403, 429],
      handler: async () => ({
        data: { generatedAt: new Date().toISOString(), projects: await emailStatsByProject(reads) },
      }),
    }),
    route({
      method: 'post',
      path: '/admin/projects',
      operationId: 'adminCreateProject',
      tag: 'Admin',
      summary: 'Create a project with a live key pair and a test key pair',
      auth: 'admin',
      body: Type.Object({ name: Type.String({ minLength: 1, maxLength: 200 }) }, { additionalProperties: false }),
      response: IssuedProject,
      status: 201,
      errors: [400, 401, 403, 422, 429],
      handler: async ({ body }) => {
        const p = await adminOps.createProject(db, body.name);
        // Its keys may have been tried (and cached as unknown) in this process before they existed.
        onChange();
        return { data: p };
      },
    }),
    route({
      method: 'get',
      path: '/admin/projects/:id/keys',
      operationId: 'adminListKeys',
      tag: 'Admin',
      summary: "The project's API keys (prefix, dates, revocation), oldest first",
      description:
        'Never the keys themselves: only their first 10 characters. Revoked and expired keys stay listed as the audit trail.',
      auth: 'admin',
      params: IdParams,
      response: Type.Array(KeyInfo),
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params }) => ({ data: await adminOps.listKeys(db, params.id) }),
    }),
    route({
      method: 'post',
      path: '/admin/projects/:id/keys/revoke',
      operationId: 'adminRevokeKey',
      tag: 'Admin',
      summary: 'Revoke one API key at once (a leaked key)',
      description:
        'Name the key by the key itself, its first 10 characters (as listed) or its id. The key is refused at once by this ' +
        'process and by every other API process within AUTH_CACHE_TTL_MS. Revoking a current key issues a replacement of ' +
        'the same kind, returned once in `replacementKey`; a key a rotation already ended gets none. Repeating a revocation ' +
        'changes nothing (`alreadyRevoked`).',
      auth: 'admin',
      params: IdParams,
      body: Type.Object(
        {
          key: Type.String({
            minLength: 1,
            maxLength: 200,
            description: 'sk_…/pk_… key, its prefix as listed (10 characters; 15 for a test key), or the key id',
          }),
        },
        { additionalProperties: false },
      ),
      response: RevokedKey,
      status: 200,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await adminOps.revokeKey(db, params.id, body.key);
        onChange();
        log.info(
          {
            projectId: r.projectId,
            keyId: r.id,
            keyPrefix: r.keyPrefix,
            revokedAt: r.revokedAt,
            alreadyRevoked: r.alreadyRevoked,
            replaced: r.replacementKey !== null,
          },
          'api key revoked',
        );
        return { data: r };
      },
    }),
    route({
      method: 'post',
      path: '/admin/projects/:id/rotate-keys',
      operationId: 'adminRotateKeys',
      tag: 'Admin',
      summary: 'Issue new keys of one mode; the old ones of that mode keep working for KEY_ROTATION_GRACE_HOURS',
      description:
        '`mode=live` (default) rotates the sk_…/pk_… pair, `mode=test` the sk_test_…/pk_test_… pair; keys of the other mode ' +
        'are left alone. A project made before test mode has no test keys: `mode=test` issues its first pair.',
      auth: 'admin',
      params: IdParams,
      query: Type.Object({ mode: Type.Optional(KeyMode) }, { additionalProperties: false }),
      response: RotatedKeys,
      status: 200,
      errors: [400, 401, 403, 404, 429],
      handler: async ({ params, query }) => {
        const p = await adminOps.rotateKeys(db, params.id, config.keyRotationGraceHours, query.mode ?? 'live');
        onChange();
        return { data: p };
      },
    }),
    ...(['disable', 'enable'] as const).map((action) =>
      route({
        method: 'post',
        path: `/admin/projects/:id/${action}`,
        operationId: action === 'disable' ? 'adminDisableProject' : 'adminEnableProject',
        tag: 'Admin',
        summary: action === 'disable' ? 'Disable a project (API refused, queued mail not sent)' : 'Enable a project',
        auth: 'admin',
        params: IdParams,
        response: ProjectState,
        status: 200,
        errors: [400, 401, 403, 404, 429],
        handler: async ({ params }) => {
          const p = await adminOps.setDisabled(db, params.id, action === 'disable');
          onChange();
          return { data: p };
        },
      }),
    ),
    route({
      method: 'post',
      path: '/admin/projects/:id/domains',
      operationId: 'adminAddDomain',
      tag: 'Admin',
      summary: 'Register a sending domain for a project (optionally already verified)',
      auth: 'admin',
      params: IdParams,
      body: Type.Object(
        { domain: DomainName, verified: Type.Optional(Type.Boolean()) },
        { additionalProperties: false },
      ),
      response: Domain,
      status: 201,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body }) => {
        const d = await adminOps.addDomain(db, params.id, body.domain, body.verified ?? false);
        return {
          data: {
            id: d.id,
            projectId: d.projectId,
            domain: d.domain,
            verified: d.verified,
            createdAt: d.createdAt.toISOString(),
          },
        };
      },
    }),
  ];
}
