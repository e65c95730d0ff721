/**
 * `POST /admin/projects/{id}/keys/import` and the CLI's `project import-keys`: store keys an operator brings
 * from elsewhere (a Plunk project moved by hand), hashed like ours, so SDK users keep their keys.
 *
 * @module
 */
import { Type } from '@sinclair/typebox';
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { keyKind, type KeyKind } from '@mailroom/platform/keys';
import { importProjectKeys } from '@mailroom/db/queries/import-keys';
import { type Db } from '@mailroom/db/client';
import { route } from '../http/route';
import type { AppDeps } from '../http/context';
import { IdParams, Nullable, Timestamp } from './common';
import { presentKey } from './admin';

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
  for (const [field, kind] of [['secretKey', 'secret'], ['publicKey', 'public']] as const) {
    const key = given[field]?.trim();
    if (key === undefined) continue;
    if (keyKind(key) !== kind) errors.push({ field, message: `must be a ${kind} key: ${kind === 'secret' ? 'sk_' : 'pk_'} ${KEY_RULE}`, code: 'invalid_string' });
    else keys.push({ kind, key });
  }
  if (errors.length > 0) throw validationError(errors);
  if (keys.length === 0) throw validationError([{ field: 'secretKey', message: 'is required (with publicKey optional)', code: 'invalid_type' }]);
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
      mode: Type.Union([Type.Literal('live'), Type.Literal('test')], { description: 'test for a key shaped sk_test_…/pk_test_…' }),
      keyPrefix: Type.String({ description: 'the first 10 characters of the key (15 of a test key)' }),
      createdAt: Timestamp,
      expiresAt: Nullable(Timestamp),
      revokedAt: Nullable(Timestamp),
      active: Type.Boolean(),
    }),
  ),
});

const KeyField = (kind: 'secret' | 'public') =>
  Type.String({ minLength: 1, maxLength: 200, description: `the ${kind} key to keep (${kind === 'secret' ? 'sk_' : 'pk_'}…), e.g. a Plunk project's \`${kind}\`` });

/** The route of this module; `onChange` flushes the auth cache (the keys may have been tried before). */
export function adminKeyRoutes(deps: AppDeps, onChange: () => void) {
  const { db } = deps.database;
  return [
    route({
      method: 'post',
      path: '/admin/projects/:id/keys/import',
      operationId: 'adminImportKeys',
      tag: 'Admin',
      summary: 'Keep existing keys: store given keys (hashed) as keys of the project',
      description:
        'For operators moving a project from Plunk by hand: the SDKs keep the keys they have. Plunk\'s keys (`sk_`/`pk_` and ' +
        '48 hex digits) fit our format. Only the SHA-256 of each key is stored. The project\'s other keys stay valid. A key ' +
        'already stored here (by any project) is refused with 409 and nothing is imported. `npm run cli -- import plunk` ' +
        'imports every project\'s keys at once.',
      auth: 'admin',
      params: IdParams,
      body: Type.Object({ secretKey: KeyField('secret'), publicKey: Type.Optional(KeyField('public')) }, { additionalProperties: false }),
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
