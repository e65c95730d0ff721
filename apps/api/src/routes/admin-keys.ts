/**
 * `POST /admin/projects/{id}/keys/import` and the CLI's `project import-keys`: store keys an operator brings
 * from elsewhere (a Plunk project moved by hand), hashed like ours, so SDK users keep their keys.
 * `POST /admin/projects/{id}/keys` and the CLI's `project create-key`: a send-only secret key (scope `sending`),
 * optionally restricted to some of the project's sending domains.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { keyKind, type KeyKind, type KeyMode } from '@mailroom/projects/keys';
import { asciiHostname } from '@mailroom/platform/address';
import { importProjectKeys } from '@mailroom/projects/queries/import-keys';
import { createScopedKey, projectDomainNames } from '@mailroom/projects/queries/projects';
import { type Db } from '@mailroom/db/client';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, StringEnum, Timestamp } from './common';
import { presentKey } from './admin';

/** What a scoped key is asked for (CLI and `/admin`). */
export interface ScopedKeyRequest {
  scope: 'sending';
  /** Sending domains the key may send from; each must be a domain of the project. Omitted: any verified one. */
  domains?: string[];
  mode?: KeyMode;
}

/**
 * Issues a send-only secret key (`POST /v1/send` and SMTP only), shown once.
 *
 * @returns the key (once) and how `/admin` lists it.
 * @throws {@link AppError} 422 on `domains.N` (not a domain name, or not a domain of this project) or `domains`
 *   (empty), 404 (project).
 */
export async function createKeyOp(db: Db, projectId: string, given: ScopedKeyRequest) {
  let allowed: string[] | null = null;
  if (given.domains !== undefined) {
    const errors: FieldError[] = [];
    if (given.domains.length === 0)
      errors.push({
        field: 'domains',
        message: 'must list at least one domain (omit it for any verified domain)',
        code: 'too_small',
      });
    const own = new Set(await projectDomainNames(db, projectId));
    const names = given.domains.map((d, i) => {
      const name = asciiHostname(d);
      if (!name)
        errors.push({
          field: `domains.${i}`,
          message: 'must be a domain name such as example.com',
          code: 'invalid_string',
        });
      else if (!own.has(name))
        errors.push({ field: `domains.${i}`, message: `${name} is not a domain of this project`, code: 'custom' });
      return name ?? '';
    });
    if (errors.length > 0) throw validationError(errors);
    allowed = [...new Set(names)];
  }
  const r = await createScopedKey(db, projectId, given.mode ?? 'live', { scope: given.scope, allowedDomains: allowed });
  if (!r) throw notFound('Project');
  return { ...presentKey(r.summary), projectId, key: r.key };
}

const KEY_RULE = 'prefix and 32–128 characters of A–Z, a–z, 0–9, _ or - (Plunk keys are sk_/pk_ and 48 hex digits)';

/**
 * Imports keys into a project (CLI and `/admin`): each must be shaped as its kind (`sk_…` secret, `pk_…` public)
 * and stored nowhere here yet. The project's current keys stay valid.
 *
 * @returns the added keys as `/admin` lists them (prefix only, never the key).
 * @throws {@link AppError} 422 on `secretKey`/`publicKey` (malformed, or the wrong kind), 404 (project),
 *   409 `CONFLICT` (a key already in use here, by any project).
 */
export async function importKeysOp(db: Db, projectId: string, given: { secretKey?: string; publicKey?: string }) {
  const keys: { kind: KeyKind; key: string }[] = [];
  const errors: FieldError[] = [];
  for (const [field, kind] of [
    ['secretKey', 'secret'],
    ['publicKey', 'public'],
  ] as const) {
    const key = given[field]?.trim();
    if (key === undefined) continue;
    if (keyKind(key) !== kind)
      errors.push({
        field,
        message: `must be a ${kind} key: ${kind === 'secret' ? 'sk_' : 'pk_'} ${KEY_RULE}`,
        code: 'invalid_string',
      });
    else keys.push({ kind, key });
  }
  if (errors.length > 0) throw validationError(errors);
  if (keys.length === 0)
    throw validationError([
      { field: 'secretKey', message: 'is required (with publicKey optional)', code: 'invalid_type' },
    ]);
  const r = await importProjectKeys(db, projectId, keys);
  if (!r.ok && r.reason === 'project_not_found') throw notFound('Project');
  if (!r.ok) throw new AppError(ErrorCode.CONFLICT, `The ${r.kind} key is already in use here; nothing was imported`);
  return { projectId, keys: r.keys.map(presentKey) };
}

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
