/**
 * The set-up of tests that run workers as processes of their own, to kill them (SIGKILL) mid-work: a database of the
 * file's own ({@link isolatedDatabase}), its environment, an in-process API on it, and the worker processes the test
 * starts ({@link spawnWorker}), every one killed after the file. {@link useWorkerProcesses} registers the hooks.
 */
import { loadConfig } from '@mailroom/config/config';
import { exited, isolatedDatabase, spawnWorker, startTestApi, testEnv, type TestApi } from './harness';

/** What {@link useWorkerProcesses} makes; `api` throws when asked before `beforeAll` made it. */
export interface WorkerProcesses {
  /** The environment of the API and of every worker (filled in `beforeAll`): to spawn workers with. */
  readonly env: Record<string, string>;
  readonly api: TestApi;
  /** The workers started so far; the test pushes each one it spawns itself, and all are killed after the file. */
  readonly children: Array<ReturnType<typeof spawnWorker>>;
}

/**
 * Registers the `beforeAll` that makes the database, the environment and the API, and the `afterAll` that kills
 * every worker in {@link WorkerProcesses.children}, waits for each to exit, closes the API and drops the database.
 *
 * @param overrides - the environment besides `DATABASE_URL`, which this sets.
 */
export function useWorkerProcesses(overrides: Record<string, string>): WorkerProcesses {
  const env: Record<string, string> = {};
  const children: Array<ReturnType<typeof spawnWorker>> = [];
  let iso: { url: string; drop: () => Promise<void> } | undefined;
  let api: TestApi | undefined;
  beforeAll(async () => {
    iso = await isolatedDatabase();
    Object.assign(env, testEnv({ ...overrides, DATABASE_URL: iso.url }));
    api = await startTestApi(loadConfig(env));
  });
  afterAll(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
    await api?.close();
    await iso?.drop();
  });
  return {
    env,
    children,
    get api() {
      if (!api) throw new Error('useWorkerProcesses: the API starts in beforeAll');
      return api;
    },
  };
}
