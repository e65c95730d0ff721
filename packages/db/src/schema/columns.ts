import { customType, timestamp, uuid } from 'drizzle-orm/pg-core';
import { v7 as newId } from 'uuid';

/** `bytea` mapped to Buffer. */
export const bytea = customType<{ data: Buffer; driverData: Buffer }>({
  dataType: () => 'bytea',
});

/** Primary key: a UUIDv7 made by the application, so `ORDER BY id` is creation order. */
export const idColumn = () => uuid('id').primaryKey().$defaultFn(newId);

export const createdAt = () => timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();
export const updatedAt = () => timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow();
