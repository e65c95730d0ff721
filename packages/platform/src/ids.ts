/**
 * Identifiers and keyset cursors.
 *
 * Every row id is a UUIDv7 (RFC 9562): time-ordered, so `ORDER BY id` is creation order and a keyset cursor is
 * just the last id seen, encoded opaquely.
 *
 * @module
 */
import { createHash } from 'node:crypto';
import { v7 as uuidv7, validate as uuidValidate, version as uuidVersion } from 'uuid';
import { AppError, ErrorCode } from './errors';

/** A new UUIDv7 (RFC 9562 §5.7). */
export function newId(): string {
  return uuidv7();
}

/**
 * A new UUIDv7 for the millisecond `ms` (Unix epoch ms). Rows whose `created_at` is that same millisecond keep id
 * order equal to time order, so time filters can be id ranges ({@link idLowerBound}).
 */
export function newIdAt(ms: number): string {
  return uuidv7({ msecs: ms });
}

/**
 * A deterministic UUIDv7 (RFC 9562 §5.7): timestamp `ms` (Unix epoch ms, clamped to 48 bits), the 74 other bits the
 * first bits of SHA-256(`key`). The same (ms, key) always gives the same id, so a row whose id is derived this way
 * is written at most once (the primary key refuses the second). Same as SQL `mailroom_uuid_v7_keyed` (migration 0018).
 */
export function keyedIdAt(ms: number, key: string): string {
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(Math.min(Math.max(0, Math.floor(ms)), 2 ** 48 - 1), 0, 6);
  createHash('sha256').update(key, 'utf8').digest().copy(bytes, 6, 0, 10);
  bytes[6] = 0x70 | (bytes[6] & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8] & 0x3f); // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** The Unix epoch millisecond in the first 48 bits of a UUIDv7 `id`. */
export function idTimestampMs(id: string): number {
  return parseInt(id.replace(/-/g, '').slice(0, 12), 16);
}

/**
 * The smallest UUIDv7 of millisecond `ms`: `id >= idLowerBound(t)` selects rows made at or after `t`, and
 * `id < idLowerBound(t + 1)` those made at or before `t` (for ids made by {@link newIdAt} or {@link newId}).
 */
export function idLowerBound(ms: number): string {
  const hex = Math.max(0, Math.floor(ms)).toString(16).padStart(12, '0').slice(-12);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-0000-0000-000000000000`;
}

/** True when `id` (a UUID string) is version 7, so that {@link idTimestampMs} reads its creation time (RFC 9562 §5.7). */
export function isUuidV7(id: string): boolean {
  return uuidValidate(id) && uuidVersion(id) === 7;
}

/** True when `value` is a UUID string (any version); ids that are not can never exist. */
export function isUuid(value: string): boolean {
  return uuidValidate(value);
}

/** Encodes the last id of a page as an opaque cursor (base64url). */
export function encodeCursor(lastId: string): string {
  return Buffer.from(`v1:${lastId}`, 'utf8').toString('base64url');
}

function invalidCursor(): AppError {
  return new AppError(ErrorCode.INVALID_PARAMETERS, 'cursor: is not a cursor returned by this API', {
    errors: [{ field: 'cursor', message: 'is not a cursor returned by this API', code: 'invalid_string' }],
  });
}

/**
 * Decodes a cursor made by {@link encodeCursor}.
 *
 * @throws {@link AppError} 400 `INVALID_PARAMETERS` naming `cursor` when it is not one of ours.
 */
export function decodeCursor(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const id = text.startsWith('v1:') ? text.slice(3) : '';
  if (!isUuid(id)) throw invalidCursor();
  return id;
}

/** Encodes the last key of a page ordered by a text key (e.g. event names) as an opaque cursor (base64url). */
export function encodeKeyCursor(lastKey: string): string {
  return Buffer.from(`k1:${lastKey}`, 'utf8').toString('base64url');
}

/**
 * Decodes a cursor made by {@link encodeKeyCursor}.
 *
 * @throws {@link AppError} 400 `INVALID_PARAMETERS` naming `cursor` when it is not one of ours.
 */
export function decodeKeyCursor(cursor: string): string {
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  if (!text.startsWith('k1:') || text.length < 4) throw invalidCursor();
  return text.slice(3);
}
