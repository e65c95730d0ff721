/**
 * Send jobs of concurrent requests enqueued in batches (`enqueue-batcher.ts`), against a real Redis and BullMQ:
 * requests of several projects given in one turn go in one batch, and every email gets the job (id, payload,
 * priority) it gets when the requests are enqueued one after the other; a failed enqueue is logged per request,
 * never thrown.
 */
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import { Queue } from 'bullmq';
import { newId } from '@mailroom/platform/ids';
import type { SendJobPayload } from '@mailroom/queues/catalog';
import { createRedis } from '@mailroom/queues/connection';
import { testConfig } from '../../../test/support/harness';
import { TestClock } from '../../../test/support/clock';
import { enqueueSends, sendEnqueueBatcher, type EnqueueDeps, type SendEnqueue } from './enqueue-batcher';

// A share of 3 per minute: the bursts below are demoted, so the priorities say whether the counting matches.
const config = testConfig({ SEND_FAIR_SHARE_PER_MINUTE: '3' });
const redis = new IORedis(config.redisUrl);
const queues: Queue[] = [];
afterAll(async () => {
  await Promise.all(queues.map((q) => q.close()));
  redis.disconnect();
});

/**
 * Queue settings of their own (a fresh prefix: fresh lane counters and jobs); the lane counts' minute is read from
 * `clock`.
 */
function deps(clock?: TestClock): EnqueueDeps & { queue: Queue<SendJobPayload> } {
  const queuePrefix = `{enq-${randomBytes(4).toString('hex')}}`;
  const queue = new Queue<SendJobPayload>('send', { connection: redis, prefix: queuePrefix });
  queues.push(queue);
  return { config: { ...config, queuePrefix }, sendQueue: queue, redis, queue, clock };
}

const silent = { warn: () => undefined };

/** Each job's id, payload and priority, by email id. */
async function jobsOf(queue: Queue<SendJobPayload>, ids: string[]) {
  return Promise.all(
    ids.map(async (id) => {
      const job = await queue.getJob(id);
      return job && { id: job.id, data: job.data, priority: job.opts.priority };
    }),
  );
}

test('requests of several projects in one turn: one batch, the same jobs and priorities as one by one', async () => {
  // The lane count is per minute: both runs below share the clock's one.
  const clock = new TestClock();
  const projects = [newId(), newId(), newId()];
  const counts = [2, 1, 4, 3, 1, 5, 2, 2, 1];
  const requests: SendEnqueue[] = counts.map((n, i) => ({
    projectId: projects[i % projects.length],
    emailIds: Array.from({ length: n }, () => newId()),
    log: silent,
  }));
  const ids = requests.flatMap((r) => r.emailIds);

  const oneByOne = deps(clock);
  for (const r of requests) await enqueueSends(oneByOne, [r]);

  const batched = deps(clock);
  const sizes: number[] = [];
  const enqueue = sendEnqueueBatcher(batched, { maxBatch: 50, maxInFlight: 4, observe: (n) => sizes.push(n) });
  await Promise.all(requests.map((r) => enqueue(r)));

  expect(sizes).toEqual([requests.length]);
  const expected = await jobsOf(oneByOne.queue, ids);
  expect(expected.every((j) => j !== undefined)).toBe(true);
  // Bursts beyond the share of 3 were demoted (else this would not test the counting).
  expect(new Set(expected.map((j) => j!.priority))).toEqual(new Set([1, 2]));
  expect(await jobsOf(batched.queue, ids)).toEqual(expected);
  expect(expected.map((j) => j!.id)).toEqual(ids);
});

test('requests beyond maxBatch wait for the next batch; a later request of a project goes on where its count stood', async () => {
  const d = deps(new TestClock());
  const project = newId();
  const sizes: number[] = [];
  const enqueue = sendEnqueueBatcher(d, { maxBatch: 2, maxInFlight: 1, observe: (n) => sizes.push(n) });
  const requests = Array.from({ length: 5 }, () => ({ projectId: project, emailIds: [newId()], log: silent }));
  await Promise.all(requests.map((r) => enqueue(r)));
  expect(sizes).toEqual([2, 2, 1]);
  const jobs = await jobsOf(
    d.queue,
    requests.map((r) => r.emailIds[0]),
  );
  // The share is 3: the first three at the lane's priority, the next two one step down.
  expect(jobs.map((j) => j?.priority)).toEqual([1, 1, 1, 2, 2]);
});

test('Redis down: every request resolves, each logs its failed enqueue, nothing is added', async () => {
  const healthy = deps();
  const down = createRedis({ ...config, redisUrl: 'redis://127.0.0.1:6379' }, 'producer');
  await new Promise((r) => down.once('ready', r));
  const queue = new Queue<SendJobPayload>('send', { connection: down, prefix: healthy.config.queuePrefix });
  await queue.waitUntilReady();
  down.disconnect(); // a fail-fast producer connection: every command now fails at once
  const warned: { emails: number; msg: string }[] = [];
  const log = { warn: (o: object, msg: string) => warned.push({ emails: (o as { emails: number }).emails, msg }) };
  const enqueue = sendEnqueueBatcher(
    { config: healthy.config, sendQueue: queue, redis: down },
    { maxBatch: 50, maxInFlight: 4 },
  );
  const requests = [3, 1, 2].map((n) => ({
    projectId: newId(),
    emailIds: Array.from({ length: n }, () => newId()),
    log,
  }));
  await Promise.all(requests.map((r) => enqueue(r)));
  expect(warned).toEqual(
    requests.map((r) => ({
      emails: r.emailIds.length,
      msg: 'enqueue failed; the reconciler will enqueue these emails',
    })),
  );
  expect(
    await jobsOf(
      healthy.queue,
      requests.flatMap((r) => r.emailIds),
    ),
  ).toEqual([undefined, undefined, undefined, undefined, undefined, undefined]);
});
