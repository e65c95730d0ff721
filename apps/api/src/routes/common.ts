/**
 * Schemas shared by several routes.
 *
 * @module
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { decodeCursor, encodeCursor } from '@mailroom/core';

/** A string limited to `values`, reported as `invalid_enum_value` (not as a union of constants). */
export function StringEnum<T extends string>(values: readonly T[], description?: string) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
}

/** Nullable variant of a schema. */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

export { EmailAddress } from '@mailroom/core';

/** `:id` path parameter. */
export const IdParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'resource id' }) });

/** `limit` and `cursor` of every list (API.md "Pagination"). */
export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: 'page size, 1–100, as plain decimal digits (`1e2`, `0x10`, ` 5` are 400)' }),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page' })),
};

/** The paging fields every list response carries. */
export const PageFields = {
  nextCursor: Nullable(Type.String({ description: 'pass as `cursor` for the next page; null on the last page' })),
  hasMore: Type.Boolean(),
  total: Type.Integer({ description: 'items matching the filters' }),
};

/** Response of a delete. */
export const Deleted = Type.Object({ id: Type.String(), deleted: Type.Literal(true) });

/** ISO 8601 timestamp. */
export const Timestamp = Type.String({ format: 'date-time' });

/** The id a `cursor` query parameter stands for (400 `INVALID_PARAMETERS` when it is not ours), or undefined. */
export function cursorId(cursor: string | undefined): string | undefined {
  return cursor ? decodeCursor(cursor) : undefined;
}

/**
 * The list body of API.md "Pagination" from one keyset page (newest first by id): `items`, `nextCursor` (the last
 * item's id, opaque; null on the last page), `hasMore` and `total`.
 */
export function keysetPage<R extends { id: string }, T>(page: { items: R[]; hasMore: boolean }, present: (row: R) => T, total: number) {
  const last = page.items[page.items.length - 1];
  return { items: page.items.map(present), nextCursor: page.hasMore && last ? encodeCursor(last.id) : null, hasMore: page.hasMore, total };
}
