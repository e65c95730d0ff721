/**
 * What an in-process worker's queues hold, read through its `mailroom_queue_jobs` gauge (apps/worker metrics.ts,
 * which asks Redis at each read). Tests wait on these counts to know the worker has taken every job it was
 * given, then assert that nothing happened, instead of sleeping for a while and hoping it had its chance.
 */
import { waitFor } from './harness';

/** Jobs of one queue per state (`waiting` includes prioritized jobs). */
export interface QueueJobCounts {
  waiting: number;
  active: number;
  delayed: number;
  failed: number;
}

/** The part of a running worker (`RunningWorker` of apps/worker main.ts) these helpers read. */
export interface MeteredWorker {
  metrics: {
    registry: {
      getSingleMetric(
        name: string,
      ):
        | { get(): Promise<{ values: { value: number; labels: Partial<Record<string, string | number>> }[] }> }
        | undefined;
    };
  };
}

/** The jobs per state of `queue` (a `QueueName`: `send`, `campaign`, `webhook`, `workflow`, ...) right now. */
export async function queueJobs(worker: MeteredWorker, queue: string): Promise<QueueJobCounts> {
  const gauge = worker.metrics.registry.getSingleMetric('mailroom_queue_jobs');
  if (!gauge) throw new Error('the worker has no mailroom_queue_jobs gauge');
  const counts: QueueJobCounts = { waiting: 0, active: 0, delayed: 0, failed: 0 };
  for (const v of (await gauge.get()).values) {
    if (v.labels.queue === queue && typeof v.labels.state === 'string' && v.labels.state in counts)
      counts[v.labels.state as keyof QueueJobCounts] = v.value;
  }
  return counts;
}

/**
 * Waits until none of `queues` has a job waiting or active, nor (unless `allowDelayed`) delayed: every job the
 * worker was given has been taken and has ended, or (with `allowDelayed`) been put aside until a later time.
 *
 * @returns the counts of each queue at that moment.
 * @throws after `timeoutMs` (ms), naming the queues.
 */
export async function queuesSettled(
  worker: MeteredWorker,
  queues: string[],
  options: { allowDelayed?: boolean; timeoutMs?: number } = {},
): Promise<Record<string, QueueJobCounts>> {
  return waitFor(
    async () => {
      const all: Record<string, QueueJobCounts> = {};
      for (const q of queues) {
        const c = await queueJobs(worker, q);
        if (c.waiting > 0 || c.active > 0 || (!options.allowDelayed && c.delayed > 0)) return undefined;
        all[q] = c;
      }
      return all;
    },
    options.timeoutMs ?? 20_000,
    `no job ${options.allowDelayed ? 'waiting or active' : 'waiting, active or delayed'} in the ${queues.join(', ')} queue(s)`,
  );
}
