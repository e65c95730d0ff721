/**
 * Maintenance: the reconciler, the segment refresher and the domain refresher, run as jobs of the `maintenance`
 * queue so operators see each pass, its result or its error, in the queue dashboard.
 *
 * The `maintenance` queue is a catalog queue like the others (its worker is built with the rest in `main.ts`);
 * this module gives its processor and the timers that feed it.
 *
 * - **Scheduling stays in process memory.** Every worker process ticks a timer per task and adds that tick's job
 *   (`jobId` = `<task>-<tick number>`, so N processes add one job per tick). Nothing of the schedule lives in Redis,
 *   so maintenance keeps running after Redis loses everything; that is when the reconciler matters most.
 * - **Passes never overlap when they must not.** The job takes a Redis lock (SET NX PX) before its pass. A task
 *   that `release`s it (the segment refresher) runs one pass at a time, however slow. One that keeps it until it
 *   expires (the reconciler, the domain refresher) also spaces passes to one per interval across all processes.
 *   A job that finds the lock held completes as `skipped`.
 * - **A lock is released only by its holder.** Its value is a token of the pass that took it; the release is a
 *   compare-and-delete in one Lua script, so a pass that outlived its lock never deletes the next pass's lock.
 * - **A pass asked for while one runs is not lost** when the task `coalesces`: the asking job leaves a flag, and the
 *   running pass, before it lets go of the lock (in the same script), sees the flag and runs once more. The job
 *   that asked completes as `coalesced`.
 *
 * @module
 */
import { randomUUID } from 'node:crypto';
import type { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { MaintenanceJobPayload } from '@mailroom/queues/catalog';
import { enqueueMaintenance } from '@mailroom/queues/enqueue';
import { type Config } from '@mailroom/config/config';
import { type Logger } from '@mailroom/platform/logger';

/** One periodic task. */
export interface MaintenanceTask {
  /** Job name (and lock name). */
  name: string;
  /** Tick period (ms). */
  intervalMs: number;
  /** Lock lifetime (ms). */
  lockMs: number;
  /** Release the lock when the pass ends (else it expires, which spaces passes across processes). */
  release: boolean;
  /**
   * With `release`: a job that finds a pass running asks it to run once more instead of being skipped (for passes
   * whose result depends on when they start, such as the reconciler after Redis lost its data).
   */
  coalesce?: boolean;
  /** The pass; its result is the job's return value. */
  run: () => Promise<unknown>;
}

/**
 * A task run at most once per interval across all worker processes: its lock outlives the pass and expires just
 * before the next tick (at least `minLockMs`), so whichever process ticks first runs it and the others skip.
 *
 * @param intervalMs - the tick period (ms).
 * @param minLockMs - the shortest lock (ms) for very short intervals.
 */
export function oncePerInterval(
  name: string,
  intervalMs: number,
  run: () => Promise<unknown>,
  minLockMs = 50,
): MaintenanceTask {
  return { name, intervalMs, lockMs: Math.max(minLockMs, intervalMs - 50), release: false, run };
}

/**
 * Releases a lock if `ARGV[1]` (the holder's token) still holds it, unless a rerun was asked for (`KEYS[2]`
 * exists): then the lock is kept, renewed for `ARGV[2]` ms, and the flag cleared.
 * @returns 1 released, 2 kept for a rerun, 0 not ours (expired, or another pass's).
 */
const RELEASE_OR_RERUN = `
if redis.call('get', KEYS[1]) ~= ARGV[1] then return 0 end
if redis.call('del', KEYS[2]) == 1 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  return 2
end
redis.call('del', KEYS[1])
return 1`;

/** What a maintenance job returns when it did not run its pass. */
export type MaintenanceSkip = { skipped: string } | { coalesced: string };

/**
 * The `maintenance` queue's processor: runs the task the job names, under its lock. A job that finds the lock held
 * completes as `{ skipped }` (or, for a coalescing task, `{ coalesced }` after asking the running pass to run once
 * more); a failed pass is logged and fails its job (the next tick is the retry). The lock is released only while
 * this pass's token still holds it (see the module notes).
 */
export function maintenanceProcessor(
  deps: { config: Pick<Config, 'queuePrefix'>; redis: Redis; logger: Logger },
  tasks: MaintenanceTask[],
): (job: Job) => Promise<unknown> {
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const lockKey = (t: MaintenanceTask) => `${deps.config.queuePrefix}:maintenance:${t.name}:lock`;
  const rerunKey = (t: MaintenanceTask) => `${lockKey(t)}:rerun`;
  const take = async (task: MaintenanceTask, token: string) =>
    (await deps.redis.set(lockKey(task), token, 'PX', task.lockMs, 'NX')) === 'OK';
  return async (job: Job) => {
    const task = byName.get(job.name);
    if (!task) return { skipped: `unknown task ${job.name}` } satisfies MaintenanceSkip;
    const token = `${process.pid}:${randomUUID()}`;
    if (!(await take(task, token))) {
      if (!task.release || !task.coalesce) return { skipped: 'another pass holds the lock' } satisfies MaintenanceSkip;
      await deps.redis.set(rerunKey(task), '1', 'PX', task.lockMs);
      // The holder may have let go between the two calls, before it could see the flag: then this job runs it.
      if (!(await take(task, token)))
        return { coalesced: 'a pass is running; it runs once more when it ends' } satisfies MaintenanceSkip;
    }
    try {
      for (;;) {
        // A request made before this pass started is answered by it.
        if (task.coalesce) await deps.redis.del(rerunKey(task));
        const result = (await task.run()) ?? { done: true };
        if (!task.release) return result;
        const outcome = await deps.redis.eval(RELEASE_OR_RERUN, 2, lockKey(task), rerunKey(task), token, task.lockMs);
        if (outcome !== 2) return result;
      }
    } catch (err) {
      deps.logger.error({ err, task: task.name, jobId: job.id }, `${task.name} pass failed`);
      if (task.release) {
        await deps.redis
          .eval(RELEASE_OR_RERUN, 2, lockKey(task), `${rerunKey(task)}:none`, token, task.lockMs)
          .catch((e: unknown) => deps.logger.debug({ err: e, task: task.name }, 'lock left to expire'));
      }
      throw err;
    }
  };
}

/**
 * Starts the timers that add each task's job every `intervalMs` (the catalog's `maintenance` worker runs them).
 * @returns `stop()`, which stops the timers.
 */
export function startMaintenanceTimers(
  deps: { queue: Queue<MaintenanceJobPayload>; logger: Logger },
  tasks: MaintenanceTask[],
): { stop: () => void } {
  let stopped = false;
  const timers = tasks.map((task) => {
    const timer = setInterval(() => {
      if (stopped) return;
      const tick = Math.floor(Date.now() / task.intervalMs);
      enqueueMaintenance(deps.queue, task.name, tick).catch((err: unknown) =>
        deps.logger.warn({ err, task: task.name }, 'maintenance job not added; next tick retries'),
      );
    }, task.intervalMs);
    timer.unref();
    return timer;
  });
  return {
    stop: () => {
      stopped = true;
      for (const t of timers) clearInterval(t);
    },
  };
}
