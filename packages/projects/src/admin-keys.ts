/**
 * Keys an operator issues or brings (CLI and `/admin`): a send-only secret key (scope `sending`), optionally restricted
 * to some of the project's sending domains; and keys imported from elsewhere (a Plunk project moved by hand), hashed
 * like ours, so SDK users keep their keys.
 *
 * @module
 */
import { AppError, ErrorCode, notFound, validationError, type FieldError } from '@mailroom/platform/errors';
import { asciiHostname } from '@mailroom/platform/address';
import { type Db } from '@mailroom/db/client';
import { keyKind, type KeyKind, type KeyMode } from './keys';
import { importProjectKeys } from './queries/import-keys';
import { createScopedKey, projectDomainNames } from './queries/projects';
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
