/** The per-project rate limit's coalesced counts (rate-limiter-flexible's own in-memory limiter: no service). */
import { RateLimiterMemory, RateLimiterRes } from 'rate-limiter-flexible';
import { coalescedConsume } from './coalesced-limit';

/** An in-memory limiter of `points` per minute that records each call it gets (key, points). */
function limiter(points: number) {
  const calls: [string, number][] = [];
  const l = new (class extends RateLimiterMemory {
    override consume(key: string | number, n = 1, options?: Record<string, unknown>): Promise<RateLimiterRes> {
      calls.push([String(key), n]);
      return super.consume(key, n, options);
    }
  })({ points, duration: 60 });
  return { l, calls };
}

const view = (r: { res: RateLimiterRes; refused: boolean }) => ({
  consumed: r.res.consumedPoints,
  remaining: r.res.remainingPoints,
  refused: r.refused,
});

test('requests of one turn count in one call per project, each answered as if counted one by one', async () => {
  const { l, calls } = limiter(3);
  const consume = coalescedConsume(l, 3);
  const got = await Promise.all(['a', 'b', 'a', 'a', 'a', 'b'].map((p) => consume(p)));
  expect(calls).toEqual([
    ['a', 4],
    ['b', 2],
  ]);
  expect(got.map(view)).toEqual([
    { consumed: 1, remaining: 2, refused: false },
    { consumed: 1, remaining: 2, refused: false },
    { consumed: 2, remaining: 1, refused: false },
    { consumed: 3, remaining: 0, refused: false },
    { consumed: 4, remaining: 0, refused: true },
    { consumed: 2, remaining: 1, refused: false },
  ]);
  expect(got.every((r) => r.res.msBeforeNext > 0 && r.res.msBeforeNext <= 60_000)).toBe(true);

  // Later requests continue the same window: refused, as they would have been one by one.
  const later = await consume('a');
  expect(view(later)).toEqual({ consumed: 5, remaining: 0, refused: true });
  expect(calls[2]).toEqual(['a', 1]);
});

test('a request alone is counted alone', async () => {
  const { l, calls } = limiter(10);
  const consume = coalescedConsume(l, 10);
  expect(view(await consume('a'))).toEqual({ consumed: 1, remaining: 9, refused: false });
  expect(view(await consume('a'))).toEqual({ consumed: 2, remaining: 8, refused: false });
  expect(calls).toEqual([
    ['a', 1],
    ['a', 1],
  ]);
});

test("a limiter's error is each of its call's requests' error; other projects' calls are unaffected", async () => {
  const failing = new (class extends RateLimiterMemory {
    override consume(key: string | number, n = 1): Promise<RateLimiterRes> {
      return key === 'bad' ? Promise.reject(new Error('store down')) : super.consume(key, n);
    }
  })({ points: 5, duration: 60 });
  const consume = coalescedConsume(failing, 5);
  const got = await Promise.all(
    ['bad', 'ok', 'bad'].map((p) =>
      consume(p).then(
        (r) => view(r),
        (e: Error) => e.message,
      ),
    ),
  );
  expect(got).toEqual(['store down', { consumed: 1, remaining: 4, refused: false }, 'store down']);
});
