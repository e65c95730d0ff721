/**
 * The worker limiter adapter against a real BullMQ worker and Redis: a limiter set on a running worker paces the
 * next job start. BullMQ counts job starts in the queue's `limiter` key, which each fetch creates with the limiter's
 * `duration` as its time to live, so the key's TTL seen by a job's processor tells which limiter its fetch used.
 */
import { randomBytes } from 'node:crypto';
import IORedis from 'ioredis';
import { Queue, Worker } from 'bullmq';
import { setWorkerLimiter, workerLimiter } from './worker-limiter';

const redis = new IORedis(process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379', { maxRetriesPerRequest: null });
afterAll(() => redis.disconnect());

test('a limiter set on a running worker paces its next job start', async () => {
  const prefix = `{wl-${randomBytes(4).toString('hex')}}`;
  const name = 'paced';
  const limiterKey = `${prefix}:${name}:limiter`;
  const ttls: number[] = [];
  const queue = new Queue(name, { connection: redis, prefix });
  const worker = new Worker(
    name,
    async () => {
      ttls.push(await redis.pttl(limiterKey));
    },
    { connection: redis, prefix, concurrency: 1, limiter: { max: 1, duration: 2_000 }, autorun: false },
  );
  const completed = (n: number) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (ttls.length >= n) {
          worker.off('completed', check);
          resolve();
        }
      };
      worker.on('completed', check);
    });
  try {
    const first = completed(1);
    await queue.add('job', {}, { jobId: 'a' });
    void worker.run();
    await first;
    expect(ttls[0]).toBeGreaterThan(0);
    expect(ttls[0]).toBeLessThanOrEqual(2_000);

    setWorkerLimiter(worker, { max: 2, duration: 60_000 });
    expect(workerLimiter(worker)).toEqual({ max: 2, duration: 60_000 });
    // Once the first window has closed, the next start opens a window of the new limiter's 60 s (two starts, so
    // the worker is not held back when it closes).
    while ((await redis.pttl(limiterKey)) !== -2) await new Promise((r) => setTimeout(r, 20));
    const second = completed(2);
    await queue.add('job', {}, { jobId: 'b' });
    await second;
    expect(ttls[1]).toBeGreaterThan(2_000);
    expect(ttls[1]).toBeLessThanOrEqual(60_000);
  } finally {
    await worker.close();
    await queue.obliterate({ force: true });
    await queue.close();
  }
});
