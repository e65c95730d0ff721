/**
 * Project and key administration: the operations `/admin/*` and the CLI share (create a project, list, rotate and
 * revoke its keys, disable it, add a domain). Each checks its input and answers with the platform's errors, so both
 * front ends report the same 4xx; the routes (apps/api) add only HTTP.
 *
 * @module
 */
import { AppError, ErrorCode, errorCode, notFound, validationError } from '@mailroom/platform/errors';
import { parseKeyReference, type KeyMode as KeyModeName } from './keys';
import {
  addDomain,
  createProject,
  listKeys,
  revokeKey,
  rotateKeys,
  setProjectDisabled,
  type KeySummary,
} from './queries/projects';
import { type Db } from '@mailroom/db/client';

/** A key as `/admin` and the CLI show it (ISO timestamps). */
export function presentKey(k: KeySummary) {
  return {
    id: k.id,
    kind: k.kind,
    mode: k.mode,
    keyPrefix: k.keyPrefix,
    createdAt: k.createdAt.toISOString(),
    expiresAt: k.expiresAt?.toISOString() ?? null,
    revokedAt: k.revokedAt?.toISOString() ?? null,
    active: k.active,
    scope: k.scope,
    allowedDomains: k.allowedDomains,
  };
}

/** The operations shared by `/admin/*` and the CLI. */
export const adminOps = {
  createProject: (db: Db, name: string) => createProject(db, name),
  /** Rotates the keys of one mode (`live` by default); the other mode's keys are left alone. */
  rotateKeys: async (db: Db, projectId: string, graceHours: number, mode: KeyModeName = 'live') => {
    const p = await rotateKeys(db, projectId, graceHours, mode);
    if (!p) throw notFound('Project');
    return p;
  },
  listKeys: async (db: Db, projectId: string) => {
    const keys = await listKeys(db, projectId);
    if (!keys) throw notFound('Project');
    return keys.map(presentKey);
  },
  /**
   * Revokes one key of the project at once; `reference` is the key itself, its 10-character prefix or its id.
   * Revoking a current key issues a replacement of the same kind (`replacementKey`, shown once).
   *
   * @throws {@link AppError} 422 on `key` (not a key, prefix or id), 404 (project, or no such key in it), 409 `CONFLICT`
   * (a prefix shared by several keys of the project).
   */
  revokeKey: async (db: Db, projectId: string, reference: string) => {
    const ref = parseKeyReference(reference);
    if (!ref) {
      throw validationError([
        {
          field: 'key',
          message:
            'must be the key (sk_… or pk_…), its prefix as listed (10 characters, 15 for sk_test_…/pk_test_…), or its id',
          code: 'invalid_string',
        },
      ]);
    }
    const r = await revokeKey(db, projectId, ref);
    if (!r.ok && r.reason === 'project_not_found') throw notFound('Project');
    if (!r.ok && r.reason === 'key_not_found') throw notFound('API key');
    if (!r.ok)
      throw new AppError(
        ErrorCode.CONFLICT,
        'More than one key of this project starts with that prefix: give the whole key or its id',
      );
    return { ...presentKey(r.key), projectId, alreadyRevoked: r.alreadyRevoked, replacementKey: r.replacementKey };
  },
  setDisabled: async (db: Db, projectId: string, disabled: boolean) => {
    const p = await setProjectDisabled(db, projectId, disabled);
    if (!p) throw notFound('Project');
    return p;
  },
  addDomain: async (db: Db, projectId: string, domain: string, verified: boolean) => {
    const r = await addDomain(db, projectId, domain, verified).catch((err: unknown) => {
      if (errorCode(err) === '23503') throw notFound('Project');
      throw err;
    });
    if (!r.ok && r.reason === 'invalid')
      throw validationError([
        { field: 'domain', message: 'must be a domain name such as example.com', code: 'invalid_string' },
      ]);
    if (!r.ok) throw new AppError(ErrorCode.CONFLICT, `The domain ${domain} belongs to another project`);
    return r.domain;
  },
};
