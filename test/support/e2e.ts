/**
 * The set-up an end-to-end file needs (API → worker → SES emulator): its configuration (a fresh queue prefix, a
 * database of its own if asked), an in-process API, an in-process worker and, if asked, one project; all stopped,
 * closed and dropped after the file. {@link useE2e} registers the `beforeAll`/`afterAll` and answers accessors.
 */
import { loadConfig, type Config } from '@mailroom/config/config';
import type { Clock } from '@mailroom/platform/clock';
import { startWorker, type RunningWorker } from '../../apps/worker/src/main';

/** What `startWorker` takes besides the configuration (its health port: `null` none, `0` a free one; stubs). */
type WorkerOptions = Parameters<typeof startWorker>[1];
import { createTestProject, isolatedDatabase, startTestApi, testEnv, type TestApi, type TestProject } from './harness';

/** Environment overrides of a file, fixed or made in its `beforeAll` (say, from a server started there first). */
type EnvSource = Record<string, string> | (() => Record<string, string> | Promise<Record<string, string>>);

/** What {@link useE2e} sets up. */
export interface E2eOptions {
  /** Overrides of {@link testEnv} (the file's queue prefix is fresh either way). */
  env?: EnvSource;
  /**
   * A migrated database of the file's own ({@link isolatedDatabase}), dropped after it: for workers whose
   * reconciler adopts every pending email of its database, or counts that must see only the file's rows.
   */
  isolated?: boolean;
  /** The in-process worker started with the API, with these options (default: no health port); `false`: none. */
  worker?: false | Partial<WorkerOptions>;
  /** One project with a verified sending domain, created once the API runs. */
  project?: boolean;
  /** What the API's send routes read their fair-share minute from (`TestClock`); omitted, the real clock. */
  clock?: Clock;
}

/** The running set-up; each accessor throws when asked before `beforeAll` made it (or for what was not asked). */
export interface E2e {
  /** The file's environment (what `config` was loaded from): to spawn or start more processes like these. */
  readonly env: Record<string, string>;
  readonly config: Config;
  readonly api: TestApi;
  /** The worker running now: the one started with the API, or the last {@link E2e.startWorker}. */
  readonly worker: RunningWorker;
  readonly p: TestProject;
  /**
   * Starts an in-process worker on the file's environment plus `overrides`; it becomes {@link E2e.worker} and is
   * stopped after the file (a worker still running from before is not stopped: {@link E2e.stopWorker} first).
   */
  startWorker(overrides?: Record<string, string>, options?: Partial<WorkerOptions>): Promise<RunningWorker>;
  /** Stops {@link E2e.worker}, if one runs. */
  stopWorker(): Promise<void>;
  /** Runs `close` after the file, once the workers and the API are stopped (the last registered first). */
  onTeardown(close: () => unknown): void;
}

/**
 * Registers the `beforeAll` that starts the file's set-up and the `afterAll` that stops every worker, closes the API,
 * runs the teardowns and drops the file's database.
 */
export function useE2e(options: E2eOptions = {}): E2e {
  let env: Record<string, string> | undefined;
  let config: Config | undefined;
  let api: TestApi | undefined;
  let worker: RunningWorker | undefined;
  let project: TestProject | undefined;
  let drop: (() => Promise<void>) | undefined;
  const workers: RunningWorker[] = [];
  const teardowns: (() => unknown)[] = [];
  const made = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`the e2e fixture has no ${what} (not asked for, or before beforeAll)`);
    return value;
  };

  const fixture: E2e = {
    get env() {
      return made(env, 'environment');
    },
    get config() {
      return made(config, 'configuration');
    },
    get api() {
      return made(api, 'API');
    },
    get worker() {
      return made(worker, 'running worker');
    },
    get p() {
      return made(project, 'project');
    },
    async startWorker(overrides = {}, workerOptions = {}) {
      worker = await startWorker(loadConfig({ ...fixture.env, ...overrides }), { healthPort: null, ...workerOptions });
      workers.push(worker);
      return worker;
    },
    async stopWorker() {
      const running = worker;
      worker = undefined;
      await running?.stop();
    },
    onTeardown(close) {
      teardowns.push(close);
    },
  };

  beforeAll(async () => {
    const overrides = { ...(typeof options.env === 'function' ? await options.env() : options.env) };
    if (options.isolated) {
      const iso = await isolatedDatabase();
      drop = iso.drop;
      overrides.DATABASE_URL = iso.url;
    }
    env = testEnv(overrides);
    config = loadConfig(env);
    api = await startTestApi(config, { clock: options.clock });
    if (options.worker !== false) await fixture.startWorker({}, options.worker);
    if (options.project) project = await createTestProject(api.database);
  });

  afterAll(async () => {
    // A worker stopped by the test is stopped again here: `stop` is idempotent.
    for (const w of workers.reverse()) await w.stop();
    await api?.close();
    for (const close of teardowns.reverse()) await close();
    await drop?.();
  });

  return fixture;
}
