/**
 * Once per test run: the services and tools the tests need (found, started or installed: `provision.ts`), a
 * fresh database (created and migrated here, dropped in teardown), the SES emulator and the recording proxy. Tests assume nothing else about the services: each test file uses its own queue prefix
 * and each test its own project. Queue prefixes older than any run still going are swept (`stale-queues.ts`).
 */
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import { ensureServices, ensureTools } from './provision';
import { freshDatabase, startSesStack } from './services';
import { dropStaleTestQueues } from './stale-queues';

export const ADMIN_DB_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

export default async function globalSetup(): Promise<void> {
  const adminUrl = await ensureServices(ADMIN_DB_URL, REDIS_URL);
  ensureTools();
  const dbName = `mailroom_test_${Date.now()}_${randomBytes(3).toString('hex')}`;
  const dbUrl = await freshDatabase(adminUrl, dbName);

  const redis = new IORedis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    redis.disconnect();
    throw new Error(
      `Redis is not answering at ${REDIS_URL} (${(err as Error).message}); start it or set TEST_REDIS_URL`,
    );
  }
  try {
    // Earlier runs' queue prefixes (their jobs stay behind): swept, so Redis does not grow from run to run.
    await dropStaleTestQueues(redis);
  } finally {
    redis.disconnect();
  }

  // The SDK's notice that releases after January 2027 need Node 22 would repeat in every worker's output.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED = 'true';
  const ses = await startSesStack();
  process.env.TEST_DATABASE_URL = dbUrl;
  process.env.TEST_REDIS_URL = REDIS_URL;
  process.env.TEST_SES_ENDPOINT = ses.endpoint;
  process.env.TEST_SES_EMULATOR = ses.emulator;
  (globalThis as Record<string, unknown>).__mailroom = { ses, dbName };
}
