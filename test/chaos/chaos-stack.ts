/**
 * The set-up of the SES chaos tests (`ses.test.ts`, `ses-campaign.test.ts`): the file's {@link useE2e} set-up on a
 * database of its own, with one project and no in-process worker, its SES endpoint the chaos proxy ({@link ChaosSes})
 * in front of the test SES endpoint; and a worker process talking to SES through the proxy
 * ({@link spawnChaosWorker}), started and ready. After the file: the worker killed (SIGKILL), the proxy closed, and
 * the rest as {@link useE2e} stops it.
 *
 * @module
 */
import { useE2e } from '../support/e2e';
import { exited, waitFor, type TestApi, type TestProject } from '../support/harness';
import { ChaosSes, spawnChaosWorker } from './chaos-ses';

/** What {@link useChaosStack} runs; each accessor throws when asked before `beforeAll` made it. */
export interface ChaosStack {
  readonly ses: ChaosSes;
  readonly api: TestApi;
  readonly p: TestProject;
  readonly worker: ReturnType<typeof spawnChaosWorker>;
}

/**
 * Registers the hooks that start and stop the stack.
 *
 * @param overrides - the environment besides `DATABASE_URL` and `SES_ENDPOINT`, which this sets.
 * @throws Error (from `beforeAll`) when the worker exits at start, with its last log lines, or is not ready in 30 s.
 */
export function useChaosStack(overrides: Record<string, string>): ChaosStack {
  let ses: ChaosSes | undefined;
  let worker: ChaosStack['worker'] | undefined;
  const e2e = useE2e({
    isolated: true,
    worker: false,
    project: true,
    env: async () => {
      ses = new ChaosSes(new URL(process.env.TEST_SES_ENDPOINT!));
      await ses.listen();
      return { ...overrides, SES_ENDPOINT: `http://127.0.0.1:${ses.port}` };
    },
  });
  beforeAll(async () => {
    const w = (worker = spawnChaosWorker(e2e.env));
    await waitFor(async () => w.healthPort > 0 || w.child.exitCode !== null, 30_000, 'the worker to start');
    if (w.child.exitCode !== null) throw new Error(`worker exited at start:\n${w.tail.join('\n')}`);
  }, 60_000);
  e2e.onTeardown(async () => {
    if (worker) {
      worker.child.kill('SIGKILL');
      await exited(worker.child);
    }
    await ses?.close();
  });
  const made = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`useChaosStack: the ${what} starts in beforeAll`);
    return value;
  };
  return {
    get ses() {
      return made(ses, 'SES proxy');
    },
    get api() {
      return e2e.api;
    },
    get p() {
      return e2e.p;
    },
    get worker() {
      return made(worker, 'worker');
    },
  };
}
