/**
 * Chaos: SES refusing, then frozen, then healthy again, under a steady stream of `POST /v1/send`. The worker (a
 * process of its own) talks to SES through a proxy of this test's, in front of the recording proxy and the
 * emulator, that plays in turn:
 *
 * 1. `5xx`: every SendEmail answered 500 `InternalFailure` or 503 `ServiceUnavailable` (transient: retried with
 *    backoff, spending an attempt);
 * 2. `throttle`: 429 `TooManyRequestsException` (retried later, no attempt spent, the queue paused);
 * 3. `refused`: the port closed and every open connection cut (ECONNREFUSED / reset);
 * 4. `frozen`: the connection accepted, the request read, no answer ever. Every second frozen request is
 *    passed on to SES first (its answer is dropped): a request SES *processed* whose answer was lost, as a real
 *    network can do. The worker cannot know SES took it, so after the timeout it sends that message again, with
 *    the same Message-ID. Those, and only those, may reach SES twice; the test counts them.
 * 5. `healthy`: everything passed on.
 *
 * Survived means: the worker process still running and ready; every frozen call given up by the worker within
 * the SES timeout (plus a wide margin for a busy machine); every accepted email `sent` once SES is healthy, none
 * `failed` because of a transient refusal; duplicates only among frozen requests passed on to SES.
 */
import request from 'supertest';
import { recipient, waitFor, type TestApi, type TestProject } from '../support/harness';
import { statusCounts, survival } from './survival';
import { SES_TIMEOUT_MS, type ChaosSes, type Mode } from './chaos-ses';
import { useChaosStack, type ChaosStack } from './chaos-stack';
import { toSummary } from '../support/summary';

describe('SES refusing, then frozen, then healthy again', () => {
  const stack = useChaosStack({
    SES_MAX_SEND_RATE: '50',
    WORKER_CONCURRENCY: '4',
    // Refusals and timeouts spend no attempt (SES unreachable); the 2 s of 5xx answers do (100 ms doubling).
    SEND_BACKOFF_MS: '100',
    SEND_MAX_ATTEMPTS: '20',
    // Longer than the SES timeout: a frozen call ends while the claim is still this worker's.
    SEND_LEASE_MS: '8000',
    RECONCILE_INTERVAL_MS: '1000',
    RECONCILE_AFTER_MS: '5000',
    RATE_LIMIT_PER_MINUTE: '100000',
  });
  let ses: ChaosSes;
  let api: TestApi;
  let p: TestProject;
  let worker: ChaosStack['worker'];
  beforeAll(() => void ({ ses, api, p, worker } = stack));

  test('the worker lives, frozen calls time out, every accepted email is sent once SES is healthy, none failed', async () => {
    const accepted = new Map<string, string>(); // address → email id
    const statuses = new Map<number, number>();
    let requests = 0;
    let sending = true;

    // A steady stream: one request every ~100 ms (pacing the load, not waiting for state). It stops when the
    // faults are over, or when the test fails (finally below), or after 90 s at the latest.
    const streamDeadline = Date.now() + 90_000;
    const stream = (async () => {
      while (sending && Date.now() < streamDeadline) {
        const to = recipient('ses');
        requests++;
        const res = await request(api.app)
          .post('/v1/send')
          .set('Authorization', p.auth)
          .send({ to, from: `s@${p.domain}`, subject: 'ses', body: '<p>ses</p>' });
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 202) accepted.set(to, res.body.data.emails[0].email);
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    const seenIn = (mode: Mode) => ses.seen.filter((s) => s.mode === mode).length;
    try {
      const delivered = async () => (await survival([...accepted.keys()], [...accepted.values()])).delivered;
      await waitFor(async () => (await delivered()) >= 3 || undefined, 30_000, '3 deliveries while healthy');

      // Each fault lasts 2 s and must have met at least one SendEmail (the refused one is seen in the worker's log).
      const phase = async (mode: Mode, met: () => boolean) => {
        await ses.setMode(mode);
        const started = Date.now();
        await waitFor(
          async () => (Date.now() - started >= 2_000 && met()) || undefined,
          30_000,
          `a send to meet SES ${mode}`,
        );
      };
      await phase('5xx', () => seenIn('5xx') > 0);
      await phase('throttle', () => seenIn('throttle') > 0);
      await phase('refused', () => worker.counts.refused > 0);
      await phase('frozen', () => seenIn('frozen') > 0);
      await ses.setMode('healthy');
    } finally {
      sending = false;
      await stream;
    }

    // Every frozen call was given up by the worker within the timeout (a wide margin for a busy machine).
    const frozen = ses.seen.filter((s) => s.mode === 'frozen');
    await waitFor(
      async () => frozen.every((s) => s.closedAt !== undefined) || undefined,
      SES_TIMEOUT_MS + 10_000,
      'the worker to give up every frozen call',
    );
    const waits = frozen.map((s) => s.closedAt! - s.at);
    // Really frozen until the worker's timeout (the proxy's clock starts once the body is in, a little late).
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(SES_TIMEOUT_MS / 2);
    expect(Math.max(...waits)).toBeLessThan(SES_TIMEOUT_MS + 8_000);

    const ids = [...accepted.values()];
    await waitFor(
      async () => (await statusCounts(api.database, ids)).sent === ids.length || undefined,
      60_000,
      'every accepted email sent',
    ).catch(async (err) => {
      throw new Error(
        `${(err as Error).message}: ${JSON.stringify(await statusCounts(api.database, ids))}\nworker:\n${worker.tail.slice(-30).join('\n')}`,
      );
    });
    const s = await survival([...accepted.keys()], ids);
    const forwarded = new Set(frozen.filter((f) => f.forwarded).map((f) => f.emailId));
    const c = worker.counts;
    const otherFive = [...statuses].filter(([st]) => st >= 500).reduce((n, [, k]) => n + k, 0);
    toSummary(
      `chaos ses: ${requests} requests, ${statuses.get(202) ?? 0} 202, ${otherFive} 5xx; SES answered ${seenIn('5xx')} 5xx and ${seenIn('throttle')} 429, ` +
        `worker saw ${c.refused} refused connections, ${c.timeout} timeouts (${frozen.length} frozen calls, ${forwarded.size} of them processed by SES, ` +
        `given up after ${Math.min(...waits)}-${Math.max(...waits)} ms at a ${SES_TIMEOUT_MS} ms timeout); ` +
        `emails accepted ${ids.length}, delivered ${s.delivered}, failed ${c.failed}, lost ${s.lost.length}, duplicated ${s.duplicated.length} (allowed: frozen and processed ${forwarded.size})`,
    );

    expect(worker.child.exitCode).toBeNull();
    expect((await fetch(`http://127.0.0.1:${worker.healthPort}/health/ready`)).status).toBe(200);
    expect(otherFive).toBe(0);
    expect(c.serverError).toBeGreaterThan(0);
    expect(c.throttled).toBeGreaterThan(0);
    expect(c.failed).toBe(0);
    expect(s.lost).toEqual([]);
    // Only a request SES processed without the worker hearing so is sent twice (same Message-ID).
    expect(s.duplicated.filter((id) => !forwarded.has(id))).toEqual([]);
    expect(s.duplicated.length).toBeLessThanOrEqual(forwarded.size);
  }, 120_000);
});
