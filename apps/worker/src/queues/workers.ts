/**
 * The consumer side of the queue catalog: one BullMQ `Worker` per catalog entry, with the entry's settings
 * (concurrency, job lock, stall handling, limiter, backoff strategies), built by looping over the catalog so no
 * queue is forgotten. Every worker is created stopped (`autorun: false`); the process starts them when it is ready.
 *
 * @module
 */
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { QUEUE_KEYS, queueCatalog, smoothLimiter, type QueueKey } from '@mailroom/queues/catalog';
import { queueOptions } from '@mailroom/queues/connection';
import { setWorkerLimiter } from '@mailroom/queues/worker-limiter';
import { type Config } from '@mailroom/config/config';

/** What runs a queue's jobs. */
export type Processor = ConstructorParameters<typeof Worker>[1];

/**
 * How long (ms) a worker waits after a connection error before it asks Redis for jobs again. BullMQ's default,
 * 15 s, left every queue standing that long after Redis came back (the mail a restart had stranded included).
 */
export const RUN_RETRY_DELAY_MS = 1_000;

/** One worker per catalog entry. */
export type Workers = Record<QueueKey, Worker>;

/**
 * Creates the worker of every catalog queue (not yet running).
 *
 * @param processors - the processor of each queue, keyed as in the catalog.
 * @param emailsPerSecond - the send rate in force (see `AccountWatcher`): the `send` worker's limiter paces job
 *   starts at it.
 */
export function createWorkers(
  config: Config,
  connection: Redis,
  processors: Record<QueueKey, Processor>,
  emailsPerSecond: number,
): Workers {
  const entries = QUEUE_KEYS.map((key) => {
    const spec = queueCatalog[key];
    return [
      key,
      new Worker(spec.name, processors[key], {
        ...queueOptions(config, connection),
        ...spec.worker(config, emailsPerSecond),
        runRetryDelay: RUN_RETRY_DELAY_MS,
        autorun: false,
      }),
    ] as const;
  });
  return Object.fromEntries(entries) as Workers;
}

/**
 * Moves a running `send` worker's limiter to a new rate (emails a second); the next job start follows the new pace
 * (`@mailroom/queues/worker-limiter`).
 */
export function setSendWorkerRate(worker: Worker, emailsPerSecond: number): void {
  setWorkerLimiter(worker, smoothLimiter(emailsPerSecond));
}
