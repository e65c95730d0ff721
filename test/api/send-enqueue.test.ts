/**
 * `POST /v1/send`'s jobs when concurrent requests are enqueued together (`@mailroom/sending/enqueue-batcher`):
 * requests of several projects at once get, per project, the fair-share priorities that one request after the
 * other would have got, one job per email with the email id as job id; and with Redis down every request is still
 * accepted (202) and the reconciler enqueues its emails later.
 */
import request from 'supertest';
import { createRedis } from '@mailroom/queues/connection';
import { createQueues } from '@mailroom/queues/create';
import { createLogger } from '@mailroom/platform/logger';
import { demotedPriority } from '@mailroom/queues/send-lanes';
import { reconcileOnce } from '../../apps/worker/src/processors/reconcile';
import {
  createTestProject,
  recipient,
  useApiWithProject,
  useIsolatedApi,
  waitReady,
  type TestApi,
  type TestProject,
} from '../support/harness';
import { TestClock } from '../support/clock';

const SHARE = 3;

/** Concurrent sends: `perProject[i]` requests of `recipients` addresses each for project `i`. @returns email ids per project. */
async function sendAtOnce(
  api: TestApi,
  projects: TestProject[],
  perProject: number,
  recipients: number,
): Promise<string[][]> {
  const calls = projects.flatMap((p, i) =>
    Array.from({ length: perProject }, () =>
      request(api.app)
        .post('/v1/send')
        .set('Authorization', p.auth)
        .send({
          to: Array.from({ length: recipients }, () => recipient('enq')),
          from: `s@${p.domain}`,
          subject: 'S',
          body: '<p>B</p>',
        })
        .then((res) => ({ i, res })),
    ),
  );
  const ids: string[][] = projects.map(() => []);
  for (const { i, res } of await Promise.all(calls)) {
    expect(res.status).toBe(202);
    ids[i].push(...res.body.data.emails.map((e: { email: string }) => e.email));
  }
  return ids;
}

describe('concurrent sends from several projects', () => {
  // The lane count is per minute: every request below shares the clock's one.
  const ctx = useApiWithProject({ SEND_FAIR_SHARE_PER_MINUTE: String(SHARE) }, { clock: new TestClock() });

  test("each project's emails get the priorities of its count, each one job with its email id", async () => {
    const projects = [ctx.p, await createTestProject(ctx.api.database), await createTestProject(ctx.api.database)];
    const ids = await sendAtOnce(ctx.api, projects, 6, 2);
    for (const [i, p] of projects.entries()) {
      const jobs = await Promise.all(ids[i].map((id) => ctx.api.queues.send.getJob(id)));
      expect(jobs.map((j) => j?.id)).toEqual(ids[i]);
      expect(jobs.map((j) => j?.data)).toEqual(ids[i].map((emailId) => ({ emailId, projectId: p.id })));
      // Counted one request after the other, 12 emails of one project with a share of 3 get 3 × 1 then 9 × 2,
      // in whatever order the requests were counted: as a multiset, exactly that.
      const expected = ids[i].map((_, n) => demotedPriority('transactional', n, SHARE));
      expect(jobs.map((j) => j!.opts.priority).sort()).toEqual(expected.sort());
    }
  });
});

describe('Redis down after the commit', () => {
  const ctx = useIsolatedApi();

  test('every concurrent send is accepted (202) without a job; the reconciler enqueues each email once', async () => {
    const { api } = ctx;
    const projects = [await createTestProject(api.database), await createTestProject(api.database)];
    // The API's fail-fast producer connection, closed: every command on it (lane count, job add) fails at once;
    // the rate limit falls back to its in-memory limiter.
    api.redis.disconnect();
    const ids = (await sendAtOnce(api, projects, 4, 2)).flat();
    expect(ids).toHaveLength(16);

    const redis = createRedis(api.config, 'producer');
    await waitReady(redis);
    const queues = createQueues(api.config, redis);
    const { send } = queues;
    try {
      expect(await Promise.all(ids.map((id) => send.getJob(id)))).toEqual(ids.map(() => undefined));
      const reconcile = {
        config: { ...api.config, reconcileAfterMs: 0 },
        database: api.database,
        queues,
        logger: createLogger({ logLevel: 'silent', logPretty: false }, 'test'),
      };
      const result = await reconcileOnce(reconcile);
      expect(result.enqueued).toBe(16);
      const jobs = await Promise.all(ids.map((id) => send.getJob(id)));
      expect(jobs.map((j) => j?.id)).toEqual(ids);
      // A second pass finds every email with its job: nothing enqueued twice.
      expect((await reconcileOnce(reconcile)).enqueued).toBe(0);
    } finally {
      await queues.closeAll();
      redis.disconnect();
    }
  });
});
