/**
 * Schemas shared by several routes.
 *
 * @module
 */
import { Type, type TSchema } from '@sinclair/typebox';
import { AppError, ErrorCode } from '@mailroom/platform/errors';
import { decodeCursor, encodeCursor } from '@mailroom/platform/ids';

/** A string limited to `values`, reported as `invalid_enum_value` (not as a union of constants). */
export function StringEnum<T extends string>(values: readonly T[], description?: string) {
  return Type.Unsafe<T>({ type: 'string', enum: [...values], ...(description ? { description } : {}) });
}

/** Nullable variant of a schema. */
export function Nullable<T extends TSchema>(schema: T) {
  return Type.Union([schema, Type.Null()]);
}

export { EmailAddress } from '@mailroom/contacts/contacts';

/** `:id` path parameter. */
export const IdParams = Type.Object({ id: Type.String({ format: 'uuid', description: 'resource id' }) });

/** `limit` and `cursor` of every list (docs/api/overview.md, pagination). */
export const PageQuery = {
  limit: Type.Integer({
    minimum: 1,
    maximum: 100,
    default: 20,
    description: 'page size, 1–100, as plain decimal digits (`1e2`, `0x10`, ` 5` are 400)',
  }),
  cursor: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'nextCursor of the previous page' })),
};

/** The deepest row a page number may reach (Plunk's `page`/`pageSize` read by offset; use `cursor` beyond). */
export const MAX_PAGE_OFFSET = 10_000;

/**
 * Plunk v2's page-number form, accepted beside `limit`/`cursor` on lists (docs/api/overview.md, Plunk v2
 * compatibility): `page` (1-based) and `pageSize` (an alias of `limit`). Pages are read by offset, at most {@link
 * MAX_PAGE_OFFSET} rows deep; the cursor form stays pure keyset.
 */
export const PlunkPageQuery = {
  page: Type.Optional(
    Type.Integer({ minimum: 1, maximum: 100_000, description: "Plunk's page number (1-based), instead of `cursor`" }),
  ),
  pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: "Plunk's name for `limit`" })),
};

/** The Plunk page fields a list answers with beside ours. */
export const PlunkPageFields = {
  page: Type.Integer({ description: "the page number (Plunk's form)" }),
  pageSize: Type.Integer(),
  totalPages: Type.Integer(),
};

/**
 * Resolves the two page forms: `limit` (or `pageSize`), and the row offset of `page` when no cursor is given.
 *
 * @throws {@link AppError} 400 `INVALID_PARAMETERS` on `page` when it reaches past {@link MAX_PAGE_OFFSET} rows.
 */
export function resolvePaging(q: { limit: number; cursor?: string; page?: number; pageSize?: number }): {
  limit: number;
  offset: number;
  page: number;
} {
  const limit = q.pageSize ?? q.limit;
  const page = q.cursor ? 1 : (q.page ?? 1);
  const offset = (page - 1) * limit;
  if (offset > MAX_PAGE_OFFSET) {
    throw new AppError(
      ErrorCode.INVALID_PARAMETERS,
      `page: reaches past ${MAX_PAGE_OFFSET} rows; page with cursor instead`,
      {
        errors: [
          {
            field: 'page',
            message: `must stay within the first ${MAX_PAGE_OFFSET} rows (use cursor)`,
            code: 'too_big',
          },
        ],
      },
    );
  }
  return { limit, offset, page };
}

/** Plunk's page fields for a list of `total` rows read `pageSize` at a time. */
export function plunkPageFields(total: number, page: number, pageSize: number) {
  return { page, pageSize, totalPages: Math.max(1, Math.ceil(total / pageSize)) };
}

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
 * The list body (docs/api/overview.md, pagination) from one keyset page (newest first by id): `items`, `nextCursor`
 * (the last item's id, opaque; null on the last page), `hasMore` and `total`.
 */
export function keysetPage<R extends { id: string }, T>(
  page: { items: R[]; hasMore: boolean },
  present: (row: R) => T,
  total: number,
) {
  const last = page.items[page.items.length - 1];
  return {
    items: page.items.map(present),
    nextCursor: page.hasMore && last ? encodeCursor(last.id) : null,
    hasMore: page.hasMore,
    total,
  };
}
