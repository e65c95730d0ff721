import { dropDatabase, type SesStack } from './services';
import { ADMIN_DB_URL } from './global-setup';

export default async function globalTeardown(): Promise<void> {
  const state = (globalThis as Record<string, unknown>).__mailroom as { ses: SesStack; dbName: string } | undefined;
  if (!state) return;
  state.ses.stop();
  await dropDatabase(process.env.TEST_POSTGRES_URL ?? ADMIN_DB_URL, state.dbName);
}
