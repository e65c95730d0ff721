/**
 * Stable ids for rows imported from Plunk: the same Plunk row always becomes the same row here, so a second
 * import finds what the first one wrote (`ON CONFLICT DO NOTHING`) and references between imported rows can be
 * computed without a mapping table.
 *
 * The id is a UUIDv7 (RFC 9562 §5.7) whose 48-bit timestamp is the Plunk row's `createdAt` (ms) and whose 74
 * "random" bits are the first bits of SHA-256(`plunk:<kind>:<plunk id>`). Like every id of ours it sorts by
 * creation time (keyset pages, and `since`/`until` event filters that are id ranges, keep working), and unlike
 * a UUIDv5 it needs no namespace registry. Two Plunk rows of one kind would share an id only if their SHA-256
 * prefixes collided within the same millisecond.
 *
 * @module
 */
import { createHash } from 'node:crypto';

/** The kinds of Plunk rows that get an id here (the `<kind>` of the hash input). */
export type PlunkKind =
  | 'project'
  | 'key'
  | 'domain'
  | 'contact'
  | 'template'
  | 'segment'
  | 'campaign'
  | 'email'
  | 'workflow'
  | 'step'
  | 'transition'
  | 'event';

/**
 * The id here of the Plunk row `plunkId` of `kind` created at `createdAt`.
 *
 * @param createdAt - the Plunk row's `createdAt` (a Date, or anything `new Date()` reads); clamped to the 48-bit
 *   millisecond range of UUIDv7.
 * @returns a lower-case UUIDv7 string.
 */
export function plunkRowId(kind: PlunkKind, plunkId: string, createdAt: Date | string | number): string {
  const ms = Math.min(Math.max(0, Math.floor(new Date(createdAt).getTime()) || 0), 2 ** 48 - 1);
  const bytes = Buffer.alloc(16);
  bytes.writeUIntBE(ms, 0, 6);
  createHash('sha256').update(`plunk:${kind}:${plunkId}`, 'utf8').digest().copy(bytes, 6, 0, 10);
  bytes[6] = 0x70 | (bytes[6] & 0x0f); // version 7
  bytes[8] = 0x80 | (bytes[8] & 0x3f); // variant 10
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
