/**
 * A worker reconciles at once when it finds Redis without our data (the `<prefix>:redis-epoch` marker gone):
 * started on a Redis that lost every job, or running when every key of its prefix is flushed, it delivers the
 * stranded emails within seconds, where the periodic pass (every 60 s here, for emails 60 s old) would take a
 * minute or more. A worker started on a Redis that kept its data runs no such pass. (A real restart of an empty
 * redis-server: test/chaos/redis.test.ts.)
 */
import request from 'supertest';
import { RECONCILE_NOW, RECONCILE_NOW_FOLLOW_UPS_MS, redisEpochKey } from '../../apps/worker/src/processors/redis-loss';
import { deletePrefix, recipient, sesSendsTo, waitFor } from '../support/harness';
import { useE2e } from '../support/e2e';

/**
 * Below the periodic pass (60 s interval for emails 60 s old: two minutes at worst), far above the seconds the
 * immediate pass takes alone (20 s was exceeded once with every e2e file running on a loaded 2-core host).
 */
const BOUND_MS = 40_000;

const e2e = useE2e({
  isolated: true,
  env: {
    RECONCILE_ON_REDIS_LOSS: 'true',
    RECONCILE_INTERVAL_MS: '60000',
    RECONCILE_AFTER_MS: '60000',
    SES_MAX_SEND_RATE: '100',
  },
  worker: false,
  project: true,
});

async function send(n: number): Promise<string[]> {
  const to = Array.from({ length: n }, () => recipient('loss'));
  const res = await request(e2e.api.app)
    .post('/v1/send')
    .set('Authorization', e2e.p.auth)
    .send({ to, from: `l@${e2e.p.domain}`, subject: 'loss', body: '<p>loss</p>' });
  expect(res.status).toBe(202);
  return to;
}

async function deliveredWithin(to: string[], since: number): Promise<number> {
  await waitFor(
    async () => (await sesSendsTo(to)).length >= to.length || undefined,
    BOUND_MS,
    `${to.length} emails at SES`,
  );
  const sends = await sesSendsTo(to);
  expect(sends).toHaveLength(to.length);
  return Math.max(...sends.map((s) => s.at)) - since;
}

/** The immediate passes (the follow-ups, added with a delay, are counted apart). */
const reconcileNowJobs = async () =>
  (await e2e.api.queues.maintenance.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed'])).filter(
    (j) => j.name === RECONCILE_NOW && !j.opts.delay,
  );
const followUpJobs = async () =>
  (await e2e.api.queues.maintenance.getJobs(['completed', 'failed', 'active', 'waiting', 'delayed'])).filter(
    (j) => j.name === RECONCILE_NOW && (j.opts.delay ?? 0) > 0,
  );

test('a worker started on a Redis that lost every job delivers them at once', async () => {
  const to = await send(10);
  // Redis loses everything of this deployment (jobs; no worker has written the marker yet).
  await deletePrefix(e2e.api.redis, e2e.api.config.queuePrefix);
  expect(await e2e.api.queues.send.count()).toBe(0);
  const started = Date.now();
  await e2e.startWorker();
  const ms = await deliveredWithin(to, started);
  console.log(
    `redis-loss: a worker started on an empty Redis delivered 10 stranded emails ${(ms / 1000).toFixed(1)} s after its start`,
  );
  expect(await e2e.api.redis.get(redisEpochKey(e2e.api.config.queuePrefix))).toEqual(expect.any(String));
  expect(await reconcileNowJobs()).toHaveLength(1);
  // And the same pass again a few seconds later, for what API processes accepted while reconnecting.
  expect((await followUpJobs()).map((j) => j.opts.delay).sort((a, b) => a! - b!)).toEqual([
    ...RECONCILE_NOW_FOLLOW_UPS_MS,
  ]);
});

test('every key of the prefix flushed while the worker runs: the stranded emails are delivered within seconds', async () => {
  // Jobs held back (the queue paused) so that the flush strands them, as a Redis restart strands the waiting ones.
  await e2e.api.queues.send.pause();
  const to = await send(10);
  const flushed = Date.now();
  await deletePrefix(e2e.api.redis, e2e.api.config.queuePrefix);
  const ms = await deliveredWithin(to, flushed);
  console.log(`redis-loss: 10 emails stranded by a flush delivered ${(ms / 1000).toFixed(1)} s after it`);
  expect(await reconcileNowJobs()).toHaveLength(1); // the flush took the earlier job too: this one is the new pass
});

test('a worker started on a Redis that kept its data runs no immediate pass', async () => {
  await e2e.stopWorker();
  await e2e.startWorker();
  const to = await send(3);
  await deliveredWithin(to, Date.now());
  expect(await reconcileNowJobs()).toHaveLength(1);
});
