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
 *
 * @module
 */
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
export function oncePerInterval(name: string, intervalMs: number, run: () => Promise<unknown>, minLockMs = 50): MaintenanceTask {
  return { name, intervalMs, lockMs: Math.max(minLockMs, intervalMs - 50), release: false, run };
}

/**
 * The `maintenance` queue's processor: runs the task the job names, under its lock. A job that finds the lock held
 * completes as `{ skipped }`; a failed pass is logged and fails its job (the next tick is the retry).
 */
export function maintenanceProcessor(deps: { config: Pick<Config, 'queuePrefix'>; redis: Redis; logger: Logger }, tasks: MaintenanceTask[]): (job: Job) => Promise<unknown> {
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const lockKey = (t: MaintenanceTask) => `${deps.config.queuePrefix}:maintenance:${t.name}:lock`;
  return async (job: Job) => {
    const task = byName.get(job.name);
    if (!task) return { skipped: `unknown task ${job.name}` };
    if ((await deps.redis.set(lockKey(task), String(process.pid), 'PX', task.lockMs, 'NX')) !== 'OK') return { skipped: 'another pass holds the lock' };
    try {
      return (await task.run()) ?? { done: true };
    } catch (err) {
      deps.logger.error({ err, task: task.name, jobId: job.id }, `${task.name} pass failed`);
      throw err;
    } finally {
      if (task.release) await deps.redis.del(lockKey(task));
    }
  };
}

/**
 * Starts the timers that add each task's job every `intervalMs` (the catalog's `maintenance` worker runs them).
 * @returns `stop()`, which stops the timers.
 */
export function startMaintenanceTimers(deps: { queue: Queue<MaintenanceJobPayload>; logger: Logger }, tasks: MaintenanceTask[]): { stop: () => void } {
  let stopped = false;
  const timers = tasks.map((task) => {
    const timer = setInterval(() => {
      if (stopped) return;
      const tick = Math.floor(Date.now() / task.intervalMs);
      enqueueMaintenance(deps.queue, task.name, tick).catch((err: unknown) => deps.logger.warn({ err, task: task.name }, 'maintenance job not added; next tick retries'));
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
