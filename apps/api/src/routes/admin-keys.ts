/**
 * `POST /admin/projects/{id}/keys/import` and the CLI's `project import-keys`: store keys an operator brings
 * from elsewhere (a Plunk project moved by hand), hashed like ours, so SDK users keep their keys.
 * `POST /admin/projects/{id}/keys` and the CLI's `project create-key`: a send-only secret key (scope `sending`),
 * optionally restricted to some of the project's sending domains.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { createKeyOp, importKeysOp } from '@mailroom/projects/admin-keys';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, StringEnum, Timestamp } from './common';

const ImportedKeys = Type.Object({
  projectId: Type.String(),
  keys: Type.Array(
    Type.Object({
      id: Type.String(),
      kind: Type.Union([Type.Literal('secret'), Type.Literal('public')]),
      mode: Type.Union([Type.Literal('live'), Type.Literal('test')], {
        description: 'test for a key shaped sk_test_…/pk_test_…',
      }),
      keyPrefix: Type.String({ description: 'the first 10 characters of the key (15 of a test key)' }),
      createdAt: Timestamp,
      expiresAt: Nullable(Timestamp),
      revokedAt: Nullable(Timestamp),
      active: Type.Boolean(),
      scope: StringEnum(['full', 'sending'] as const, '`sending`: POST /v1/send and SMTP only'),
      allowedDomains: Nullable(Type.Array(Type.String())),
    }),
  ),
});

const CreatedKey = Type.Object({
  id: Type.String(),
  projectId: Type.String(),
  key: Type.String({ description: 'the new key (sk_… or sk_test_…), shown once' }),
  kind: Type.Literal('secret'),
  mode: StringEnum(['live', 'test'] as const, 'test: an sk_test_… key (its mail goes to the test sink)'),
  keyPrefix: Type.String(),
  scope: StringEnum(['full', 'sending'] as const, '`sending`: POST /v1/send and SMTP only'),
  allowedDomains: Nullable(
    Type.Array(Type.String(), {
      description: 'the domains the key may send from (each with its subdomains); null: any verified domain',
    }),
  ),
  createdAt: Timestamp,
  expiresAt: Nullable(Timestamp),
  revokedAt: Nullable(Timestamp),
  active: Type.Boolean(),
});

const KeyField = (kind: 'secret' | 'public') =>
  Type.String({
    minLength: 1,
    maxLength: 200,
    description: `the ${kind} key to keep (${kind === 'secret' ? 'sk_' : 'pk_'}…), e.g. a Plunk project's \`${kind}\``,
  });

/** The route of this module; `onChange` flushes the auth cache (the keys may have been tried before). */
export function adminKeyRoutes(deps: AppDeps, onChange: () => void) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/admin/projects/:id/keys',
      operationId: 'adminCreateKey',
      tag: 'Admin',
      summary: 'Create a send-only secret key, optionally restricted to some sending domains',
      description:
        'A key of scope `sending` may call `POST /v1/send` and authenticate to the SMTP relay, nothing else (403 ' +
        '`KEY_SCOPE_FORBIDDEN` elsewhere). With `domains`, a send whose `from` is on another domain gets 403 ' +
        '`KEY_DOMAIN_FORBIDDEN` (each domain covers its subdomains; the verified-domain rule applies as well). Keys made ' +
        'before scopes, and the pairs `rotate-keys` issues, have full access. Revoke it like any key; its replacement ' +
        'keeps its scope and domains.',
      auth: 'admin',
      params: IdParams,
      body: Type.Object(
        {
          scope: Type.Literal('sending', { description: 'the only restricted scope: sending' }),
          domains: Type.Optional(
            Type.Array(Type.String({ minLength: 1, maxLength: 253 }), {
              maxItems: 100,
              description: 'domains of the project the key may send from',
            }),
          ),
          mode: Type.Optional(StringEnum(['live', 'test'] as const, 'test: an sk_test_… key')),
        },
        { additionalProperties: false },
      ),
      response: CreatedKey,
      status: 201,
      errors: [400, 401, 403, 404, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await createKeyOp(db, params.id, body);
        // It may have been tried (and cached as unknown) in this process before it existed.
        onChange();
        log.info(
          {
            projectId: r.projectId,
            keyId: r.id,
            keyPrefix: r.keyPrefix,
            scope: r.scope,
            allowedDomains: r.allowedDomains,
          },
          'scoped api key created',
        );
        return { data: r, status: 201 };
      },
    }),
    route({
      method: 'post',
      path: '/admin/projects/:id/keys/import',
      operationId: 'adminImportKeys',
      tag: 'Admin',
      summary: 'Keep existing keys: store given keys (hashed) as keys of the project',
      description:
        "For operators moving a project from Plunk by hand: the SDKs keep the keys they have. Plunk's keys (`sk_`/`pk_` and " +
        "48 hex digits) fit our format. Only the SHA-256 of each key is stored. The project's other keys stay valid. A key " +
        'already stored here (by any project) is refused with 409 and nothing is imported. `npm run cli -- import plunk` ' +
        "imports every project's keys at once.",
      auth: 'admin',
      params: IdParams,
      body: Type.Object(
        { secretKey: KeyField('secret'), publicKey: Type.Optional(KeyField('public')) },
        { additionalProperties: false },
      ),
      response: ImportedKeys,
      status: 201,
      errors: [400, 401, 403, 404, 409, 422, 429],
      handler: async ({ params, body, log }) => {
        const r = await importKeysOp(db, params.id, body);
        onChange();
        log.info({ projectId: r.projectId, keyPrefixes: r.keys.map((k) => k.keyPrefix) }, 'api keys imported');
        return { data: r };
      },
    }),
  ];
}
