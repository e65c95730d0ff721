/**
 * `npm run migrate`: creates the database if needed and applies every pending migration.
 *
 * @module
 */
import { loadPlatformConfig } from '@mailroom/platform/config';
import { ensureDatabase, migrate } from './migrate';

const url = loadPlatformConfig(process.env).databaseUrl;
ensureDatabase(url)
  .then(() => migrate(url))
  .then(() => console.log('migrations applied'))
  .catch((err: Error) => {
    console.error(`migration failed: ${err.message}`);
    process.exit(1);
  });
