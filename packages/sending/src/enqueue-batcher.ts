/**
 * The send jobs of committed `POST /v1/send` requests, enqueued together: the requests woken in one turn of the
 * event loop (say, those of one batched write, `./write-batcher`) are counted in their lanes in one script call
 * (`lanePrioritiesOf`, every project at once) and their jobs added in one round trip (`enqueueSendJobs`): two Redis
 * round trips per batch instead of two per request. At a low rate every request goes alone, as without batching.
 *
 * Nothing changes but the number of round trips: each request's emails get the priorities they would have got
 * counted one request after the other (per project, in the batch's order), each job keeps its id (the email id:
 * an email already queued is not queued twice), and a failure (Redis down) is logged for each request and never
 * thrown: the rows are committed, and the worker's reconciler enqueues them.
 *
 * @module
 */
import { Batcher, type BatcherOptions } from '@mailroom/platform/batcher';
import type { PlatformConfig } from '@mailroom/platform/config';
import type { Clock } from '@mailroom/platform/clock';
import { lanePrioritiesOf } from '@mailroom/queues/send-lanes';
import { SendPriority, type SendJobPayload } from '@mailroom/queues/catalog';
import { enqueueSendJobs } from '@mailroom/queues/enqueue';
import type { QueueConfig } from '@mailroom/queues/config';
import type { Queue } from 'bullmq';
import type { LaneConnectionOf } from './lane-connection';
import type { Redis } from 'ioredis';

/** The committed, unsuppressed emails of one request, to enqueue; `log` is told when they could not be. */
export interface SendEnqueue {
  projectId: string;
  emailIds: readonly string[];
  /** Their From address: with several delivery connections, the fair share is counted per bound connection. */
  from?: string;
  log: { warn: (o: object, m: string) => void };
}

/** Enqueues one request's emails (alone or with others); never throws. */
export type SendEnqueuer = (request: SendEnqueue) => Promise<void>;

/** What enqueueing needs: the send queue, its settings and a Redis connection for the lane counts. */
export interface EnqueueDeps {
  config: QueueConfig & Pick<PlatformConfig, 'queuePrefix'>;
  sendQueue: Queue<SendJobPayload>;
  /** Without one, every email gets the transactional lane's own priority. */
  redis?: Redis;
  /**
   * With several delivery connections, the connection a request's emails are bound to (`lane-connection.ts`): each
   * connection's fair share is counted apart. Omitted (one connection): one count per project.
   */
  connectionOf?: LaneConnectionOf;
  /** What the lane counts' minute is read from; omitted, the real clock (tests set it). */
  clock?: Clock;
}

/**
 * Enqueues the emails of `requests` in two round trips at most (the lane count, then the jobs). Never throws: a
 * failure is logged on each request's logger, and the reconciler enqueues those emails later.
 */
export async function enqueueSends(deps: EnqueueDeps, requests: readonly SendEnqueue[]): Promise<void> {
  const counted = requests.filter((r) => r.emailIds.length > 0);
  if (counted.length === 0) return;
  try {
    // A project's burst beyond its fair share per minute moves down inside the transactional lane (send-lanes.ts).
    const { connectionOf } = deps;
    const connections = connectionOf
      ? await Promise.all(counted.map((r) => (r.from ? connectionOf(r.projectId, r.from) : Promise.resolve(undefined))))
      : undefined;
    const priorities = await lanePrioritiesOf(
      deps.redis,
      deps.config,
      'transactional',
      counted.map((r, i) => ({ projectId: r.projectId, count: r.emailIds.length, connection: connections?.[i] })),
      deps.clock,
    );
    const jobs = counted.flatMap((r, i) =>
      r.emailIds.map((emailId, j) => ({
        emailId,
        projectId: r.projectId,
        priority: priorities[i][j] ?? SendPriority.transactional,
      })),
    );
    await enqueueSendJobs(deps.sendQueue, deps.config, jobs);
  } catch (err) {
    // Accepted all the same: the rows are committed and the reconciler enqueues them once Redis is back.
    for (const r of counted)
      r.log.warn({ err, emails: r.emailIds.length }, 'enqueue failed; the reconciler will enqueue these emails');
  }
}

/**
 * A {@link SendEnqueuer} batching concurrent requests (see the module notes): the requests of one turn of the event
 * loop are gathered (`sameTurn`), at most `maxInFlight` batches run at once and those arriving meanwhile go together
 * in the next, at most `maxBatch` requests each. `maxBatch` 1 enqueues every request alone, at once.
 */
export function sendEnqueueBatcher(deps: EnqueueDeps, options: BatcherOptions): SendEnqueuer {
  if (options.maxBatch <= 1) return (request) => enqueueSends(deps, [request]);
  const batcher = new Batcher<SendEnqueue, void>(
    async (requests) => {
      await enqueueSends(deps, requests);
      return requests.map(() => undefined);
    },
    (request) => enqueueSends(deps, [request]),
    { ...options, sameTurn: true },
  );
  return (request) => batcher.run(request);
}
