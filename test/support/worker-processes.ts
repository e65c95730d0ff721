/**
 * The set-up of tests that run workers as processes of their own, to kill them (SIGKILL) mid-work: the file's
 * {@link useE2e} set-up on a database of its own, without an in-process worker, and the worker processes the test
 * starts ({@link spawnWorker}), every one killed after the file, before its database is dropped.
 */
import { useE2e } from './e2e';
import { exited, type spawnWorker, type TestApi } from './harness';

/** What {@link useWorkerProcesses} makes; `api` throws when asked before `beforeAll` made it. */
export interface WorkerProcesses {
  /** The environment of the API and of every worker (filled in `beforeAll`): to spawn workers with. */
  readonly env: Record<string, string>;
  readonly api: TestApi;
  /** The workers started so far; the test pushes each one it spawns itself, and all are killed after the file. */
  readonly children: Array<ReturnType<typeof spawnWorker>>;
}

/**
 * Registers the file's set-up ({@link useE2e}: `isolated`, no worker), a `beforeAll` that copies its environment
 * into {@link WorkerProcesses.env}, and a teardown that kills every worker in {@link WorkerProcesses.children} and
 * waits for each to exit.
 *
 * @param overrides - the environment besides `DATABASE_URL`, which the set-up sets.
 */
export function useWorkerProcesses(overrides: Record<string, string>): WorkerProcesses {
  const e2e = useE2e({ env: overrides, isolated: true, worker: false });
  const env: Record<string, string> = {};
  const children: Array<ReturnType<typeof spawnWorker>> = [];
  beforeAll(() => void Object.assign(env, e2e.env));
  e2e.onTeardown(async () => {
    for (const c of children) c.kill('SIGKILL');
    await Promise.all(children.map(exited));
  });
  return {
    env,
    children,
    get api() {
      return e2e.api;
    },
  };
}
