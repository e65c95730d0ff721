/**
 * The one place that changes a running BullMQ worker's rate limiter. BullMQ (5.x) has no public call for a
 * worker's limiter: `Worker.rateLimit(ms)` holds the queue back once, and `Queue.setGlobalRateLimit` keeps a
 * queue-wide rule in Redis that every process shares (and that outranks the worker's `max` while its `duration`
 * does not), where the send rate is each process's own (its `AccountWatcher`). The worker passes `opts.limiter` to
 * its `moveToActive` script on every fetch of a job, so assigning it takes effect at the next job start;
 * `worker-limiter.test.ts` checks that against a real worker and Redis, so an upgrade that stops doing so fails
 * there.
 *
 * @module
 */
import type { RateLimiterOptions, Worker } from 'bullmq';

/** A worker limiter: at most `max` job starts per `duration` ms, counted in Redis across every process. */
export type WorkerLimiter = RateLimiterOptions;

/** The limiter `worker` applies at its next job start, or undefined when it has none. */
export function workerLimiter(worker: Worker): WorkerLimiter | undefined {
  return worker.opts.limiter;
}

/**
 * Gives a running worker a new limiter: its next fetch of a job (and every one after) is paced by `limiter`.
 * Jobs already started are not affected, and a fetch already refused waits out the old window.
 */
export function setWorkerLimiter(worker: Worker, limiter: WorkerLimiter): void {
  worker.opts.limiter = { max: limiter.max, duration: limiter.duration };
}
