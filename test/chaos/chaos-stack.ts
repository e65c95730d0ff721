/**
 * The set-up of the SES chaos tests (`ses.test.ts`, `ses-campaign.test.ts`): on a database of the file's own, the
 * chaos proxy in front of the test SES endpoint ({@link ChaosSes}), the API in-process with one project, and a
 * worker process talking to SES through the proxy ({@link spawnChaosWorker}), started and ready.
 *
 * @module
 */
import { loadConfig } from '@mailroom/config/config';
import {
  createTestProject,
  exited,
  isolatedDatabase,
  startTestApi,
  testEnv,
  waitFor,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { ChaosSes, spawnChaosWorker } from './chaos-ses';

/** What {@link startChaosStack} started. */
export interface ChaosStack {
  iso: { url: string; drop: () => Promise<void> };
  ses: ChaosSes;
  api: TestApi;
  p: TestProject;
  worker: ReturnType<typeof spawnChaosWorker>;
}

/**
 * Starts the stack; what started before a failure is stopped again before the error is thrown.
 *
 * @param overrides - the environment besides `DATABASE_URL` and `SES_ENDPOINT`, which this sets.
 * @throws Error when the worker exits at start (with its last log lines) or is not ready within 30 s.
 */
export async function startChaosStack(overrides: Record<string, string>): Promise<ChaosStack> {
  const started: Partial<ChaosStack> = {};
  try {
    const iso = (started.iso = await isolatedDatabase());
    const ses = (started.ses = new ChaosSes(new URL(process.env.TEST_SES_ENDPOINT!)));
    await ses.listen();
    const env = testEnv({ ...overrides, DATABASE_URL: iso.url, SES_ENDPOINT: `http://127.0.0.1:${ses.port}` });
    const api = (started.api = await startTestApi(loadConfig(env)));
    const p = (started.p = await createTestProject(api.database));
    const worker = (started.worker = spawnChaosWorker(env));
    await waitFor(async () => worker.healthPort > 0 || worker.child.exitCode !== null, 30_000, 'the worker to start');
    if (worker.child.exitCode !== null) throw new Error(`worker exited at start:\n${worker.tail.join('\n')}`);
    return { iso, ses, api, p, worker };
  } catch (err) {
    await stopChaosStack(started).catch(() => undefined); // the start's error is the one to see
    throw err;
  }
}

/**
 * Kills the worker (SIGKILL), closes the API and the proxy, and drops the database: whatever of them started, each
 * tried even when one before it failed.
 *
 * @throws the first of their errors, once all were tried.
 */
export async function stopChaosStack(stack: Partial<ChaosStack>): Promise<void> {
  const steps: Array<() => Promise<unknown> | undefined> = [
    async () => {
      if (!stack.worker) return;
      stack.worker.child.kill('SIGKILL');
      await exited(stack.worker.child);
    },
    () => stack.api?.close(),
    () => stack.ses?.close(),
    () => stack.iso?.drop(),
  ];
  const failed: unknown[] = [];
  for (const step of steps) await Promise.resolve(step()).catch((err: unknown) => failed.push(err));
  if (failed.length > 0) throw failed[0];
}
