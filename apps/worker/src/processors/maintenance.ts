/**
 * Maintenance: the reconciler, the segment refresher and the domain refresher, run as jobs of the `maintenance`
 * queue so operators see each pass, its result or its error, in the queue dashboard.
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
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { QueueName } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { type Config } from '@mailroom/platform/config';
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

/** Job options of a maintenance job: kept a while for the dashboard, never retried (the next tick is the retry). */
function jobOptions(task: MaintenanceTask, tick: number) {
  return { jobId: `${task.name}-${tick}`, attempts: 1, removeOnComplete: { count: 100, age: 3600 }, removeOnFail: { count: 500, age: 7 * 24 * 3600 } };
}

/** Creates the producer side of the `maintenance` queue. */
export function createMaintenanceQueue(config: Pick<Config, 'queuePrefix'>, connection: Redis): Queue {
  return new Queue(QueueName.maintenance, queueOptions(config, connection));
}

/**
 * Starts the tasks: the timers that add their jobs, and the worker that runs them (one at a time per process).
 * @returns `stop()`, which stops the timers and waits for a running pass.
 */
export function startMaintenance(
  deps: { config: Config; redis: Redis; queue: Queue; logger: Logger },
  tasks: MaintenanceTask[],
): { worker: Worker; stop: () => Promise<void> } {
  const byName = new Map(tasks.map((t) => [t.name, t]));
  const lockKey = (t: MaintenanceTask) => `${deps.config.queuePrefix}:maintenance:${t.name}:lock`;
  const worker = new Worker(
    QueueName.maintenance,
    async (job: Job) => {
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
    },
    { ...queueOptions(deps.config, deps.redis), concurrency: 1, autorun: true, lockDuration: 60_000, maxStalledCount: 1 },
  );
  worker.on('error', (err) => deps.logger.error({ err }, 'maintenance worker error'));
  let stopped = false;
  const timers = tasks.map((task) => {
    const timer = setInterval(() => {
      if (stopped) return;
      const tick = Math.floor(Date.now() / task.intervalMs);
      deps.queue.add(task.name, {}, jobOptions(task, tick)).catch((err: unknown) => deps.logger.warn({ err, task: task.name }, 'maintenance job not added; next tick retries'));
    }, task.intervalMs);
    timer.unref();
    return timer;
  });
  return {
    worker,
    stop: async () => {
      stopped = true;
      for (const t of timers) clearInterval(t);
      await worker.close();
    },
  };
}
