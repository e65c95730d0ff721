/**
 * The per-project rate limit's counts of concurrent requests, taken together: a project's requests that reach the
 * limit in one turn of the event loop (say, those read from many connections at once), or while its call is out,
 * count in one Redis call (`consume(project, n)`) instead of one each. Under `/v1/send` load the per-request call
 * was the API's largest Redis cost (its socket writes alone about 6% of the process's busy samples,
 * `npm run bench -- api`, `BENCH_PROFILE`); see docs/decisions/0165-rate-limit-counts-coalesced.md.
 *
 * Nothing changes but the number of calls: the k-th of a project's n requests in one call gets the answer it would
 * have got counted one after the other (consumed = the call's total − n + 1 + k; refused beyond the limit, and
 * every request counts, refused or not, as rate-limiter-flexible counts them), the window's reset alike. At a low
 * rate every request is counted alone, one event-loop turn later at most.
 *
 * @module
 */
import { RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import { Batcher } from '@mailroom/platform/batcher';

/** One request's count: its answer, and whether it is over the limit (refused). */
export interface CountedRequest {
  res: RateLimiterRes;
  refused: boolean;
}

type Outcome = CountedRequest | { error: unknown };

/**
 * Counts one request of a project against `limiter` (`perMinute` points per window), coalescing concurrent ones
 * (see the module notes). @returns the request's answer. @throws what the limiter throws other than its refusal
 * (a refusal is `refused`, not thrown).
 */
export function coalescedConsume(
  limiter: RateLimiterAbstract,
  perMinute: number,
): (projectId: string) => Promise<CountedRequest> {
  const count = async (projectId: string, n: number): Promise<Outcome[]> => {
    let total: RateLimiterRes;
    try {
      total = await limiter.consume(projectId, n);
    } catch (err) {
      if (!(err instanceof RateLimiterRes)) return new Array<Outcome>(n).fill({ error: err });
      total = err;
    }
    return Array.from({ length: n }, (_, k) => {
      const consumed = total.consumedPoints - n + 1 + k;
      const res = new RateLimiterRes(
        Math.max(0, perMinute - consumed),
        total.msBeforeNext,
        consumed,
        total.isFirstInDuration && k === 0,
      );
      return { res, refused: consumed > perMinute };
    });
  };
  // One batcher per project: one call at a time per project (the requests arriving during a call go together in
  // the next), projects never waiting for each other; idle ones are dropped when many are kept. Never a retry one by
  // one: a failed call is each of its requests' error.
  const batchers = new Map<string, Batcher<string, Outcome>>();
  const batcherOf = (projectId: string) => {
    let b = batchers.get(projectId);
    if (!b) {
      if (batchers.size >= 1000) for (const [p, idle] of batchers) if (!idle.busy) batchers.delete(p);
      b = new Batcher<string, Outcome>(
        (items) => count(projectId, items.length),
        async () => (await count(projectId, 1))[0],
        { maxBatch: 1000, maxInFlight: 1, sameTurn: true },
      );
      batchers.set(projectId, b);
    }
    return b;
  };
  return async (projectId) => {
    const outcome = await batcherOf(projectId).run(projectId);
    if ('error' in outcome) throw outcome.error;
    return outcome;
  };
}
