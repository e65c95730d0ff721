import { defineConfig } from 'drizzle-kit';

// Generation only reads the schema; no database connection is needed for `npm run db:generate`.
export default defineConfig({
  dialect: 'postgresql',
  schema: './packages/db/src/schema/index.ts',
  out: './packages/db/drizzle',
});
